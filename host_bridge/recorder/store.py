"""Where the recorder keeps what it received: a write-ahead log, then Parquet files renamed into place.

Every PUBLISH is appended to the write-ahead log and the log is fsynced before the recorder acknowledges it
(PUBACK / PUBREC), so an acknowledged message is on disk even if the recorder dies the next instant. Every few
seconds the logged deliveries become Parquet files (one per UTC date, under date=YYYY-MM-DD/): written under a
dot-name that readers skip, fsynced, named in a commit record in the log, then renamed. The commit record is the
atomic point: a recorder that restarts finishes the renames a commit record names, and writes the deliveries of
a log that has none. Then a new log generation starts. docs/telemetry-parquet.md specifies the files.

A redelivery the recorder has already stored (the broker resends, DUP set, what the recorder stored but whose
acknowledgement never reached the broker) is stored again with recorder_dup = true: marked, not hidden. Which
deliveries those are is the MQTT session's business (host_bridge/recorder/session.py); this module persists it.
With end-to-end confirmation (a Ledger), a message whose (dev, boot, seq) is already stored is a board's re-send
and is marked the same way, so that the store holds each message once; one stored only after the board was told
it was missing is marked repaired (host_bridge/recorder/confirmation.py)."""

from __future__ import annotations

import fcntl
import json
import os
from base64 import b64decode, b64encode
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from dmqtt_telemetry import format as telemetry
from host_bridge.errors import HostBridgeError
from host_bridge.recorder.confirmation import Ledger
from host_bridge.recorder.session import ReceiveSession

if TYPE_CHECKING:
    import pyarrow

WAL_FORMAT = 1
# A compacted day's rows per file: about 50 to 100 MB of this schema with zstd, the size Spark reads best (its
# partitions are 128 MB); a day of a few boards is one file.
COMPACT_ROWS = 1_000_000
# Rows a compaction reads and writes at a time, and so a compacted file's row group: what it holds in memory
# whatever the size of the day (docs/telemetry-parquet.md); more a batch raises the recorder's peak (figure 18).
BATCH_ROWS = 16_384
_JOIN_EVERY = 64  # small batches copied into one at a time (day_batches)


class RecorderError(HostBridgeError):
    """The recorder cannot record (output folder, broker, or its own log)."""


@dataclass(frozen=True)
class ReceivedPublish:
    """One PUBLISH as the broker delivered it to the recorder."""

    received_at_us: int
    arrival: int
    topic: str
    qos: int
    dup: bool
    retain: bool
    packet_id: int
    recorder_dup: bool
    payload: bytes
    repaired: bool | None = None  # None: recorded without confirmation
    resent: bool | None = None  # the board's mark of a copy sent again; None: a connection that cannot carry it

    def to_log(self) -> dict[str, Any]:
        record = asdict(self)
        record["payload"] = b64encode(self.payload).decode()
        return record

    @classmethod
    def from_log(cls, record: dict[str, Any]) -> ReceivedPublish:
        return cls(**{**record, "payload": b64decode(record["payload"])})

    def identity(self) -> tuple[str, int, int] | None:
        """(dev, boot, seq) as the telemetry names the message, or None for a payload that does not."""
        fields = telemetry.parse_payload(self.payload)
        if fields["parse_error"] is not None:
            return None
        return fields["dev"], fields["boot"], fields["seq"]

    @property
    def date(self) -> str:
        return datetime.fromtimestamp(self.received_at_us / 1e6, UTC).strftime("%Y-%m-%d")


def write_parquet(deliveries: list[ReceivedPublish], path: Path) -> None:
    """The rows of `deliveries` into one Parquet file at `path`, fsynced."""
    import pyarrow as pa

    schema = telemetry.arrow_schema()
    columns: dict[str, list[Any]] = {name: [] for name in schema.names}
    for d in deliveries:
        row = telemetry.row(
            d.received_at_us, d.arrival, d.topic, d.qos, d.dup, d.retain, d.packet_id, d.recorder_dup, d.payload,
            d.repaired, d.resent,
        )  # fmt: skip
        for name in schema.names:
            columns[name].append(row[name])
    write_batches(pa.table(columns, schema=schema).to_batches(), path)


