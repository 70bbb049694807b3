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
    usage = store.usage()  # the store's size and its disk's room: alerted on before the disk fills
    counts: tuple[tuple[str, str, int], ...] = (
        ("received", "deliveries received from the broker", recorder.received),
        ("rows_written", "rows committed to Parquet", store.rows_committed),
        ("files_written", "Parquet files committed", store.files_committed),
        ("duplicates", "deliveries the store already held (a broker's or a board's copy)", store.recorder_dups),
        ("repaired", "messages stored after their board was told they were missing", store.repaired),
        ("confirmations", "confirmations published to boards", recorder.confirmations),
        ("maintenance_failures", "maintenance passes that failed", recorder.maintenance_failures),
    )
    for name, doc, value in counts:
        yield counter(f"dmqtt_recorder_{name}", doc, value=value)
    levels: tuple[tuple[str, str, float], ...] = (
        ("connected", "1 while connected to the broker", int(recorder.link is not None)),
        ("lag_seconds", "how long the oldest delivery not yet in Parquet has waited", round(recorder.lag_s(), 3)),
        ("pending_rows", "deliveries in the log, not yet in Parquet", len(store.pending)),
        ("store_failing", "1 while the store cannot be written (acknowledgements held back)",
         int(recorder.store_broken is not None)),
        ("store_bytes", "bytes the store takes (Parquet files and the recorder's log)", usage.data_bytes),
        ("store_files", "files in the store", usage.files),
        ("store_free_bytes", "bytes the recorder may still write on the store's file system", usage.free_bytes),
        ("store_filesystem_bytes", "size of the store's file system", usage.filesystem_bytes),
        ("maintenance_failing", "1 while the last maintenance pass failed",
         int(recorder.maintenance_failing is not None)),
        ("config_last_reload_successful",
         "0 when the last SIGHUP's config did not load (everything running kept), else 1", int(recorder.reload_ok)),
    )  # fmt: skip
    for name, doc, level in levels:
        yield gauge(f"dmqtt_recorder_{name}", doc, value=level)
    if usage.oldest_day is not None:
        oldest = datetime.fromisoformat(usage.oldest_day).replace(tzinfo=UTC).timestamp()
        yield gauge("dmqtt_recorder_store_oldest_day_timestamp_seconds", "the oldest day kept (its UTC midnight)",
                    value=oldest)  # fmt: skip
    if recorder.maintained_at is not None:
        yield gauge(
            "dmqtt_recorder_maintenance_last_success_timestamp_seconds",
            "when a maintenance pass (compaction, retention) last succeeded", value=round(recorder.maintained_at, 3),
        )  # fmt: skip
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


def health(recorder: Recorder, after_s: float) -> tuple[bool, str]:
    """/healthz: unhealthy while the store is failing, and once the broker has been out of reach for after_s."""
    if recorder.store_broken is not None:
        return False, f"the store is failing: {recorder.store_broken}"
    since = recorder.disconnected_since
    down = 0.0 if since is None else time.monotonic() - since
    if down > after_s:
        return False, f"broker {recorder.broker} out of reach for {down:.0f} s"
    return True, f"ok: {recorder.received} received, lag {recorder.lag_s():.1f} s"
