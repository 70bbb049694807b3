"""The shipped alert rules (tools/monitoring/dmqtt-rules.yml) and dashboard (tools/monitoring/dmqtt-dashboard.json)
name only metrics the bridge and the recorder serve (a rule or a panel on a name nobody serves never fires or
draws, and nothing says so), and Prometheus's own checker (promtool) loads the rules and fires each on what it is
for, on series scraped from the commands."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric
from prometheus_client.parser import text_string_to_metric_families

from host_bridge.bridge.metrics import families as bridge_families
from host_bridge.bridge.relay import BoardPort, Bridge
from host_bridge.net import Destination
from host_bridge.recorder.metrics import families as recorder_families
from host_bridge.recorder.store import StoreUsage
from tests.conftest import REPO

GiB = 1 << 30


def stand_in_recorder(
    connected: bool = False, store_failing: bool = False, missing: int = 0, free_bytes: int = 50 * GiB,
    maintenance_failing: bool = False, reload_ok: bool = True,
) -> SimpleNamespace:  # fmt: skip
    """What host_bridge.recorder.metrics reads of a recorder: board "b", heard from just now, `missing` messages of
    its boot 1 not stored; its store on a 100 GiB disk with `free_bytes` left; maintenance last done at the epoch
    (promtool's time 0)."""
    book = SimpleNamespace(stored=1, top=1 + missing, above=set())
    ledger = SimpleNamespace(devices={"b": {1: book}}, heard={"b": time.time()})
    usage = StoreUsage(3 * GiB, 40, free_bytes, 100 * GiB, "2026-01-01")
    store = SimpleNamespace(
        rows_committed=5, files_committed=1, recorder_dups=0, repaired=0, pending=[], ledger=ledger,
        usage=lambda: usage,
    )  # fmt: skip
    return SimpleNamespace(
        store=store, received=5, confirmations=0, link=object() if connected else None, lag_s=lambda: 0.0,
        store_broken="No space left on device" if store_failing else None, maintained_at=0.0,
        maintenance_failing="compaction: No space left on device" if maintenance_failing else None,
        maintenance_failures=int(maintenance_failing), reload_ok=reload_ok,
    )  # fmt: skip


def served() -> set[str]:
    """Every metric name the two commands serve, as a scrape shows it (a counter with its _total)."""
    bridge = Bridge([BoardPort("a", "/nonexistent/ttyA")], Destination.parse("127.0.0.1:1"), [], None)
    recorder = stand_in_recorder(missing=1)  # (a boot with messages missing: its series is served)
    found: list[Metric] = [*bridge_families(bridge), *recorder_families(recorder)]  # type: ignore[arg-type]
    return {f.name + ("_total" if f.type == "counter" else "") for f in found}


RULES = REPO / "tools" / "monitoring" / "dmqtt-rules.yml"
DASHBOARD = REPO / "tools" / "monitoring" / "dmqtt-dashboard.json"


def test_every_rule_names_metrics_that_are_served() -> None:
    text = RULES.read_text()
    names = served()
    unknown = sorted(set(re.findall(r"\bdmqtt_[a-z0-9_]+", text)) - names)
    assert not unknown, unknown
    alerts = re.findall(r"^\s*- alert: (\w+)$", text, re.M)
    assert len(alerts) >= 12, alerts
    assert {"BoardGone", "ReloadFailed", "RecorderDiskFilling", "RecorderMaintenanceNotRun"} <= set(alerts), alerts
    for doc in ("metrics.md", "services.md"):  # the operator's pages point at the file
        assert "tools/monitoring/dmqtt-rules.yml" in (REPO / "docs" / doc).read_text(), doc


def test_the_dashboard_draws_only_served_metrics_and_covers_what_an_operator_watches() -> None:
    board = json.loads(DASHBOARD.read_text())
    panels = [p for p in board["panels"] if p.get("type") != "row"]
    exprs = {p["title"]: [t["expr"] for t in p["targets"]] for p in panels}
    assert all(exprs.values()), exprs
    names = served() | {"process_resident_memory_bytes"}
    used = {n for each in exprs.values() for e in each for n in re.findall(r"\b(?:dmqtt|process)_[a-z0-9_]+", e)}
    assert not used - names, sorted(used - names)
    for wanted in ("dmqtt_bridge_boards_connected", "dmqtt_recorder_received_total", "dmqtt_recorder_lag_seconds",
                   "dmqtt_recorder_store_bytes", "dmqtt_bridge_board_crc_errors_total"):  # fmt: skip
        assert wanted in used, wanted
    # An importable dashboard: its data source is chosen at import, each panel has a place and a unique id.
    assert any(i.get("name") == "DS_PROMETHEUS" for i in board["__inputs"]), board.get("__inputs")
    assert len({p["id"] for p in board["panels"]}) == len(board["panels"])
    assert all({"x", "y", "w", "h"} <= set(p["gridPos"]) for p in board["panels"])


# -- the rules in Prometheus's own checker --------------------------------------------------------------------


def promtool() -> str:
    """promtool: on the PATH, or where `make test-deps` extracts it from Debian's prometheus package."""
    found = shutil.which("promtool") or str(REPO / "build" / "promtool" / "usr" / "bin" / "promtool")
    if not Path(found).exists():
        pytest.skip("promtool is not installed: `make test-deps` fetches it")
    return found


def exposition(families: list[Metric]) -> str:
    """The families as a scrape of /metrics shows them (what host_bridge.metrics serves)."""

    class Scraped:
        def collect(self) -> list[Metric]:
            return families

    registry = CollectorRegistry()
    registry.register(Scraped())  # type: ignore[arg-type]
    return generate_latest(registry).decode()


def recorder_scrape(connected: bool, store_failing: bool, **state: object) -> str:
    recorder = stand_in_recorder(connected, store_failing, **state)  # type: ignore[arg-type]
    return exposition(list(recorder_families(recorder)))  # type: ignore[arg-type]


def bridge_scrape(reload_ok: bool = True) -> str:
    """A bridge whose one configured port is a pattern nothing is plugged into."""
    bridge = Bridge([BoardPort("usb", "/nonexistent/serial/by-id/usb-*")], Destination.parse("127.0.0.1:1"), [], None)
    bridge.scan()
    bridge.reload_ok = reload_ok
    return exposition(list(bridge_families(bridge)))


def fleet_scrape(folder: Path) -> tuple[str, str]:
    """A bridge serving 200 boards behind one pattern, every port open, then one unplugged: (its scrape, the
    board gone)."""
    for i in range(200):
        (folder / f"usb-board-{i:03}").touch()
    bridge = Bridge([BoardPort("usb", str(folder / "usb-*"))], Destination.parse("127.0.0.1:1"), [], None)
    bridge.scan()
    for session in bridge.boards():
        session.present = session.connected = True  # (the sessions are not started: open ports, connected)
    (folder / "usb-board-117").unlink()
    bridge.scan()
    assert len(bridge.boards()) == 199
    return exposition(list(bridge_families(bridge))), "usb-board-117"


def series(scrape: str, job: str, minutes: int) -> list[dict[str, str]]:
    """promtool's input_series: each sample of the scrape, with the scrape's job, held for `minutes` (a sample of
    a `..._missing_seconds` or `..._silent_seconds` gauge grows by 60 a minute, as it does while a board is away)."""
    out = []
    for family in text_string_to_metric_families(scrape):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted({**sample.labels, "job": job}.items()))
            growing = sample.name.endswith(("_missing_seconds", "_silent_seconds"))
            values = f"{sample.value:g}+60x{minutes}" if growing else f"{sample.value:g}x{minutes}"
            out.append({"series": f"{sample.name}{{{labels}}}", "values": values})
    return out


