"""`host-bridge pipeline report`: one HTML page with PNG plots beside it (delivery per device, a timeline of the
boots with the campaign's power cuts and kills, latency distribution, readings over time), opened straight from
the file system: no server, no script, no network. Up to FLEET_LISTED devices each gets its own row, bar and
line; a larger fleet is summarized (totals per QoS, the devices with findings, fleet-wide curves)."""

from __future__ import annotations

import html
import io
from collections import Counter, defaultdict
from datetime import UTC, datetime
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only; no display on a bench host
import matplotlib.dates as mdates
import matplotlib.pyplot as plt
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from dmqtt_pipeline.audit import CLOCK_NOTE, PROMISES, AuditResult, first_deliveries
from dmqtt_telemetry.promises import format_ranges
from dmqtt_telemetry.timeline import Event

LATENCY_BINS = 60  # the latency histogram's bins, counted in Spark over every message
TIMELINE_BINS = 100  # about as many bins (whole minutes) over a fleet's whole range
SILENT_PERIODS = 3  # a board silent for more than this many of its own periods, at the end of the data, is listed
SILENT_MIN_S = 60  # and for at least this long
READINGS_SAMPLE = 100_000  # readings plotted at most (the first ones); the rollups use every message
FLEET_LISTED = 40  # devices drawn and listed one by one; above, the report summarizes the fleet
FINDINGS_LISTED = 100  # boots with a finding listed in a fleet's table (all are in the audit's boots/)
# The campaign's events on the timeline: (colour, line style, label).
SYSTEM_STYLE = {
    "recorder-kill": ("#6a1b9a", "--", "recorder SIGKILL"),
    "broker-kill": ("#000000", "-", "broker SIGKILL"),
    "broker-restart": ("#000000", ":", "broker restart"),
    "bridge-kill": ("#1565c0", "-.", "bridge SIGKILL"),
    "disk-full": ("#8d6e63", ":", "recorder's disk full"),
}


