"""The report as an engineer reads it: the campaign's power cuts and kills on a timeline, link counters per
board, coloured verdicts, legends beside the plots rather than over them, and a fleet of 1,000 boards
summarized rather than listed."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import Counter
from datetime import UTC, timedelta
from pathlib import Path
from typing import Any

import matplotlib.image
import numpy as np
import pytest
from pyspark.sql import SparkSession

from dmqtt_pipeline import report
from dmqtt_pipeline.audit import first_deliveries
from dmqtt_pipeline.jobs import run_job
from dmqtt_pipeline.spark import read_telemetry
from dmqtt_telemetry.timeline import Event
from tests.pipeline.datasets import T0, Msg, write_dataset

CUT = "#c62828"  # the timeline's power-cut crosses
RECORDER_KILL = report.SYSTEM_STYLE["recorder-kill"][0]


def pixels_of(png: Path, colour: str) -> int:
    """How many pixels of `png` have `colour` (within a small tolerance for anti-aliasing)."""
    image = matplotlib.image.imread(png)[:, :, :3]
    target = np.array([int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)])
    return int((np.abs(image - target).max(axis=2) < 0.04).sum())


@pytest.fixture
def figures(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every figure the report draws, kept (the report closes them once saved)."""
    kept: list[Any] = []
    original = report._png

    def keep(fig: Any) -> bytes:
        fig.canvas.draw()
        kept.append((fig, [(ax, ax.get_legend()) for ax in fig.axes]))
        return original(fig)

    monkeypatch.setattr(report, "_png", keep)
    return kept


def test_cuts_kills_and_link_counters_are_on_the_report(
    tmp_path: Path, spark: SparkSession, figures: list[Any]
) -> None:
    # Two boards: a has a power cut between boot 1 and boot 2, b runs through a recorder kill; b lost seq 3.
    msgs = [Msg("a", 1, s, s * 1000) for s in range(5)] + [Msg("a", 2, s, 9000 + s * 1000) for s in range(5)]
    msgs += [Msg("b", 1, s, s * 1500, qos=2) for s in range(8) if s != 3]
    write_dataset(tmp_path / "rec", msgs)
    events = [
        Event(T0 + timedelta(seconds=6), "power-cut", "a"),
        Event(T0 + timedelta(seconds=7), "recorder-kill"),
        Event(T0 + timedelta(seconds=14), "link-counters", "b", {"retransmissions": 7, "crc_errors": 2}),
    ]
    run_job(spark, "report", str(tmp_path / "rec"), str(tmp_path / "with"), events=events)
    run_job(spark, "report", str(tmp_path / "rec"), str(tmp_path / "without"))
    marked, bare = tmp_path / "with" / "timeline.png", tmp_path / "without" / "timeline.png"
    assert pixels_of(marked, CUT) > 20 and pixels_of(bare, CUT) == 0
    assert pixels_of(marked, RECORDER_KILL) > 50 and pixels_of(bare, RECORDER_KILL) == 0
    page = (tmp_path / "with" / "index.html").read_text()
    assert '<img src="timeline.png"' in page and "Serial link per board" in page
    assert "<th>crc_errors</th><th>retransmissions</th>" in page and "<td>b</td><td>2</td><td>7</td>" in page
    assert '<td class="verdict pass">PASS</td>' in page and '<td class="verdict fail">FAIL</td>' in page
    assert "td.pass { background: #2e7d32; }" in page
    assert "No <code>--timeline</code> given" in (tmp_path / "without" / "index.html").read_text()
    # Short runs draw no one-minute means, and their title does not claim them.
    titles = [ax.get_title() for fig, axes in figures for ax, _ in axes]
    assert "Readings over time" in titles and not any("one-minute means" in t for t in titles)
    # No legend over data: each legend lies right of its plot.
    legends = [(ax, legend) for _, axes in figures for ax, legend in axes if legend is not None]
    assert len(legends) >= 6
    for ax, legend in legends:
        assert legend.get_window_extent().x0 >= ax.get_window_extent().x1, ax.get_title()