def write_batches(batches: Iterable[pyarrow.RecordBatch], path: Path) -> None:
    """Record batches into one Parquet file at `path` (zstd; a row group each), fsynced; held one at a time."""
    import pyarrow.parquet as pq

    with open(path, "wb") as f:
        with pq.ParquetWriter(f, telemetry.arrow_schema(), compression="zstd") as writer:
            for batch in batches:
                writer.write_batch(batch)
        f.flush()
        os.fsync(f.fileno())


def day_batches(files: list[Path]) -> Iterator[pyarrow.RecordBatch]:
    """The rows of committed files in arrival order, about BATCH_ROWS at a time (a small file's rows joined with the
    next ones'), in the current schema (a column a file predates read as null). Each file is in arrival order, and
    a later file's rows arrived after an earlier one's (arrival grows across log generations): ordered by their
    first arrival, the files are read one after the other, never merged in memory."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = telemetry.arrow_schema()
    # Small files' batches are joined up to BATCH_ROWS (one row group each). A batch read from a file keeps that
    # file's pages alive (about 20 kB for a commit's few rows), so every _JOIN_EVERY of them are copied into one
    # compact batch first, and the files' pages go.
    small: list[pyarrow.RecordBatch] = []
    joined: list[pyarrow.RecordBatch] = []
    held = 0
    for path in sorted(files, key=_min_arrival):
        for batch in pq.ParquetFile(path).iter_batches(batch_size=BATCH_ROWS):
            columns = [
                batch.column(field.name).cast(field.type)
                if field.name in batch.schema.names
                else pa.nulls(batch.num_rows, field.type)
                for field in schema
            ]
            small.append(pa.RecordBatch.from_arrays(columns, schema=schema))
            held += batch.num_rows
            if len(small) >= _JOIN_EVERY or held >= BATCH_ROWS:
                joined.append(pa.concat_batches(small))
                small = []
            if held >= BATCH_ROWS:
                yield pa.concat_batches(joined)
                joined, held = [], 0
    if small or joined:
        yield pa.concat_batches(joined + small)


class _Rows:
    """A stream of record batches, taken a number of rows at a time (a batch cut where a take ends)."""

    def __init__(self, batches: Iterator[pyarrow.RecordBatch]) -> None:
        self._batches = batches
        self._carry: pyarrow.RecordBatch | None = None

    def take(self, rows: int) -> Iterator[pyarrow.RecordBatch]:
        while rows > 0:
            batch, self._carry = self._carry, None
            if batch is None:
                batch = next(self._batches, None)
                if batch is None:
                    return
            if batch.num_rows > rows:
                batch, self._carry = batch.slice(0, rows), batch.slice(rows)
            rows -= batch.num_rows
            yield batch


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _generation(name: str) -> int:
    """The log generation in a committed file's name (part-<generation>-<index>.parquet)."""
    return int(name.split("-")[1])


def _arrival_stats(path: Path) -> list[Any]:
    """The `arrival` column's statistics of each row group of a Parquet file (its footer: no data read)."""
    import pyarrow.parquet as pq

    meta = pq.ParquetFile(path).metadata
    column = meta.schema.names.index("arrival")
    return [meta.row_group(i).column(column).statistics for i in range(meta.num_row_groups)]


def _max_arrival(path: Path) -> int:
    """The largest `arrival` in a Parquet file (-1: no row)."""
    return max((s.max for s in _arrival_stats(path)), default=-1)


def _min_arrival(path: Path) -> int:
    return min((s.min for s in _arrival_stats(path)), default=-1)


@dataclass(frozen=True)
class StoreUsage:
    """What the store takes on its disk, and what the disk has left (the recorder's metrics)."""

    data_bytes: int  # the Parquet files and the recorder's own state (its log)
    files: int
    free_bytes: int  # what this user may still write on the store's file system
    filesystem_bytes: int
    oldest_day: str | None  # the oldest date partition kept (YYYY-MM-DD), None when there is none


class StoreWriteError(Exception):
    """The write-ahead log could not take or sync a delivery (a full, read-only or failing disk). Nothing logged
    since the last successful sync may be acknowledged; reload() takes the state the disk holds."""

    def __init__(self, exc: OSError) -> None:
        super().__init__(exc.strerror or str(exc))
        self.errno = exc.errno


