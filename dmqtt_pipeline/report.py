"""`python -m dmqtt_pipeline report`: one HTML page with PNG plots beside it (delivery per device, latency
distribution, readings over time), opened straight from the file system: no server, no script, no network."""

from __future__ import annotations

import html
import io
from collections import defaultdict
from datetime import UTC, datetime
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only; no display on a bench host
import matplotlib.dates as mdates
import matplotlib.pyplot as plt
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dmqtt_pipeline.audit import CLOCK_NOTE, PROMISES, AuditResult, first_deliveries, messages
from dmqtt_telemetry.promises import format_ranges

LATENCY_SAMPLE = 200_000  # latencies plotted at most; the audit's percentiles use every message
READINGS_SAMPLE = 100_000  # readings plotted at most (the first ones); the rollups use every message


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def delivery_plot(result: AuditResult) -> bytes:
    per_dev: dict[str, dict[str, int]] = defaultdict(lambda: {"delivered": 0, "lost": 0, "duplicates": 0})
    for b in result.boots:
        d = per_dev[f"{b['dev']} (QoS {b['qos']})"]
        d["delivered"] += b["distinct"]
        d["lost"] += b["lost"]
        d["duplicates"] += b["duplicates"]
    for check in result.expectations:
        for label in per_dev:
            if label.startswith(check["dev"] + " "):
                per_dev[label]["lost"] += check["lost_tail"]
    names = sorted(per_dev)
    fig, ax = plt.subplots(figsize=(8, 0.5 + 0.45 * max(len(names), 2)))
    left = [0] * len(names)
    for key, colour in (("delivered", "#4c9a2a"), ("lost", "#c0392b"), ("duplicates", "#e67e22")):
        values = [per_dev[n][key] for n in names]
        ax.barh(names, values, left=left, color=colour, label=key)
        left = [a + b for a, b in zip(left, values, strict=False)]
    ax.set_xlabel("messages")
    ax.set_title("Delivery per device")
    ax.invert_yaxis()
    ax.legend(loc="lower right")
    return _png(fig)


def latency_plot(df: DataFrame) -> bytes:
    sample = first_deliveries(df).select("qos", "latency_ms").limit(LATENCY_SAMPLE).collect()
    by_qos: dict[int, list[float]] = defaultdict(list)
    for row in sample:
        by_qos[row["qos"]].append(row["latency_ms"])
    fig, ax = plt.subplots(figsize=(8, 4))
    top = max((max(v) for v in by_qos.values() if v), default=1.0) or 1.0
    for qos, values in sorted(by_qos.items()):
        ax.hist(values, bins=60, range=(0, top), alpha=0.6, label=f"QoS {qos} ({len(values)} messages)")
    ax.set_xlabel("latency beyond the boot's fastest delivery (ms)")
    ax.set_ylabel("messages")
    ax.set_yscale("log")
    ax.set_title("Latency distribution")
    ax.legend()
    return _png(fig)


