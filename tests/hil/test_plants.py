"""Every campaign's verdict catches a planted bug (tests/plants/): the chaos campaign (one plant in `make test`),
the demo and the soak's campaign in `make soak` (PLANTED_CAMPAIGNS=1), each on the same three plants, and the
confirmation scenario of a broker SIGKILL on the plant its faults exercise, each failing and naming what was lost
or doubled. Without a plant the same campaigns pass (tests/hil/test_campaign.py, tests/integration/test_demo.py,
tests/integration/test_confirmation.py, `make soak`'s chaos run).

- publish_before_flash: publish() returns before the message's record is on flash; a cut loses it, and its
  count with it. Only the witness (the board's `accepted` lines) shows the loss.
- lost_done: a flow's DONE record is never written; after a reset the finished flows are sent again. At QoS 2
  the broker passes them on twice, which the recorder's store hides: counted at the broker.
- forgotten_session: the session takes every connection for one where the broker forgot it, and sends what was
  in flight again as new messages (DUP 0): QoS 2 passed on twice, counted at the broker."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from host_bridge.campaigns.chaos import CampaignResult, run_campaign
from host_bridge.campaigns.demo import run_demo
from tests.integration.test_confirmation import broker_sigkill_scenario
from tests.plants import NAMES, planted_app

# What each plant's verdict must name: the witness's loss, or a duplicate counted at the broker (a journal that
# forgets its DONE records can also lose: an old flow replayed under a packet id a newer one took).
NAMED = {
    "publish_before_flash": ("accepted and never arrived",),
    "lost_done": ("delivered twice at the broker", "accepted and never arrived"),
    "forgotten_session": ("delivered twice at the broker",),
}
SOAK = pytest.mark.skipif(not os.environ.get("PLANTED_CAMPAIGNS"), reason="make soak: PLANTED_CAMPAIGNS=1")


def said(result: CampaignResult) -> str:
    problems = [p for v in (result.audit.verdicts.values() if result.audit else ()) for p in v.problems]
    return "\n".join(problems + result.failures)


# `make test` gives the chaos campaign the issue's own plant (a loss only the witness shows); `make soak` all
# three (a chaos campaign costs half a minute of the suite's six).
CHAOS_PLANTS = [pytest.param(name, marks=() if name == "publish_before_flash" else SOAK) for name in NAMES]


@pytest.mark.hil_virtual("runs its own broker, bridge and recorder")
@pytest.mark.parametrize("plant", CHAOS_PLANTS)
def test_the_chaos_campaign_fails_each_plant_naming_what_it_broke(tmp_path: Path, plant: str) -> None:
    app = planted_app(tmp_path / "app", plant)
    result = run_campaign(tmp_path / "chaos", messages=80, cuts=3, faults=0, seed=11, app=app, report=False)
    assert str(tmp_path) not in Path("/proc/mounts").read_text(), "the campaign's disk outlived it"
    assert not result.ok, f"the chaos campaign passed {plant}: {result.figures()}"
    assert any(name in said(result) for name in NAMED[plant]), said(result)


@SOAK
@pytest.mark.hil_virtual("runs its own broker, bridge and recorder")
@pytest.mark.parametrize("plant", NAMES)
def test_the_soak_campaign_fails_each_plant(tmp_path: Path, plant: str) -> None:
    """`make soak`'s campaign (its broker, bridge and recorder killed, its disk filled) on each plant."""
    app = planted_app(tmp_path / "app", plant)
    result = run_campaign(tmp_path / "chaos", messages=600, cuts=5, faults=3, seed=7, app=app)
    assert not result.ok, f"the soak's campaign passed {plant}: {result.figures()}"
    assert any(name in said(result) for name in NAMED[plant]), said(result)


@SOAK
@pytest.mark.hil_virtual("runs its own broker, bridge and recorder")
@pytest.mark.parametrize("plant", NAMES)
def test_the_demo_fails_each_plant(tmp_path: Path, plant: str, capsys: pytest.CaptureFixture[str]) -> None:
    app = planted_app(tmp_path / "app", plant)
    result = run_demo(tmp_path / "demo", app=app)
    out = capsys.readouterr().out
    assert result.exit_code == 1 and result.audit is not None, f"the demo passed {plant}"
    problems = [p for v in result.audit.verdicts.values() for p in v.problems]
    assert any(name in "\n".join(problems) + out for name in NAMED[plant]), out[-3000:]


# The plants the confirmation scenario's faults exercise: it makes no power cut and resets no board, which
# publish_before_flash and lost_done need to lose or double anything (it passes them, as it must); its broker
# SIGKILL makes every board reconnect to a session, which forgotten_session mistakes for a forgotten one.
WITHOUT_CUTS = ["forgotten_session"]


@SOAK
@pytest.mark.hil_virtual("runs its own broker, boards and recorder")
@pytest.mark.parametrize("plant", WITHOUT_CUTS)
def test_the_confirmation_scenario_fails_each_plant_it_exercises(tmp_path: Path, plant: str) -> None:
    """tests/integration/test_confirmation.py's broker SIGKILL, its store judged by the witness, on each plant it
    exercises: a loss or a duplicate the store shows, or the stack's own count of QoS 2 duplicates at the
    broker."""
    stack, judged, failures = broker_sigkill_scenario(tmp_path, planted_app(tmp_path / "app", plant))
    problems = [p for v in judged["verdicts"].values() for p in v.problems]
    duplicates, _, _ = stack.duplicates_at_the_broker()
    assert problems or duplicates or failures, f"the confirmation scenario passed {plant}: {judged}"