class TelemetryStore:
    """The output folder: write-ahead log, Parquet commits, and the small state a restart needs."""

    def __init__(self, out: Path, confirm: bool = False) -> None:
        """`confirm`: keep a Ledger of what is stored per (dev, boot), for end-to-end confirmation."""
        self.out = out
        self.confirm = confirm
        self.ledger: Ledger | None = Ledger() if confirm else None
        self.state = out / telemetry.STATE_DIR
        try:
            self.state.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RecorderError(f"cannot create {self.state}: {exc.strerror}") from None
        self._lock = open(self.state / "lock", "a+")
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RecorderError(f"another recorder is writing to {out}; stop it or choose another --out") from None
        self.wal_path = self.state / telemetry.WAL_FILE
        self.generation = 0
        self.next_arrival = 0
        self.session = ReceiveSession()  # kept in the log's header and records, restored by a restart
        self.pending: list[ReceivedPublish] = []  # logged, not yet in Parquet
        self.rows_committed = 0
        self.files_committed = 0
        self.recorder_dups = 0
        self.repaired = 0  # deliveries stored after the board was told they were missing (confirmation)
        self._wal: IO[bytes] | None = None
        self._unsynced = False
        # A start on a full or read-only disk cannot finish its recovery: the store says why and waits for
        # reload() (the log on disk stays as it is, so nothing is lost by waiting).
        self.unavailable: str | None = None
        self.resumed: list[str] = []  # maintenance steps a crash interrupted, finished by _recover (said at start)
        try:
            self.recovered = self._recover()
        except (OSError, StoreWriteError) as exc:
            self.recovered = 0
            self.unavailable = (exc.strerror if isinstance(exc, OSError) else None) or str(exc)

    # -- receiving ------------------------------------------------------------------------------------------

    def add(
        self,
        received_at_us: int,
        topic: str,
        qos: int,
        dup: bool,
        retain: bool,
        packet_id: int,
        payload: bytes,
        resent: bool | None = None,
    ) -> ReceivedPublish:
        """Log one delivery (not yet durable: call sync() before acknowledging it). `resent`: the board's mark
        of a copy it sent again (None: the connection cannot carry it)."""
        recorder_dup = self.session.delivered(topic, qos, packet_id, payload, dup)
        delivery = ReceivedPublish(
            received_at_us, self.next_arrival, topic, qos, dup, retain, packet_id, recorder_dup, payload, None, resent
        )
        if self.ledger is not None and qos:
            again, repaired = self._note_stored(delivery)
            delivery = replace(delivery, recorder_dup=recorder_dup or again, repaired=repaired)
            recorder_dup = delivery.recorder_dup
        self.next_arrival += 1
        self.recorder_dups += recorder_dup
        self.repaired += bool(delivery.repaired)
        self.pending.append(delivery)
        self._append({"m": delivery.to_log()})
        return delivery

    def _note_stored(self, delivery: ReceivedPublish) -> tuple[bool, bool]:
        """The ledger's word on a QoS 1/2 delivery (Ledger.stored): (already stored, repaired); (False, False)
        without confirmation or for a payload that names no message."""
        if self.ledger is None:
            return False, False
        identity = delivery.identity()
        return self.ledger.stored(*identity, redelivered=delivery.dup) if identity is not None else (False, False)

    def release(self, packet_id: int) -> bool:
        """PUBREL arrived: True when the id was awaiting it (MQTT 5.0 answers an unknown id with 0x92)."""
        known = self.session.release(packet_id)
        self._append({"rel": packet_id})
        return known

    def sync(self) -> None:
        """Make every logged delivery durable; acknowledgements may be sent after this returns."""
        if self._unsynced and self._wal is not None:
            try:
                self._wal.flush()
                os.fsync(self._wal.fileno())
            except OSError as exc:
                raise StoreWriteError(exc) from None
            self._unsynced = False

    def reload(self) -> None:
        """After a StoreWriteError: forget the memory and take the state the log on disk holds, as a restart
        would (what never reached the disk was never acknowledged, and the broker's session still holds it).
        Raises OSError while the disk still cannot take the recovery's own writes; call it again later."""
        self._abandon_log()  # its buffer may be flushed now, or fail again: either way the file on disk decides
        self.pending = []
        self.session = ReceiveSession()
        self.ledger = Ledger() if self.confirm else None
        self._unsynced = False
        self.recovered = self._recover()
        self.unavailable = None

    # -- committing -----------------------------------------------------------------------------------------

    def commit(self) -> list[Path]:
        """Turn the logged deliveries into Parquet files; returns the files written."""
        if not self.pending:
            return []
        by_date: dict[str, list[ReceivedPublish]] = defaultdict(list)
        for d in self.pending:
            by_date[d.date].append(d)
        finals: list[Path] = []
        for i, (date, deliveries) in enumerate(sorted(by_date.items())):
            final = telemetry.part_file(self.out, date, self.generation, i)
            final.parent.mkdir(parents=True, exist_ok=True)
            try:
                write_parquet(deliveries, self._temp(final))
            except OSError:
                for temp in [self._temp(f) for f in finals] + [self._temp(final)]:
                    temp.unlink(missing_ok=True)  # no commit record names them: the rows stay in the log
                raise
            finals.append(final)
        self._append({"commit": [str(f.relative_to(self.out)) for f in finals]})
        self.sync()
        self.rows_committed += len(self.pending)
        self.files_committed += len(finals)
        self.pending = []
        self._end_generation(self._finish_commit, finals)
        return finals

    # -- keeping the store small: compaction and retention --------------------------------------------------

    def maintain(
        self,
        today: str,
        retain_days: int | None = None,
        max_days: int = 1,
        rows_per_file: int = COMPACT_ROWS,
        retain_bytes: int | None = None,
    ) -> dict[str, int]:
        """Run right after a commit (the log then holds no delivery). With `retain_days`, the days more than that
        many days before `today` (UTC, YYYY-MM-DD) are dropped; with `retain_bytes`, the oldest days too, until the
        days' files take no more than that (today is never dropped); then up to `max_days` closed days (before today)
        with more files than their rows need are compacted: their rows, in arrival order, into files of
        `rows_per_file` rows (the last one fewer), so that a reader opens a file or a few a day. Each step is one log
        generation of its own with a record in the log as its atomic point, finished by a restart that finds it
        (docs/telemetry-parquet.md). -> {"dropped": days, "compacted": files replaced}."""
        if self.pending:
            raise RecorderError("maintain() runs between commits: deliveries are waiting in the log")
        done = {"dropped": 0, "compacted": 0}
        days = sorted(p.name.split("=", 1)[1] for p in self.out.glob(f"{telemetry.PARTITION_COLUMN}=*") if p.is_dir())
        old = []
        if retain_days is not None:
            cutoff = (datetime.fromisoformat(today) - timedelta(days=retain_days)).date().isoformat()
            old = [day for day in days if day < cutoff]
        if retain_bytes is not None:
            sizes = {
                day: sum(f.stat().st_size for f in telemetry.partition_dir(self.out, day).iterdir()) for day in days
            }
            kept = sum(sizes.values()) - sum(sizes[day] for day in old)
            for day in [d for d in days if d not in old and d < today]:  # oldest first
                if kept <= retain_bytes:
                    break
                old.append(day)
                kept -= sizes[day]
        if old:
            self._log_step({"drop": [str(telemetry.partition_dir(self.out, d).relative_to(self.out)) for d in old]})
            self._end_generation(self._finish_drop, old)
            done["dropped"] = len(old)
            days = [day for day in days if day not in old]
        compacted_days = 0
        for day in [d for d in days if d < today]:
            if compacted_days >= max_days:
                break
            files = sorted(telemetry.partition_dir(self.out, day).glob("part-*-*.parquet"))
            if len(files) <= -(-telemetry.footer_rows(files) // rows_per_file):
                continue  # as few files as its rows need: compacted already
            into = self._compact(day, files, rows_per_file)
            self._log_step(
                {
                    telemetry.COMPACT: {
                        "into": [str(f.relative_to(self.out)) for f in into],
                        "from": [str(f.relative_to(self.out)) for f in files],
                    }
                }
            )
            self._end_generation(self._finish_compaction, into, files)
            done["compacted"] += len(files)
            compacted_days += 1
        return done

    def _compact(self, day: str, files: list[Path], rows_per_file: int) -> list[Path]:
        """The day's rows written, in arrival order, to temporary files of rows_per_file rows; -> the final names.
        Streamed a batch at a time (day_batches): the memory it takes does not grow with the day."""
        rows = _Rows(day_batches(files))
        into = [
            telemetry.part_file(self.out, day, self.generation, i)
            for i in range(max(1, -(-telemetry.footer_rows(files) // rows_per_file)))
        ]
        try:
            for final in into:
                write_batches(rows.take(rows_per_file), self._temp(final))
        except OSError:
            for final in into:
                self._temp(final).unlink(missing_ok=True)  # no record names them: the day stays as it was
            raise
        return into

    def _end_generation(self, finish: Callable[..., None], *args: Any) -> None:
        """Finish the step the log's last record names (a commit's renames, a maintenance step's), then start a new
        generation. That record ends its generation (docs/telemetry-parquet.md): a log that could not move on takes
        nothing more, since a restart would read what followed as part of the step. So a failure here is a
        StoreWriteError, and reload() finishes the step as a restart does."""
        try:
            finish(*args)
            self._new_generation()
        except OSError as exc:
            self._abandon_log()  # (nothing unsynced in it: the step's record was synced)
            raise StoreWriteError(exc) from None

    def _abandon_log(self) -> None:
        """Close the log, whatever its close raises: nothing is appended until reload() opens it again."""
        wal, self._wal = self._wal, None
        if wal is not None:
            try:
                wal.close()
            except OSError:
                pass

    def _log_step(self, record: dict[str, Any]) -> None:
        """A maintenance step's record, durable: from here on a restart finishes the step."""
        self._append(record)
        self.sync()

    def _finish_compaction(self, into: list[Path], files: list[Path]) -> None:
        for final in into:
            temp = self._temp(final)
            if temp.exists():
                os.replace(temp, final)
            elif not final.exists():
                raise RecorderError(f"{final} is named by a compaction but neither it nor its temporary file exists")
        _fsync_dir(into[0].parent)
        for old in files:
            if old not in into:
                old.unlink(missing_ok=True)  # (a reader between the rename and here sees rows twice: dedup on arrival)
        _fsync_dir(into[0].parent)

    def _finish_drop(self, days: list[str]) -> None:
        for day in days:
            folder = telemetry.partition_dir(self.out, day)
            for f in folder.glob("*"):
                f.unlink(missing_ok=True)
            if folder.exists():
                folder.rmdir()
        _fsync_dir(self.out)

    def close(self) -> None:
        if self._wal is not None:
            self._wal.close()
            self._wal = None
        self._lock.close()

    def usage(self) -> StoreUsage:
        """The store's size and its disk's free space, now (a walk of its folders: fine at a scrape's pace; a file
        that a maintenance step removes meanwhile is not counted)."""
        size = files = 0
        days = []
        for folder in [self.state, *self.out.glob(f"{telemetry.PARTITION_COLUMN}=*")]:
            if folder != self.state:
                days.append(folder.name.split("=", 1)[1])
            try:
                entries = list(folder.iterdir())
            except OSError:
                continue
            for entry in entries:
                try:
                    size += entry.stat().st_size
                except OSError:
                    continue
                files += 1
        disk = os.statvfs(self.out)
        return StoreUsage(
            size, files, disk.f_bavail * disk.f_frsize, disk.f_blocks * disk.f_frsize, min(days, default=None)
        )

    # -- the log --------------------------------------------------------------------------------------------

    @staticmethod
    def _temp(final: Path) -> Path:
        return final.with_name(f".{final.name}.tmp")  # a dot-name: Spark and pyarrow skip it

    def _finish_commit(self, finals: list[Path]) -> None:
        for final in finals:
            temp = self._temp(final)
            if temp.exists():
                os.replace(temp, final)
                _fsync_dir(final.parent)
            elif not final.exists():
                raise RecorderError(f"{final} is named by a commit but neither it nor its temporary file exists")

    def _append(self, record: dict[str, Any]) -> None:
        if self._wal is None:
            raise StoreWriteError(OSError(0, "the log is not open (a write failed before): reload() first"))
        try:
            self._wal.write(json.dumps(record, separators=(",", ":")).encode() + b"\n")
        except OSError as exc:
            raise StoreWriteError(exc) from None
        self._unsynced = True

    def _new_generation(self) -> None:
        """Start an empty log carrying what the next restart needs, replacing the old one atomically."""
        self.generation += 1
        header = {
            "wal": WAL_FORMAT,
            "generation": self.generation,
            "next_arrival": self.next_arrival,
            **self.session.snapshot(),
        }
        if self.ledger is not None:
            header["confirm"] = self.ledger.snapshot()
        temp = self.wal_path.with_name(self.wal_path.name + ".tmp")
        with open(temp, "wb") as f:
            f.write(json.dumps(header, separators=(",", ":")).encode() + b"\n")
            f.flush()
            os.fsync(f.fileno())
        if self._wal is not None:
            self._wal.close()
        os.replace(temp, self.wal_path)
        _fsync_dir(self.state)
        self._wal = open(self.wal_path, "ab")

    def _recover(self) -> int:
        """Pick up after whatever happened to the last recorder; returns how many deliveries it had logged that
        were not yet in Parquet (now written)."""
        committed: list[str] = []
        logged = 0
        self._steps: list[dict[str, Any]] = []  # maintenance steps the log names (at most one a generation)
        if self.wal_path.exists():
            committed = self._replay()
            logged = len(self.pending)
            self._wal = open(self.wal_path, "ab")
        else:
            # A folder whose log was removed (or one that already holds files): number the files after the
            # ones there, so that no commit ever replaces an existing file.
            existing = telemetry.committed_files(self.out)
            self.generation = max((_generation(f.name) for f in existing), default=0)
            self.next_arrival = max((_max_arrival(f) + 1 for f in existing), default=0)
        # The files the log's records name: a commit's, a compaction's.
        written = [
            *committed,
            *(n for s in self._steps if telemetry.COMPACT in s for n in s[telemetry.COMPACT]["into"]),
        ]
        named = {self._temp(self.out / name) for name in written}
        for stray in self.out.glob(f"{telemetry.PARTITION_COLUMN}=*/.*.tmp"):
            if stray not in named:
                stray.unlink()  # written by a commit that never reached its commit record; its rows are logged
        self.resumed = []
        for step in self._steps:  # a maintenance step a crash interrupted: finished as it began
            if telemetry.COMPACT in step:
                into = [self.out / name for name in step[telemetry.COMPACT]["into"]]
                self._finish_compaction(into, [self.out / name for name in step[telemetry.COMPACT]["from"]])
                self.resumed.append(
                    f"compaction of {into[0].parent.name} ({len(step[telemetry.COMPACT]['from'])} files)"
                )
            else:
                self._finish_drop([name.split("=", 1)[1] for name in step["drop"]])
                self.resumed.append(f"drop of {len(step['drop'])} days ({', '.join(step['drop'])})")
        if committed:
            self._finish_commit([self.out / name for name in committed])
        if self.pending:
            if written:
                # Deliveries after a record that ends its generation: a recorder before 0.12.0 logged on when it
                # could not start the next generation. Their files come after the ones that record names.
                self.generation = max(self.generation, 1 + max(_generation(Path(n).name) for n in written))
            self.commit()
        else:
            self._new_generation()
        return logged

    def _replay(self) -> list[str]:
        """Read the log back into memory; returns the files its commit record names (none without one)."""
        data = self.wal_path.read_bytes()
        first = data.find(b"\n") + 1
        try:
            header = json.loads(data[:first])
            if header.get("wal") != WAL_FORMAT:
                raise ValueError(f"log format {header.get('wal')!r}")
        except ValueError as exc:
            raise RecorderError(
                f"{self.wal_path} is not a recorder log this version reads ({exc}); move it away to start afresh"
            ) from None
        self.generation = header["generation"]
        self.next_arrival = header["next_arrival"]
        self.session = ReceiveSession.restore(header)
        if self.confirm:
            self.ledger = Ledger.restore(header.get("confirm", {}))
        committed: list[str] = []
        end = first
        while end < len(data):
            stop = data.find(b"\n", end)
            try:
                if stop < 0:
                    raise ValueError("no end of line")
                record = json.loads(data[end:stop])
            except ValueError:
                break  # torn by a crash mid-append: never synced, so never acknowledged
            end = stop + 1
            if "m" in record:
                d = ReceivedPublish.from_log(record["m"])
                self.pending.append(d)
                self.next_arrival = d.arrival + 1
                self.session.delivered(d.topic, d.qos, d.packet_id, d.payload, d.dup)
                if d.qos:
                    self._note_stored(d)
            elif "rel" in record:
                self.session.release(record["rel"])
            elif "commit" in record:
                committed += record["commit"]
                self.pending = []  # a commit record holds the deliveries logged before it
            elif telemetry.COMPACT in record or "drop" in record:
                self._steps.append(record)
        if end < len(data):
            os.truncate(self.wal_path, end)  # drop the torn tail so that later records follow whole ones
        return committed