def readings_plot(df: DataFrame, minute: DataFrame) -> bytes:
    """Each message's reading (first delivery) against the time it arrived, per device; with the one-minute
    mean drawn over it once a run spans several minutes."""
    points = messages(df).filter(F.col("reading").isNotNull()).select("dev", "received_at", "reading")
    by_dev: dict[str, list[Any]] = defaultdict(list)
    for row in points.orderBy("received_at").limit(READINGS_SAMPLE).collect():
        by_dev[row["dev"]].append(row)
    means: dict[str, list[Any]] = defaultdict(list)
    for row in minute.collect():
        means[row["dev"]].append(row)
    fig, ax = plt.subplots(figsize=(8, 4))
    for dev, rows in sorted(by_dev.items()):
        line = ax.plot([r["received_at"] for r in rows], [r["reading"] for r in rows], ".", markersize=3, label=dev)[0]
        if len(means[dev]) > 1:
            ax.step(
                [m["window_start"] for m in means[dev]],
                [m["mean"] for m in means[dev]],
                where="post",
                color=line.get_color(),
                linewidth=2,
            )
    locator = mdates.AutoDateLocator()  # type: ignore[no-untyped-call]  # untyped in matplotlib 3.11
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))  # type: ignore[no-untyped-call]
    ax.set_xlabel("received (UTC)")
    ax.set_ylabel("reading")
    ax.set_title("Readings over time (thick steps: one-minute means)")
    if by_dev:
        ax.legend(fontsize="small")
    return _png(fig)


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def page(result: AuditResult, input_path: str, rollup_counts: dict[str, int]) -> str:
    verdict_rows = [
        [
            q,
            PROMISES[q],
            len(v.devices),
            v.boots,
            v.messages,
            v.lost,
            v.duplicates,
            v.out_of_order,
            f"{v.latency_p99_ms:.1f}",
            "PASS" if v.ok else "FAIL",
        ]
        for q, v in sorted(result.verdicts.items())
    ]
    boot_rows = [
        [
            b["dev"],
            b["boot"],
            b["qos"],
            b["received"],
            b["highest_seq"],
            b["lost"],
            b["duplicates"],
            b["out_of_order"],
            f"{b['latency_p50_ms'] or 0:.1f}",
            f"{b['latency_p99_ms'] or 0:.1f}",
            format_ranges(b["missing_ranges"]) + (" (absurd seq: a device's claim)" if b.get("absurd_seq") else ""),
        ]
        for b in result.boots
    ]
    problems = [p for v in result.verdicts.values() for p in v.problems]
    quarantine = [
        [dev, sum(reasons.values()), "; ".join(f"{r}: {n}" for r, n in sorted(reasons.items()))]
        for dev, reasons in sorted(result.invalid.items())
    ]
    status = "every promise kept" if result.ok else "a promise was broken"
    verdict_table = _table(
        ["QoS", "promise", "devices", "boots", "messages", "lost", "duplicates", "out of order", "p99 ms", "verdict"],
        verdict_rows,
    )
    findings = ""
    if problems:
        items = "".join(f"<li>{html.escape(p)}</li>" for p in problems)
        findings = f"<p>Findings (a QoS 0 loss is allowed and reported):</p><ul>{items}</ul>"
    quarantined = ""
    if quarantine:
        quarantined = (
            "<h2>Quarantined rows</h2><p>Rows that cannot judge a board (unparsable, or a field out of the range a "
            "board produces), per device; they are in the audit's <code>invalid/</code> output with their reason.</p>"
            + _table(["device", "rows", "reasons"], quarantine)
        )
    boot_table = _table(
        ["device", "boot", "QoS", "received", "highest seq", "lost", "duplicates", "out of order", "p50 ms", "p99 ms"]
        + ["missing seq"],
        boot_rows,
    )
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Telemetry audit: {status}</title>
<style>
body {{ font-family: sans-serif; margin: 2em auto; max-width: 70em; color: #222; }}
table {{ border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }}
th, td {{ border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }}
th {{ background: #f3f3f3; }} td:first-child, th:first-child {{ text-align: left; }}
.ok {{ color: #2e7d32; }} .fail {{ color: #c62828; }} img {{ max-width: 100%; }}
</style></head><body>
<h1>Telemetry audit: <span class="{"ok" if result.ok else "fail"}">{status}</span></h1>
<p>Input <code>{html.escape(input_path)}</code>: {result.rows} rows, {result.parse_errors} unparsable payloads,
{result.recorder_duplicates} recorder re-stores, {result.invalid_rows} quarantined rows (counted apart).
Generated {generated}.
Rollups: {rollup_counts.get("minute", 0)} one-minute and {rollup_counts.get("hour", 0)} one-hour windows.</p>
<h2>Verdict per QoS</h2>
{verdict_table}
{findings}
<h2>Delivery per device</h2><img src="delivery.png" alt="delivered, lost and duplicated messages per device">
<h2>Latency</h2><p>{html.escape(CLOCK_NOTE)}.</p><img src="latency.png" alt="latency histogram per QoS">
<h2>Readings</h2><img src="readings.png" alt="each message's reading over time, per device">
{quarantined}
<h2>Per device and boot</h2>
{boot_table}
</body></html>
"""


def build(
    df: DataFrame, result: AuditResult, minute: DataFrame, input_path: str, rollup_counts: dict[str, int]
) -> dict[str, bytes]:
    """The report's files: index.html and the PNGs it shows."""
    return {
        "delivery.png": delivery_plot(result),
        "latency.png": latency_plot(df),
        "readings.png": readings_plot(df, minute),
        "index.html": page(result, input_path, rollup_counts).encode(),
    }
