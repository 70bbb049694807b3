"""docs/metrics.md's example alert rules name only metrics the bridge and the recorder serve: a rule on a name
nobody serves never fires, and nothing says so."""

from __future__ import annotations

import re
from types import SimpleNamespace

from prometheus_client.core import Metric

from host_bridge.bridge.metrics import families as bridge_families
from host_bridge.bridge.relay import BoardPort, Bridge
from host_bridge.net import Destination
from host_bridge.recorder.metrics import families as recorder_families
from tests.conftest import REPO


def served() -> set[str]:
    """Every metric name the two commands serve, as a scrape shows it (a counter with its _total)."""
    bridge = Bridge([BoardPort("a", "/nonexistent/ttyA")], Destination.parse("127.0.0.1:1"), [], None)
    book = SimpleNamespace(stored=1, top=2, above=set())
    ledger = SimpleNamespace(devices={"b": {1: book}}, heard={"b": 0.0})
    store = SimpleNamespace(rows_committed=0, files_committed=0, recorder_dups=0, repaired=0, pending=[], ledger=ledger)
    recorder = SimpleNamespace(
        store=store, received=0, confirmations=0, link=None, lag_s=lambda: 0.0, store_broken=None
    )
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