def test_a_fleet_of_a_thousand_boards_is_summarized_not_listed(
    tmp_path: Path, spark: SparkSession, figures: list[Any]
) -> None:
    msgs = []
    for d in range(1000):
        dev = f"board-{d:04d}"
        lost = {1} if d % 250 == 0 else set()  # four boards lost a message
        msgs += [
            Msg(dev, 1, s, d * 10 + s * 20_000, qos=1 + d % 2, reading=20 + d % 7) for s in range(3) if s not in lost
        ]
    write_dataset(tmp_path / "rec", msgs)
    events = [Event(T0 + timedelta(seconds=d), "power-cut", f"board-{d:04d}") for d in range(0, 1000, 10)]
    outcome = run_job(spark, "report", str(tmp_path / "rec"), str(tmp_path / "out"), events=events)
    assert outcome.audit is not None and len(outcome.audit.boots) == 1000
    page = (tmp_path / "out" / "index.html").read_text()
    assert "1000 boots of 1000 devices; the 4 with a finding are listed" in page
    assert page.count("<tr>") < 20 and len(page) < 20_000  # not a row per board
    delivery, timeline, _latency, readings = (axes[0][0] for _, axes in figures)
    assert delivery.get_title() == "Delivery per QoS over the fleet (1000 boots)"
    assert [t.get_text() for t in delivery.get_yticklabels()] == ["QoS 1: 500 devices", "QoS 2: 500 devices"]
    assert timeline.get_title() == "Messages, boards, boots and power cuts over time (1000 devices)"
    assert readings.get_title() == "Readings over time, one-minute windows over 1000 devices"
    assert all(len(ax.get_legend().get_texts()) <= 4 for _, axes in figures for ax, _ in axes if ax.get_legend())


def test_a_fleets_figures_are_aggregated_over_every_row_and_agree_with_duckdb(
    tmp_path: Path, spark: SparkSession
) -> None:
    """1,000 boards over three hours, one message every 10 minutes each (18,000 rows): every 97th board stops after
    an hour (gone silent), boards with d % 10 == 3 publish at QoS 0 and lose seq 5, and a few QoS 1 boards lose
    1, 2 or 3 messages. The report's numbers, aggregated in Spark over every row, against DuckDB's own over the
    same files: the latency histogram's counts per QoS, the activity bins over the whole range, the boards gone
    silent; the findings table lists the QoS 1 losses worst first and the QoS 0 ones apart."""
    import duckdb

    every_ms, lost_by = 600_000, {100: {4}, 200: {4, 6}, 300: {4, 6, 8}}
    msgs = []
    for d in range(1000):
        dev, qos = f"fleet-{d:04d}", 0 if d % 10 == 3 else 1
        last = 6 if d % 97 == 0 else 18
        gone = lost_by.get(d, set()) | ({5} if qos == 0 else set())
        msgs += [Msg(dev, 1, s, d * 50 + s * every_ms, qos=qos) for s in range(last) if s not in gone]
    write_dataset(tmp_path / "rec", sorted(msgs, key=lambda m: m.at_ms), commit_every=4000)
    db = duckdb.connect()
    db.sql(f"CREATE VIEW rows AS SELECT * FROM read_parquet('{tmp_path}/rec/date=*/*.parquet', hive_partitioning=1)")
    db.sql("CREATE VIEW firsts AS SELECT dev, boot, seq, min(qos) AS qos, min(received_at) AS heard FROM rows "
           "GROUP BY dev, boot, seq")  # fmt: skip
    firsts = first_deliveries(read_telemetry(spark, str(tmp_path / "rec")))

    _, by_qos = report.latency_histogram(firsts)
    per_qos = dict(db.sql("SELECT qos, count(*) FROM firsts GROUP BY qos").fetchall())
    assert {q: sum(c) for q, c in by_qos.items()} == per_qos == Counter(m.qos for m in msgs)

    seconds, bins = report.activity(firsts)
    ((first, last),) = db.sql("SELECT epoch(min(heard)), epoch(max(heard)) FROM firsts").fetchall()  # (no pytz)
    starts = [start.replace(tzinfo=UTC).timestamp() for start, _, _ in bins]  # (Spark's naive UTC)
    assert starts[0] <= first < starts[0] + seconds and starts[-1] <= last < starts[-1] + seconds
    assert sum(n for _, n, _ in bins) == sum(per_qos.values()) and max(b for _, _, b in bins) == 1000

    silent = report.silent_boards(firsts)
    expected = db.sql(
        """WITH gaps AS (SELECT dev, heard,
                                epoch(heard) - epoch(lag(heard) OVER (PARTITION BY dev ORDER BY heard)) AS interval_s
                         FROM firsts),
                per AS (SELECT dev, max(heard) AS last_at, median(interval_s) AS period_s FROM gaps GROUP BY dev)
           SELECT dev FROM per, (SELECT max(heard) AS end_at FROM firsts)
           WHERE epoch(end_at) - epoch(last_at) > 3 * period_s AND epoch(end_at) - epoch(last_at) >= 60
           ORDER BY epoch(end_at) - epoch(last_at) DESC, dev"""
    ).fetchall()
    assert [s["dev"] for s in silent] == [dev for (dev,) in expected] and len(silent) == 11
    assert all(s["period_s"] == pytest.approx(600, abs=1) for s in silent)

    outcome = run_job(spark, "report", str(tmp_path / "rec"), str(tmp_path / "out"))
    assert outcome.audit is not None
    page = (tmp_path / "out" / "index.html").read_text()
    listed = re.findall(r"<tr><td>(fleet-\d{4})</td>", page.split("<h2>Per device and boot</h2>")[1])
    assert listed[:3] == ["fleet-0300", "fleet-0200", "fleet-0100"]  # the worst first, QoS 0 not among them
    assert not any(int(dev[-4:]) % 10 == 3 for dev in listed)
    # (fleet-0873 is QoS 0 and silent from seq 5: its lost seq 5 is a tail, which no audit sees without --expect)
    assert "99 boots at QoS 0 lost 99 messages, which QoS 0 allows" in page
    assert "<h2>Boards gone silent</h2>" in page and "11 boards last heard from" in page