def _legend_outside(ax: Any) -> None:
    """The legend right of the plot, never over the data."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", borderaxespad=0.0)


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def delivery_plot(result: AuditResult) -> bytes:
    """Delivered, lost and duplicated messages per device; for a fleet, per QoS over every device."""

    def counts() -> dict[str, int]:
        return {"delivered": 0, "lost": 0, "duplicates": 0}

    by_device: dict[tuple[str, int], dict[str, int]] = defaultdict(counts)
    for b in result.boots:
        d = by_device[b["dev"], b["qos"]]
        d["delivered"] += b["distinct"]
        d["lost"] += b["lost"]
        d["duplicates"] += b["duplicates"]
    for check in result.expectations:
        for dev, qos in by_device:
            if dev == check["dev"]:
                by_device[dev, qos]["lost"] += check["lost_tail"]
    per_dev = {f"{dev} (QoS {qos})": d for (dev, qos), d in by_device.items()}
    title = "Delivery per device"
    if len(by_device) > FLEET_LISTED:
        fleet: dict[int, dict[str, int]] = defaultdict(counts)
        devices: dict[int, int] = defaultdict(int)
        for (_dev, qos), d in by_device.items():
            devices[qos] += 1
            for key, value in d.items():
                fleet[qos][key] += value
        per_dev = {f"QoS {qos}: {devices[qos]} devices": d for qos, d in fleet.items()}
        title = f"Delivery per QoS over the fleet ({len(result.boots)} boots)"
    names = sorted(per_dev)
    fig, ax = plt.subplots(figsize=(9, 0.8 + 0.45 * max(len(names), 2)))
    left = [0] * len(names)
    for key, colour in (("delivered", "#4c9a2a"), ("lost", "#c0392b"), ("duplicates", "#e67e22")):
        values = [per_dev[n][key] for n in names]
        ax.barh(names, values, left=left, color=colour, label=key)
        left = [a + b for a, b in zip(left, values, strict=False)]
    ax.set_xlabel("messages")
    ax.set_title(title)
    ax.invert_yaxis()
    _legend_outside(ax)
    return _png(fig)


def timeline_plot(result: AuditResult, events: list[Event], firsts: DataFrame) -> bytes:
    """Each boot of each device as a bar from its first to its last delivery (a reboot starts a new bar), power
    cuts as red crosses on their device's row, and the campaign's kills as vertical lines across all rows. For a
    fleet, over the data's whole range in bins of whole minutes (activity): messages received, boards heard, boots
    starting and power cuts per bin."""
    devices = sorted({b["dev"] for b in result.boots})
    fig, ax = plt.subplots(figsize=(9, 1.2 + 0.35 * min(max(len(devices), 2), FLEET_LISTED)))
    cuts = [e for e in events if e.event == "power-cut"]
    if len(devices) <= FLEET_LISTED:
        row = {dev: i for i, dev in enumerate(devices)}
        for b in result.boots:
            start, end = b["first_received_at"], b["last_received_at"]
            if start is None or end is None:
                continue
            width = max((end - start).total_seconds(), 0.05) / 86400  # matplotlib dates are days
            ax.broken_barh(
                [(_days(start), width)],
                (row[b["dev"]] - 0.3, 0.6),
                facecolors="#4c9a2a" if b["boot"] % 2 else "#81c784",
            )
        marked = [e for e in cuts if e.dev in row]
        if marked:
            ax.plot(
                [_days(e.at) for e in marked], [row[e.dev] for e in marked], "x", color="#c62828", markersize=8,
                label=f"power cut ({len(cuts)})",
            )  # fmt: skip
        ax.set_yticks(range(len(devices)), devices)
        ax.set_ylim(len(devices) - 0.5, -0.5)
        ax.set_title("Boots over time (a bar per boot, first to last delivery)")
    else:
        seconds, bins = activity(firsts)
        width = f"{seconds // 60} min"
        starts = [_days(start) for start, _, _ in bins]
        ax.step(starts, [n for _, n, _ in bins], where="post", color="#1b5e20", label=f"messages per {width}")
        ax.step(starts, [b for _, _, b in bins], where="post", color="#1565c0", label=f"boards heard per {width}")

        def per_bin(times: list[datetime]) -> Counter[datetime]:
            return Counter(datetime.fromtimestamp(t.timestamp() // seconds * seconds, UTC) for t in times)

        booted = per_bin([b["first_received_at"].replace(tzinfo=UTC) for b in result.boots if b["first_received_at"]])
        cut = per_bin([e.at for e in cuts])
        for series, marker, colour, label in ((booted, "o", "#4c9a2a", "boots starting"), (cut, "x", "#c62828",
                                                                                        "power cuts")):  # fmt: skip
            times = sorted(series)
            if times:
                ax.plot([_days(t) for t in times], [series[t] for t in times], marker, color=colour,
                        label=f"{label} per {width}")  # fmt: skip
        ax.set_yscale("log")
        ax.set_ylabel(f"per {width}")
        ax.set_title(f"Messages, boards, boots and power cuts over time ({len(devices)} devices)")
    for kind, (colour, style, label) in SYSTEM_STYLE.items():
        times = [e.at for e in events if e.event == kind]
        for i, at in enumerate(times):
            ax.axvline(
                _days(at),
                color=colour,
                linestyle=style,
                linewidth=1.5,
                label=f"{label} ({len(times)})" if i == 0 else None,
            )
    _time_axis(ax)
    _legend_outside(ax)
    return _png(fig)


def _days(at: datetime) -> float:
    """matplotlib's date number (days); a naive time, as Spark hands them over, is UTC (the session's zone)."""
    days: float = mdates.date2num(at)  # type: ignore[no-untyped-call]  # untyped in matplotlib 3.11
    return days


def _time_axis(ax: Any) -> None:
    locator = mdates.AutoDateLocator()  # type: ignore[no-untyped-call]  # untyped in matplotlib 3.11
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))  # type: ignore[no-untyped-call]
    ax.set_xlabel("received (UTC)")


# -- what the plots draw, aggregated in Spark: the driver holds bins and boards, never rows -----------------------


def latency_histogram(firsts: DataFrame) -> tuple[list[float], dict[int, list[int]]]:
    """Every message's latency (`firsts`: audit.first_deliveries of the rows), in LATENCY_BINS equal bins from 0 to
    the largest: (the bins' edges in ms, {qos: messages per bin})."""
    latency = firsts.filter(F.col("latency_ms").isNotNull()).select("qos", "latency_ms").cache()
    top = float(latency.agg(F.max("latency_ms")).first()[0] or 0.0) or 1.0  # type: ignore[index]
    width = top / LATENCY_BINS
    bins = F.least(F.floor(F.col("latency_ms") / width), F.lit(LATENCY_BINS - 1)).cast("int")
    counts: dict[int, list[int]] = {}
    for row in latency.groupBy("qos", bins.alias("bin")).count().collect():
        counts.setdefault(row["qos"], [0] * LATENCY_BINS)[row["bin"]] += row["count"]
    latency.unpersist()
    return [i * width for i in range(LATENCY_BINS + 1)], counts


def activity(firsts: DataFrame) -> tuple[int, list[tuple[datetime, int, int]]]:
    """Messages received (each once: `firsts`, audit.first_deliveries of the rows) and boards heard, per bin of
    whole minutes over the data's whole range (about TIMELINE_BINS bins): (the bin's seconds, [(its start,
    messages, boards)])."""
    first, last = firsts.agg(F.min("received_at"), F.max("received_at")).first()  # type: ignore[misc]
    span = (last - first).total_seconds() if first is not None else 0.0
    seconds = 60 * max(1, -(-int(span) // (60 * TIMELINE_BINS)))
    rows = (
        firsts.groupBy(F.window("received_at", f"{seconds} seconds").start.alias("start"))
        .agg(F.count(F.lit(1)).alias("messages"), F.countDistinct("dev").alias("boards"))
        .orderBy("start")
        .collect()
    )
    return seconds, [(r["start"], r["messages"], r["boards"]) for r in rows]


def silent_boards(firsts: DataFrame) -> list[dict[str, Any]]:
    """The boards gone silent at the end of the data (`firsts`: audit.first_deliveries of the rows): heard from
    last more than SILENT_PERIODS of their own periods (the median interval between their messages) and at least
    SILENT_MIN_S before the data's last message; the longest silence first. No --expect needed: each board's own
    pace is the measure."""
    at = F.unix_micros("received_at") / 1e6
    end = firsts.agg(F.max(at)).first()[0]  # type: ignore[index]  # (seconds: no time zone to mistake)
    if end is None:
        return []
    by_time = Window.partitionBy("dev").orderBy("received_at")
    per_board = (
        firsts.select("dev", "received_at", (at - F.lag(at).over(by_time)).alias("interval_s"))
        .groupBy("dev")
        .agg(F.max("received_at").alias("last_received_at"), F.percentile_approx("interval_s", 0.5).alias("period_s"))
        .withColumn("silent_s", F.lit(end) - F.unix_micros("last_received_at") / 1e6)
    )
    silent = per_board.filter(
        F.col("period_s").isNotNull()
        & (F.col("silent_s") > F.col("period_s") * SILENT_PERIODS)
        & (F.col("silent_s") >= SILENT_MIN_S)
    )
    return [row.asDict() for row in silent.orderBy(F.desc("silent_s"), "dev").collect()]


def latency_plot(firsts: DataFrame) -> bytes:
    edges, by_qos = latency_histogram(firsts)
    fig, ax = plt.subplots(figsize=(8, 4))
    for qos, counts in sorted(by_qos.items()):
        ax.stairs(counts, edges, fill=True, alpha=0.6, label=f"QoS {qos} ({sum(counts)} messages)")
    ax.set_xlabel("latency beyond the boot's fastest delivery (ms)")
    ax.set_ylabel("messages")
    ax.set_yscale("log")
    ax.set_title("Latency distribution")
    _legend_outside(ax)
    return _png(fig)


def readings_plot(firsts: DataFrame, minute: DataFrame) -> bytes:
    """Each message's reading (`firsts`: audit.first_deliveries of the rows) against the time it arrived, per
    device, with the one-minute mean
    drawn over it once a run spans several minutes. For a fleet: the one-minute mean over every device, between
    the lowest and the highest reading of that minute."""
    fig, ax = plt.subplots(figsize=(9, 4))
    title = "Readings over time"
    devices = minute.select("dev").distinct().count()
    means: dict[str, list[Any]] = defaultdict(list)
    if devices > FLEET_LISTED:
        # The fleet's one-minute windows, joined across devices in Spark: the driver holds a row a minute.
        windows = (
            minute.groupBy("window_start")
            .agg(
                F.min("min").alias("low"),
                F.max("max").alias("high"),
                (F.sum(F.col("mean") * F.col("count")) / F.sum("count")).alias("mean"),
            )
            .orderBy("window_start")
            .collect()
        )
        times = [w["window_start"] for w in windows]
        ax.fill_between(
            times, [w["low"] for w in windows], [w["high"] for w in windows],
            step="post", alpha=0.3, color="#4c9a2a", label="lowest to highest",
        )  # fmt: skip
        ax.step(times, [w["mean"] for w in windows], where="post", color="#1b5e20", linewidth=2, label="mean")
        title = f"Readings over time, one-minute windows over {devices} devices"
    else:
        for row in minute.orderBy("dev", "window_start").collect():  # (at most FLEET_LISTED devices')
            means[row["dev"]].append(row)
        points = firsts.filter(F.col("reading").isNotNull()).select("dev", "received_at", "reading")
        by_dev: dict[str, list[Any]] = defaultdict(list)
        for row in points.orderBy("received_at").limit(READINGS_SAMPLE).collect():
            by_dev[row["dev"]].append(row)
        stepped = False
        for dev, rows in sorted(by_dev.items()):
            line = ax.plot(
                [r["received_at"] for r in rows], [r["reading"] for r in rows], ".", markersize=3, label=dev
            )[0]
            if len(means[dev]) > 1:
                stepped = True
                ax.step(
                    [m["window_start"] for m in means[dev]],
                    [m["mean"] for m in means[dev]],
                    where="post",
                    color=line.get_color(),
                    linewidth=2,
                )
        if stepped:
            title += " (thick steps: one-minute means)"
    _time_axis(ax)
    ax.set_ylabel("reading")
    ax.set_title(title)
    _legend_outside(ax)
    return _png(fig)


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    """An HTML table; a cell given as Verdict(text) is coloured by its verdict."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(_cell(c) for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


class Verdict(str):
    """PASS or FAIL, shown on green or red."""


def _cell(value: Any) -> str:
    if isinstance(value, Verdict):
        return f'<td class="verdict {"pass" if value == "PASS" else "fail"}">{html.escape(value)}</td>'
    return f"<td>{html.escape(str(value))}</td>"


def link_rows(events: list[Event]) -> tuple[list[str], list[list[Any]]]:
    """The link counters per serial board, as the campaign's timeline gives them (the keys the bridge counts)."""
    counted = [e for e in events if e.event == "link-counters"]
    keys = sorted({k for e in counted for k in e.counters})
    return ["device", *keys], [[e.dev, *(e.counters.get(k, 0) for k in keys)] for e in sorted(counted, key=_dev)]


def _dev(event: Event) -> str:
    return event.dev or ""


def _finding(b: dict[str, Any]) -> bool:
    """A boot worth a row in a fleet's table: a loss that breaks a promise (QoS 0 may lose), a duplicate, a late
    arrival or a repair."""
    return bool((b["lost"] and b["qos"]) or b["duplicates"] or b["out_of_order"] or b.get("repaired"))


def _worst_first(b: dict[str, Any]) -> tuple[Any, ...]:
    return (-(b["lost"] if b["qos"] else 0), -b["duplicates"], -b["out_of_order"], b["dev"], b["boot"])


def page(
    result: AuditResult,
    input_path: str,
    rollup_counts: dict[str, int],
    events: list[Event],
    silent: list[dict[str, Any]] | None = None,
) -> str:
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
            Verdict("PASS" if v.ok else "FAIL"),
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
            b.get("repaired") or 0,
            f"{b['latency_p50_ms'] or 0:.1f}",
            f"{b['latency_p99_ms'] or 0:.1f}",
            format_ranges(b["missing_ranges"]) + (" (absurd seq: a device's claim)" if b.get("absurd_seq") else ""),
        ]
        for b in (
            result.boots
            if len(result.boots) <= FLEET_LISTED
            else sorted(filter(_finding, result.boots), key=_worst_first)
        )
    ]
    boots_note = ""
    if len(result.boots) > FLEET_LISTED:
        first = f" (the worst {FINDINGS_LISTED})" if len(boot_rows) > FINDINGS_LISTED else ""
        devices = len({b["dev"] for b in result.boots})
        qos0 = [b for b in result.boots if b["lost"] and not b["qos"]]
        allowed = (
            f" {len(qos0)} boots at QoS 0 lost {sum(b['lost'] for b in qos0)} messages, which QoS 0 allows: counted "
            "in the verdict, not listed."
            if qos0
            else ""
        )
        boots_note = (
            f"<p>{len(result.boots)} boots of {devices} devices; the {len(boot_rows)} with a finding are "
            f"listed{first}, worst first; every boot is in the audit's <code>boots/</code> output.{allowed}</p>"
        )
        boot_rows = boot_rows[:FINDINGS_LISTED]
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
        ["device", "boot", "QoS", "received", "highest seq", "lost", "duplicates", "out of order", "repaired"]
        + ["p50 ms", "p99 ms", "missing seq"],
        boot_rows,
    )
    link = ""
    headers, rows = link_rows(events)
    if rows:
        link = (
            "<h2>Serial link per board</h2><p>The bridge's counters for each board on a serial line, over the "
            "campaign (summed over the bridge's restarts).</p>" + _table(headers, rows)
        )
    silent = silent or []
    silent_part = (
        f"<p>{len(silent)} boards last heard from more than {SILENT_PERIODS} of their own periods (the median "
        f"interval between their messages), and at least {SILENT_MIN_S} s, before the data's last message; the "
        "longest silence first.</p>"
        + _table(
            ["device", "last heard (UTC)", "its period (s)", "silent for (s)"],
            [[s["dev"], s["last_received_at"], f"{s['period_s']:.0f}", f"{s['silent_s']:.0f}"] for s in silent[:100]],
        )
        if silent
        else f"<p>None: every board was heard from within {SILENT_PERIODS} of its own periods of the end.</p>"
    )
    timeline_note = (
        "Power cuts and kills as the campaign wrote them down (<code>--timeline</code>)."
        if events
        else "No <code>--timeline</code> given: boots only (a campaign's power cuts and kills are not in the data)."
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
td.verdict {{ font-weight: bold; text-align: center; color: #fff; }}
td.pass {{ background: #2e7d32; }} td.fail {{ background: #c62828; color: #fff; }}
</style></head><body>
<h1>Telemetry audit: <span class="{"ok" if result.ok else "fail"}">{status}</span></h1>
<p>Input <code>{html.escape(input_path)}</code>: {result.rows} rows, {result.parse_errors} unparsable payloads,
{result.recorder_duplicates} recorder re-stores, {result.invalid_rows} quarantined rows (counted apart).
{result.repaired} messages repaired: a broker lost them after acknowledging them, and their boards sent them again
from flash when the recorder's confirmation said the store lacked them.
Generated {generated}.
Rollups: {rollup_counts.get("minute", 0)} one-minute and {rollup_counts.get("hour", 0)} one-hour windows.</p>
<h2>Verdict per QoS</h2>
{verdict_table}
{findings}
<h2>Delivery per device</h2><img src="delivery.png" alt="delivered, lost and duplicated messages per device">
<h2>Timeline</h2><p>{timeline_note}</p><img src="timeline.png" alt="boots, power cuts and kills over time">
<h2>Latency</h2><p>{html.escape(CLOCK_NOTE)}.</p><img src="latency.png" alt="latency histogram per QoS">
<h2>Readings</h2><img src="readings.png" alt="each message's reading over time, per device">
<h2>Boards gone silent</h2>
{silent_part}
{link}
{quarantined}
<h2>Per device and boot</h2>
{boots_note}
{boot_table}
</body></html>
"""


def build(
    df: DataFrame,
    result: AuditResult,
    minute: DataFrame,
    input_path: str,
    rollup_counts: dict[str, int],
    events: list[Event] | None = None,
) -> dict[str, bytes]:
    """The report's files: index.html and the PNGs it shows. `events`: the campaign's timeline, when given."""
    events = events or []
    firsts = first_deliveries(df).cache()  # each message once, with its latency: what every figure counts
    try:
        return {
            "delivery.png": delivery_plot(result),
            "timeline.png": timeline_plot(result, events, firsts),
            "latency.png": latency_plot(firsts),
            "readings.png": readings_plot(firsts, minute),
            "index.html": page(result, input_path, rollup_counts, events, silent_boards(firsts)).encode(),
        }
    finally:
        firsts.unpersist()
