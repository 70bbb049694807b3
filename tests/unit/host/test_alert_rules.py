"""docs/metrics.md's example alert rules name only metrics the bridge and the recorder serve (a rule on a name
nobody serves never fires, and nothing says so), and Prometheus's own checker (promtool) loads them and fires each
on what it is for, on series scraped from the commands."""

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
from tests.conftest import REPO


def stand_in_recorder(connected: bool = False, store_failing: bool = False, missing: int = 0) -> SimpleNamespace:
    """What host_bridge.recorder.metrics reads of a recorder: board "b", heard from just now, `missing` messages of
    its boot 1 not stored."""
    book = SimpleNamespace(stored=1, top=1 + missing, above=set())
    ledger = SimpleNamespace(devices={"b": {1: book}}, heard={"b": time.time()})
    store = SimpleNamespace(rows_committed=5, files_committed=1, recorder_dups=0, repaired=0, pending=[], ledger=ledger)
    return SimpleNamespace(
        store=store, received=5, confirmations=0, link=object() if connected else None, lag_s=lambda: 0.0,
        store_broken="No space left on device" if store_failing else None,
    )  # fmt: skip


def served() -> set[str]:
    """Every metric name the two commands serve, as a scrape shows it (a counter with its _total)."""
    bridge = Bridge([BoardPort("a", "/nonexistent/ttyA")], Destination.parse("127.0.0.1:1"), [], None)
    recorder = stand_in_recorder(missing=1)  # (a boot with messages missing: its series is served)
    found: list[Metric] = [*bridge_families(bridge), *recorder_families(recorder)]  # type: ignore[arg-type]
    return {f.name + ("_total" if f.type == "counter" else "") for f in found}


def test_every_rule_names_metrics_that_are_served() -> None:
    text = (REPO / "docs" / "metrics.md").read_text()
    rules = re.search(r"```yaml\n(.*?)```", text, re.S)
    assert rules is not None, "docs/metrics.md has no rules block"
    expressions = re.findall(r"^\s*expr: (.+)$", rules[1], re.M)
    assert len(expressions) >= 8, expressions
    names = served()
    unknown = sorted({n for e in expressions for n in re.findall(r"\bdmqtt_[a-z0-9_]+", e)} - names)
    assert not unknown, unknown
    alerts = re.findall(r"^\s*- alert: (\w+)$", rules[1], re.M)
    assert {"BoardVanished", "RecorderStoreFailing", "BrokerUnreachable"} <= set(alerts), alerts


# -- the rules in Prometheus's own checker --------------------------------------------------------------------


def promtool() -> str:
    """promtool: on the PATH, or where `make test-deps` extracts it from Debian's prometheus package."""
    found = shutil.which("promtool") or str(REPO / "build" / "promtool" / "usr" / "bin" / "promtool")
    if not Path(found).exists():
        pytest.skip("promtool is not installed: `make test-deps` fetches it")
    return found


def rules_file(folder: Path) -> Path:
    rules = re.search(r"```yaml\n(.*?)```", (REPO / "docs" / "metrics.md").read_text(), re.S)
    assert rules is not None
    path = folder / "rules.yml"
    path.write_text(rules[1])
    return path


def exposition(families: list[Metric]) -> str:
    """The families as a scrape of /metrics shows them (what host_bridge.metrics serves)."""

    class Scraped:
        def collect(self) -> list[Metric]:
            return families

    registry = CollectorRegistry()
    registry.register(Scraped())  # type: ignore[arg-type]
    return generate_latest(registry).decode()


def recorder_scrape(connected: bool, store_failing: bool) -> str:
    return exposition(list(recorder_families(stand_in_recorder(connected, store_failing))))  # type: ignore[arg-type]


def bridge_scrape() -> str:
    """A bridge whose one configured port is a pattern nothing is plugged into."""
    bridge = Bridge([BoardPort("usb", "/nonexistent/serial/by-id/usb-*")], Destination.parse("127.0.0.1:1"), [], None)
    bridge.scan()
    return exposition(list(bridge_families(bridge)))


def series(scrape: str, job: str, minutes: int) -> list[dict[str, str]]:
    """promtool's input_series: each sample of the scrape, with the scrape's job, held for `minutes`."""
    out = []
    for family in text_string_to_metric_families(scrape):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted({**sample.labels, "job": job}.items()))
            out.append({"series": f"{sample.name}{{{labels}}}", "values": f"{sample.value:g}x{minutes}"})
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
    """docs/metrics.md's rules in promtool: `check rules` takes them, `check metrics` takes both commands'
    scrapes, and `test rules` runs them on series scraped from the commands in three scenarios. A full disk
    pages RecorderStoreFailing, not BrokerUnreachable; a broker away pages BrokerUnreachable; an empty port
    pattern is BoardVanished."""
    tool = promtool()
    rules = rules_file(tmp_path)
    checked = subprocess.run([tool, "check", "rules", str(rules)], capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    for scrape in (recorder_scrape(True, False), bridge_scrape()):
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
    ]  # fmt: skip
    tests = [{"interval": "1m", "input_series": given, "alert_rule_test": checks} for given, checks in scenarios]
    spec = tmp_path / "rules_test.yml"
    spec.write_text(json.dumps({"rule_files": [str(rules)], "evaluation_interval": "1m", "tests": tests}))
    run = subprocess.run([tool, "test", "rules", str(spec)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
