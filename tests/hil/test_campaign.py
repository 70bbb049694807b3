"""One campaign of everything at once (host_bridge.campaigns.chaos), gated by the Spark audit: boards on TCP and
on noisy serial lines, QoS 1 and QoS 2, power cuts, the broker, the bridge and the recorder each SIGKILLed and
restarted, plus a disk-full episode on the recorder. A SIGKILLed Mosquitto can lose messages it had acknowledged
and not yet saved (its persistence is a snapshot); with end-to-end confirmation (on in the campaign) the boards
send those again from flash, so the audit finds nothing lost and nothing twice. `make soak` runs a longer one."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from host_bridge.campaigns.chaos import run_campaign


@pytest.mark.hil_virtual("kills the bench's own broker, bridge and recorder")
def test_everything_at_once_keeps_every_promise(tmp_path: Path) -> None:
    result = run_campaign(tmp_path / "chaos", messages=120, cuts=2, faults=1, seed=11, broker_fault="kill")
    figures = result.figures()
    print(figures)
    assert not result.failures, result.failures
    expected_kinds = {"broker", "bridge", "recorder"} | ({"disk_full"} if os.geteuid() == 0 else set())
    assert {k for k, n in result.faults.items() if n} == expected_kinds, figures
    assert result.power_cuts == 2 * 4, figures  # every cut wanted, on each of the four boards
    assert result.audit is not None
    assert figures["qos"][1]["lost"] == 0 and figures["qos"][2]["lost"] == 0 and figures["qos"][2]["duplicated"] == 0, (
        figures
    )
    assert figures["qos"][1]["messages"] == 240 and figures["qos"][2]["messages"] == 240, figures
    assert result.ok
    for pid in result.pids:  # every process the campaign started has ended
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert str(tmp_path) not in Path("/proc/mounts").read_text(), "the campaign's disk outlived it"
