"""`host-bridge charge` against a Power Profiler Kit II stand-in on a pseudo-terminal (tests/integration/
ppk2_standin.py), through ppk2-api itself: the trace it plays has two sampling wakes and a sending one, whose
times and charges are known, and the command gives them under figure 14's names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from host_bridge.cli import main
from tests.integration.ppk2_standin import StandInPpk2

# (seconds, microamperes): deep sleep, a sampling wake (the CPU, 45 mA), a sending wake (its radio on: 50 mA
# joining, 110 mA talking), another sampling wake.
SLEEP_UA = 12.0
TRACE = [(0.4, SLEEP_UA), (0.2, 45_000.0), (0.4, SLEEP_UA), (0.3, 50_000.0), (0.5, 110_000.0), (0.4, SLEEP_UA),
         (0.2, 45_000.0), (0.3, SLEEP_UA)]  # fmt: skip
SECONDS = sum(s for s, _ in TRACE)


def uah(seconds: float, ua: float) -> float:
    return ua * seconds / 3600


def test_the_charge_of_each_kind_of_wake_through_a_ppk2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kit = StandInPpk2(TRACE)
    try:
        out = tmp_path / "charge.json"
        code = main(["charge", "--ppk2", kit.path, "--mv", "3300", "--seconds", str(SECONDS), "--out", str(out)])
    finally:
        kit.close()
    assert code == 0, capsys.readouterr()
    rows = json.loads(out.read_text())
    assert (rows["wakes"], rows["sampling_wakes"], rows["sending_wakes"]) == (3, 2, 1), rows
    assert rows["sampling_wake_ms"] == pytest.approx(200, abs=1) and rows["sending_wake_ms"] == pytest.approx(
        800, abs=1
    )
    assert rows["sampling_wake_uah"] == pytest.approx(uah(0.2, 45_000), rel=0.02), rows
    assert rows["sending_wake_uah"] == pytest.approx(uah(0.3, 50_000) + uah(0.5, 110_000), rel=0.02), rows
    assert rows["sleep_ua"] == pytest.approx(SLEEP_UA, rel=0.05), rows
    whole = sum(uah(s, ua) for s, ua in TRACE)
    assert rows["uah_per_reading"] == pytest.approx(whole / 3, rel=0.02), rows
    # The kit was set up as the board's source and measured: its commands, in the order ppk2-api sends them.
    assert kit.commands[0] == 0x19 and 0x06 in kit.commands and kit.commands[-1] == 0x07, kit.commands
    assert "uah_per_reading" in capsys.readouterr().out


def test_a_port_that_is_no_ppk2_is_refused_saying_so(capsys: pytest.CaptureFixture[str]) -> None:
    kit = StandInPpk2(TRACE, answers=False)
    try:
        code = main(["charge", "--ppk2", kit.path, "--seconds", "1"])
    finally:
        kit.close()
    assert code == 2
    assert "no calibration came back: is it a Power Profiler Kit II?" in capsys.readouterr().err