# A report probe: once the page has loaded, its title says how many images it has and which did not load.
PROBE = """<script>
window.addEventListener("load", () => {
  const images = Array.from(document.images);
  const broken = images.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.getAttribute("src"));
  document.title = "images " + images.length + " broken " + JSON.stringify(broken);
});
</script>"""


def chromium(*args: str) -> subprocess.CompletedProcess[str]:
    """Debian's headless Chromium (make test-deps installs it), offline: no background traffic, every host name
    unresolvable, so that the page can only show what is in its folder."""
    browser = shutil.which("chromium-headless-shell") or shutil.which("chromium")
    assert browser is not None, "no Chromium: `make test-deps` installs Debian's chromium-headless-shell"
    flags = [
        "--no-sandbox",  # CI runs as root, where Chromium's sandbox refuses to start
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--no-first-run",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        "--allow-file-access-from-files",
        "--virtual-time-budget=5000",
    ]
    return subprocess.run([browser, *flags, *args], capture_output=True, text=True, timeout=120)


def loaded_images(page: Path) -> str:
    probe = page.with_name("probe.html")
    probe.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    dom = chromium("--dump-dom", probe.as_uri())
    found = re.search(r"<title>(images \d+ broken .*?)</title>", dom.stdout)
    assert found is not None, dom.stdout[-2000:] + dom.stderr[-2000:]
    return found.group(1)


def test_the_report_renders_in_a_real_browser_with_every_image(tmp_path: Path, spark: SparkSession) -> None:
    msgs = [Msg("a", 1, s, s * 1000) for s in range(5)] + [Msg("b", 1, s, s * 700, qos=2) for s in range(6)]
    write_dataset(tmp_path / "rec", msgs)
    events = [Event(T0 + timedelta(seconds=2), "power-cut", "a"), Event(T0 + timedelta(seconds=3), "broker-kill")]
    run_job(spark, "report", str(tmp_path / "rec"), str(tmp_path / "out"), events=events)
    page = tmp_path / "out" / "index.html"
    images = page.read_text().count("<img ")
    assert images == 4 and loaded_images(page) == f"images {images} broken []"
    # The probe can fail: a report whose plot is missing is caught.
    (tmp_path / "out" / "latency.png").unlink()
    assert loaded_images(page) == f'images {images} broken ["latency.png"]'
    # What an engineer sees: the PASS verdicts on green, the plots drawn.
    shot = tmp_path / "shot.png"
    chromium(f"--screenshot={shot}", "--window-size=1200,2400", page.as_uri())
    assert pixels_of(shot, "#2e7d32") > 200 and pixels_of(shot, "#4c9a2a") > 2000