def expected(alert: str, rules: str, labels: dict[str, str]) -> dict[str, object]:
    """What the alert looks like firing for a series with `labels`: its rule's labels and its summary filled."""
    block = re.search(rf"- alert: {alert}\n(.*?)(?=\n\s*- alert:|\Z)", rules, re.S)
    assert block is not None, alert
    severity = re.search(r"severity: (\w+)", block[1])
    summary = re.search(r'summary: "(.*)"', block[1])
    filled = re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels[m[1]], summary[1]) if summary else None
    found: dict[str, object] = {"exp_labels": {**labels, "severity": severity[1] if severity else ""}}
    if filled is not None:
        found["exp_annotations"] = {"summary": filled}
    return found


def test_promtool_loads_the_rules_and_each_alert_fires_on_what_it_is_for(tmp_path: Path) -> None:
    """The rules in promtool: `check rules` takes them, `check metrics` takes both commands' scrapes, and `test
    rules` runs them on series scraped from the commands. A full disk pages RecorderStoreFailing, not
    BrokerUnreachable; a broker away pages BrokerUnreachable; an empty port pattern is BoardVanished; one board
    of 200 gone behind a pattern is BoardGone, for that board only; a failed reload, a disk nearly full,
    maintenance failing or not run for a day each fire their own alert."""
    tool = promtool()
    rules = RULES
    fleet, gone = fleet_scrape(tmp_path)
    checked = subprocess.run([tool, "check", "rules", str(rules)], capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    for scrape in (recorder_scrape(True, False), bridge_scrape(), fleet):
        lint = subprocess.run([tool, "check", "metrics"], input=scrape, capture_output=True, text=True, timeout=60)
        assert lint.returncode == 0, lint.stdout + lint.stderr + scrape
    text = rules.read_text()

    def fires(alert: str, at: str, **labels: str) -> dict[str, object]:
        return {"eval_time": at, "alertname": alert, "exp_alerts": [expected(alert, text, labels)]}

    def silent(alert: str, at: str) -> dict[str, object]:
        return {"eval_time": at, "alertname": alert, "exp_alerts": []}

    pattern = "/nonexistent/serial/by-id/usb-*"
    scenarios = [
        # A full disk: the recorder disconnects on purpose, and that is a disk problem.
        (series(recorder_scrape(False, True), "recorder", 20),
         [fires("RecorderStoreFailing", "5m", job="recorder"), silent("BrokerUnreachable", "5m")]),
        # The broker away, the store fine.
        (series(recorder_scrape(False, False), "recorder", 20),
         [fires("BrokerUnreachable", "5m", job="recorder"), silent("RecorderStoreFailing", "5m")]),
        # Nothing behind a configured pattern, past the rule's 10 minutes (not before).
        (series(bridge_scrape(), "bridge", 20),
         [fires("BoardVanished", "15m", job="bridge", port=pattern), silent("BoardVanished", "5m")]),
        # One board of 200 unplugged from behind a pattern: the pattern still has 199, so only BoardGone tells.
        (series(fleet, "bridge", 20),
         [fires("BoardGone", "12m", job="bridge", board=gone), silent("BoardGone", "8m"),
          silent("BoardVanished", "15m"), silent("BoardDisconnected", "15m")]),
        # A reload whose config did not load, on either command.
        (series(bridge_scrape(reload_ok=False), "bridge", 5) + series(
            recorder_scrape(True, False, reload_ok=False), "recorder", 5),
         [{"eval_time": "1m", "alertname": "ReloadFailed", "exp_alerts": [
             expected("ReloadFailed", text, {"job": "bridge"}), expected("ReloadFailed", text, {"job": "recorder"})]}]),
        # The store's disk at 5 % free: warned 15 minutes on, well before it is full (not while it has room).
        (series(recorder_scrape(True, False, free_bytes=5 * GiB), "recorder", 30),
         [fires("RecorderDiskFilling", "20m", job="recorder"), silent("RecorderDiskFilling", "10m")]),
        (series(recorder_scrape(True, False), "recorder", 30), [silent("RecorderDiskFilling", "20m")]),
        # Maintenance failing for an hour.
        (series(recorder_scrape(True, False, maintenance_failing=True), "recorder", 90),
         [fires("RecorderMaintenanceFailing", "70m", job="recorder"), silent("RecorderMaintenanceFailing", "50m")]),
        # No maintenance pass for a day (the last at time 0).
        (series(recorder_scrape(True, False), "recorder", 1560),
         [fires("RecorderMaintenanceNotRun", "25h", job="recorder"), silent("RecorderMaintenanceNotRun", "23h")]),
    ]  # fmt: skip
    tests = [{"interval": "1m", "input_series": given, "alert_rule_test": checks} for given, checks in scenarios]
    spec = tmp_path / "rules_test.yml"
    spec.write_text(json.dumps({"rule_files": [str(rules)], "evaluation_interval": "1m", "tests": tests}))
    run = subprocess.run([tool, "test", "rules", str(spec)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
