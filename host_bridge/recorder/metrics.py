"""The recorder's metrics (`host-bridge record --metrics HOST:PORT`): deliveries received, rows and files written,
its own duplicates, the repaired messages and the confirmations sent; whether it is connected, its lag (how long
the oldest delivery not yet in Parquet has waited) and, with --confirm, each board's confirmation floor (its newest
boot's messages below it are all stored) and the messages missing under its top. /healthz fails once the broker
has been out of reach for longer than --health-after, and while the store is failing. docs/metrics.md lists them with
alert rules."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from prometheus_client.core import Metric

from host_bridge.metrics import counter, gauge

if TYPE_CHECKING:
    from host_bridge.recorder.recorder import Recorder


def families(recorder: Recorder) -> Iterator[Metric]:
    store = recorder.store
    counts: tuple[tuple[str, str, int], ...] = (
        ("received", "deliveries received from the broker", recorder.received),
        ("rows_written", "rows committed to Parquet", store.rows_committed),
        ("files_written", "Parquet files committed", store.files_committed),
        ("duplicates", "deliveries the store already held (a broker's or a board's copy)", store.recorder_dups),
        ("repaired", "messages stored after their board was told they were missing", store.repaired),
        ("confirmations", "confirmations published to boards", recorder.confirmations),
    )
    for name, doc, value in counts:
        yield counter(f"dmqtt_recorder_{name}", doc, value=value)
    levels: tuple[tuple[str, str, float], ...] = (
        ("connected", "1 while connected to the broker", int(recorder.link is not None)),
        ("lag_seconds", "how long the oldest delivery not yet in Parquet has waited", round(recorder.lag_s(), 3)),
        ("pending_rows", "deliveries in the log, not yet in Parquet", len(store.pending)),
        ("store_failing", "1 while the store cannot be written (acknowledgements held back)",
         int(recorder.store_broken is not None)),
    )  # fmt: skip
    for name, doc, level in levels:
        yield gauge(f"dmqtt_recorder_{name}", doc, value=level)
    yield from upkeep(recorder)
    ledger = store.ledger
    if ledger is None:
        return
    floor = gauge(
        "dmqtt_recorder_board_confirmed_floor", "per board, its newest boot's messages below this are all stored",
        ["board", "boot"],
    )  # fmt: skip
    missing = gauge("dmqtt_recorder_board_missing", "per board, messages of its newest boot missing below its top",
                    ["board", "boot"])  # fmt: skip
    silent = gauge("dmqtt_recorder_board_silent_seconds", "per board, seconds since its last news", ["board"])
    now = time.monotonic()
    for dev, boots in list(ledger.devices.items()):
        if not boots:
            continue
        boot = max(boots)
        book = boots[boot]
        floor.add_metric([dev, str(boot)], book.stored)
        missing.add_metric([dev, str(boot)], book.top - book.stored - len(book.above))
        if dev in ledger.heard:
            silent.add_metric([dev], round(now - ledger.heard[dev], 3))
    yield floor
    yield missing
    yield silent


def upkeep(recorder: Recorder) -> Iterator[Metric]:
    """The store's size, its disk's room, its oldest day, its maintenance and the last reload: what an operator
    alerts on before a disk fills or a store stops being kept small (docs/metrics.md)."""
    usage = recorder.store.usage()
    sizes: tuple[tuple[str, str, float], ...] = (
        ("store_bytes", "bytes the store takes (Parquet files and the recorder's log)", usage.data_bytes),
        ("store_files", "files in the store", usage.files),
        ("store_free_bytes", "bytes the recorder may still write on the store's file system", usage.free_bytes),
        ("store_filesystem_bytes", "size of the store's file system", usage.filesystem_bytes),
    )
    for name, doc, value in sizes:
        yield gauge(f"dmqtt_recorder_{name}", doc, value=value)
    if usage.oldest_day is not None:
        oldest = datetime.fromisoformat(usage.oldest_day).replace(tzinfo=UTC).timestamp()
        yield gauge("dmqtt_recorder_store_oldest_day_timestamp_seconds", "the oldest day kept (its UTC midnight)",
                    value=oldest)  # fmt: skip
    if recorder.maintained_at is not None:
        yield gauge(
            "dmqtt_recorder_maintenance_last_success_timestamp_seconds",
            "when a maintenance pass (compaction, retention) last succeeded", value=round(recorder.maintained_at, 3),
        )  # fmt: skip
    yield gauge("dmqtt_recorder_maintenance_failing", "1 while the last maintenance pass failed",
                value=int(recorder.maintenance_failing is not None))  # fmt: skip
    yield counter("dmqtt_recorder_maintenance_failures", "maintenance passes that failed",
                  value=recorder.maintenance_failures)  # fmt: skip
    yield gauge(
        "dmqtt_recorder_config_last_reload_successful",
        "0 when the last SIGHUP's config did not load (everything running kept), else 1", value=int(recorder.reload_ok),
    )  # fmt: skip


def health(recorder: Recorder, after_s: float) -> tuple[bool, str]:
    """/healthz: unhealthy while the store is failing, and once the broker has been out of reach for after_s."""
    if recorder.store_broken is not None:
        return False, f"the store is failing: {recorder.store_broken}"
    since = recorder.disconnected_since
    down = 0.0 if since is None else time.monotonic() - since
    if down > after_s:
        return False, f"broker {recorder.broker} out of reach for {down:.0f} s"
    return True, f"ok: {recorder.received} received, lag {recorder.lag_s():.1f} s"
