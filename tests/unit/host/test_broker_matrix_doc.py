"""docs/brokers.md's table is the interop matrix's last run (bench/brokers.json) as render_table writes it: a run
of tools/broker_matrix.py rewrites both, and neither is edited by hand."""

from __future__ import annotations

from host_bridge.campaigns.interop import Cell, load, render_table
from tests.conftest import REPO

BEGIN = "<!-- matrix: rendered from bench/brokers.json by tools/broker_matrix.py -->"
END = "<!-- /matrix -->"


def test_the_docs_table_is_the_last_runs() -> None:
    doc = (REPO / "docs" / "brokers.md").read_text()
    table = doc[doc.index(BEGIN) + len(BEGIN) : doc.index(END)].strip("\n")
    assert table == render_table(load(REPO / "bench" / "brokers.json")).strip("\n")


def test_a_table_names_each_cells_outcome_and_the_words_behind_it_once() -> None:
    cells = [
        Cell("rabbitmq", "3.10.8", "3.1.1", 1, "kept", "12 of 12", 12, 12),
        Cell("rabbitmq", "3.10.8", "3.1.1", 2, "fault", "the broker answered a QoS 2 PUBLISH with PUBACK", 0, 3),
        Cell("rabbitmq", "3.10.8", "5", 1, "refused", "the broker closed the connection", 0, 0),
        Cell("rabbitmq", "3.10.8", "5", 2, "refused", "the broker closed the connection", 0, 0),
    ]
    lines = render_table(cells).splitlines()
    assert lines[2] == "| rabbitmq 3.10.8 | 3.1.1 | - | kept | broker fault [1] |"
    assert lines[3] == "| rabbitmq 3.10.8 | 5 | - | refused [2] | refused [2] |"
    assert lines[5:] == [
        "- [1] the broker answered a QoS 2 PUBLISH with PUBACK",
        "- [2] the broker closed the connection",
    ]
