"""The telemetry format, defined once (docs/telemetry-parquet.md specifies it; changing a field is a format change):

- the payload a board publishes (a JSON object: PAYLOAD_FIELDS), how it is made (`payload`) and how it is parsed
  and validated (`parse_payload`, which never raises);
- the recorder's Parquet schema (FIELDS): the recorder (pyarrow) and the Spark jobs both build theirs from it, so
  the two cannot drift;
- the folder layout a recorder writes and every reader reads (date=YYYY-MM-DD/part-*.parquet, _recorder/).

This module imports neither pyarrow nor pyspark at load time: the recorder must not pay for Spark."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import pyarrow
    from pyspark.sql.types import StructType

# (name, kind, nullable). Kinds map to Arrow and Spark types below.
FIELDS: tuple[tuple[str, str, bool], ...] = (
    ("received_at", "timestamp", False),  # when the recorder read the PUBLISH, UTC, microseconds
    ("arrival", "int64", False),  # the recorder's own counter, increasing across its restarts: arrival order
    ("topic", "string", False),
    ("qos", "int8", False),  # QoS of the delivery (the subscription is QoS 2, so the publisher's QoS)
    ("dup", "bool", False),  # the DUP flag the broker set: a redelivery to the recorder [MQTT-3.3.1-1]
    ("retain", "bool", False),
    ("packet_id", "int32", False),  # 0 at QoS 0 [MQTT-2.3.1-5]
    ("recorder_dup", "bool", False),  # the recorder had already stored this very delivery (see the docs)
    # Stored only after the board sent it again, the recorder having told it the message was missing (end-to-end
    # confirmation); null in files written without confirmation (the column came with it).
    ("repaired", "bool", True),
    # A copy the board sent again on purpose (end-to-end confirmation), as the MQTT 5.0 User Property RESENT_MARK
    # on the delivery says; null where the recorder's connection could not carry it (MQTT 3.1, 3.1.1) and in files
    # written before the column came.
    ("resent", "bool", True),
    ("dev", "string", True),
    ("boot", "int64", True),
    ("seq", "int64", True),
    ("t", "int64", True),  # the board's ms since boot when it published
    ("reading", "float64", True),
    ("payload", "binary", False),  # the raw payload, always kept
    ("parse_error", "string", True),  # null when the payload is the expected JSON
    # The payload's other numeric keys (a battery voltage, an RSSI: whatever a board adds), typed; null when there
    # are none or the payload is no JSON object. Keys the columns above hold and booleans are not repeated here.
    ("values", "map_double", True),
)

NAMES = tuple(name for name, _, _ in FIELDS)

# The store's format: each number, the release that wrote it first, and the columns it added to the one before.
# Every file written since format 3 carries its number in its Parquet key-value metadata (FORMAT_KEY); a file
# without it is told by its columns (file_format). Readers take every format: a column a file predates reads as
# null (docs/telemetry-parquet.md, "Formats").
FORMATS: dict[int, tuple[str, tuple[str, ...]]] = {
    1: ("0.1.0", ()),
    2: ("0.3.0", ("repaired",)),  # inserted before dev
    3: ("0.9.0", ("resent",)),  # inserted before dev
    4: ("0.15.0", ("values",)),  # at the end
}
FORMAT = max(FORMATS)
FORMAT_KEY = "dmqtt.format"


def format_fields(number: int = FORMAT) -> tuple[tuple[str, str, bool], ...]:
    """The columns of a store format, in its order."""
    later = {name for n, (_, added) in FORMATS.items() if n > number for name in added}
    return tuple(f for f in FIELDS if f[0] not in later)


def file_format(columns: list[str], metadata: dict[bytes, bytes] | None) -> int:
    """The format of a Parquet file, from its metadata, or (a file from before the number was written) from its
    columns."""
    if metadata and FORMAT_KEY.encode() in metadata:
        return int(metadata[FORMAT_KEY.encode()])
    return max(n for n in FORMATS if all(name in columns for name, _, _ in format_fields(n)))


# The MQTT 5.0 User Property (name, value) that marks a copy of a message its board sent again on purpose: end-to-
# end confirmation's repair (firmware/dmqtt/confirm.py writes it; tests/unit/telemetry/test_resent_mark.py holds the two
# equal). Counted apart from duplicates: a copy without it is one.
RESENT_MARK = ("dmqtt", "resent")


def marked_resent(user_properties: Any) -> bool:
    """Whether a delivery's MQTT 5.0 User Properties (name, value pairs, as any client library gives them) hold
    RESENT_MARK."""
    return any(tuple(pair) == RESENT_MARK for pair in user_properties or ())


# -- the payload ---------------------------------------------------------------------------------------------

# What the board application (firmware/app/board_app.py) puts in each message, with the Python types a parser
# accepts. "pad" (filler up to payload_bytes) is ignored. seq counts 0, 1, 2 ... within a boot.
PAYLOAD_FIELDS: tuple[tuple[str, tuple[type, ...]], ...] = (
    ("dev", (str,)),
    ("boot", (int,)),
    ("seq", (int,)),
    ("t", (int,)),
    ("reading", (int, float)),
)


def payload(dev: str, boot: int, seq: int, t: int, reading: float, pad: int = 0) -> bytes:
    """A payload as a board writes it; `pad` characters of filler when asked (payload_bytes on the board)."""
    body: dict[str, Any] = {"dev": dev, "boot": boot, "seq": seq, "t": t, "reading": reading}
    if pad:
        body["pad"] = "x" * pad
    return json.dumps(body).encode()


def parse_payload(data: bytes) -> dict[str, Any]:
    """The telemetry fields of a payload, each None when absent or mistyped, parse_error saying what was wrong
    (None when nothing was), and values: its other numeric keys as floats (None when there are none). Never raises:
    a payload the pipeline cannot read is kept and explained."""
    fields: dict[str, Any] = {name: None for name, _ in PAYLOAD_FIELDS}
    try:
        body = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        return {**fields, "parse_error": "payload is not UTF-8", "values": None}
    except ValueError as exc:
        return {**fields, "parse_error": f"payload is not JSON: {exc}", "values": None}
    if not isinstance(body, dict):
        return {**fields, "parse_error": f"payload is JSON {type(body).__name__}, not an object", "values": None}
    problems = []
    for name, kinds in PAYLOAD_FIELDS:
        value: Any = body.get(name)
        if value is None:
            problems.append(f"no {name}")
        elif isinstance(value, bool) or not isinstance(value, kinds):
            problems.append(f"{name} is {type(value).__name__}")
        else:
            fields[name] = float(cast(float, value)) if name == "reading" else value
    if fields["seq"] is not None and fields["seq"] < 0:
        problems.append("seq is negative")
        fields["seq"] = None
    values = {
        key: float(value)
        for key, value in body.items()
        if key not in fields and isinstance(value, int | float) and not isinstance(value, bool)
    }
    return {**fields, "parse_error": "; ".join(problems) or None, "values": values or None}


def row(
    received_at_us: int,
    arrival: int,
    topic: str,
    qos: int,
    dup: bool,
    retain: bool,
    packet_id: int,
    recorder_dup: bool,
    data: bytes,
    repaired: bool | None = None,
    resent: bool | None = None,
) -> dict[str, Any]:
    """One delivery as a row of FIELDS (the payload parsed into its columns, the raw bytes kept)."""
    return {
        "received_at": received_at_us,
        "arrival": arrival,
        "topic": topic,
        "qos": qos,
        "dup": dup,
        "retain": retain,
        "packet_id": packet_id,
        "recorder_dup": recorder_dup,
        "repaired": repaired,
        "resent": resent,
        "payload": data,
        **parse_payload(data),
    }


# -- the folder layout -----------------------------------------------------------------------------------------

# Hive-style partition directory under the output folder: date=YYYY-MM-DD (UTC date of received_at).
PARTITION_COLUMN = "date"
STATE_DIR = "_recorder"  # the recorder's own state; the leading underscore makes Spark and pyarrow skip it
WAL_FILE = "wal.log"  # in STATE_DIR: the recorder's write-ahead log (docs/telemetry-parquet.md, `wal.log`)
COMPACT = "compact"  # the key of a compaction's record in it


def partition_dir(out: Path, date: str) -> Path:
    return out / f"{PARTITION_COLUMN}={date}"


def part_file(out: Path, date: str, generation: int, index: int) -> Path:
    """A committed file: its name orders the files by the recorder's log generation."""
    return partition_dir(out, date) / f"part-{generation:010d}-{index}.parquet"


def committed_files(out: Path) -> list[Path]:
    """The Parquet files committed under a recorder's folder (temporary dot-files excluded)."""
    return sorted(out.glob(f"{PARTITION_COLUMN}=*/part-*-*.parquet"))


def committed_rows(out: Path) -> int:
    """How many rows are committed, from the files' footers (no data read)."""
    return footer_rows(committed_files(out))


def footer_rows(files: list[Path]) -> int:
    """How many rows the files hold, from their footers (no data read)."""
    import pyarrow.parquet as pq

    return sum(pq.read_metadata(f).num_rows for f in files)


def damaged_files(out: Path) -> list[tuple[Path, str]]:
    """The committed files under `out` that are no readable Parquet (empty, truncated, overwritten), each with
    what is wrong: read from their footers, no data read. A storage fault, never a message lost in delivery."""
    import pyarrow.parquet as pq

    found = []
    for path in committed_files(out):
        try:
            if path.stat().st_size == 0:
                raise ValueError("empty (0 bytes)")
            pq.read_metadata(path)
        except (OSError, ValueError) as exc:  # (pyarrow's ArrowInvalid is a ValueError)
            found.append((path, str(exc).splitlines()[0][:160] or exc.__class__.__name__))
    return found


def log_state(out: Path) -> tuple[int, bool] | None:
    """(the generation in the header of the recorder's log under `out`, whether a compaction record is in it):
    (0, False) without a log, None when it cannot be read."""
    try:
        text = (out / STATE_DIR / WAL_FILE).read_bytes()
    except FileNotFoundError:
        return 0, False
    except OSError:
        return None
    try:
        generation = int(json.loads(text[: text.find(b"\n") + 1 or len(text)])["generation"])
    except (ValueError, KeyError, TypeError):
        return None
    return generation, b'{"' + COMPACT.encode() + b'":' in text


def read_committed(out: Path, columns: list[str] | None = None) -> list[dict[str, Any]]:
    """The committed rows (with the `date` partition column), in arrival order; [] before the first commit."""
    import pyarrow.dataset as ds

    if not committed_files(out):
        return []
    import pyarrow as pa

    wanted = None if columns is None else [*columns, "arrival"]  # arrival: for the order
    # The current schema imposed: a file of an earlier format reads its missing columns as null (inferred from
    # the first file, the schema would drop the columns it predates from every other file).
    partition = pa.schema([pa.field(PARTITION_COLUMN, pa.string())])
    dataset = ds.dataset(
        str(out), format="parquet", partitioning=ds.partitioning(partition, flavor="hive"),
        schema=pa.unify_schemas([arrow_schema(), partition]),
    )  # fmt: skip
    return sorted(dataset.to_table(columns=wanted).to_pylist(), key=lambda r: r["arrival"])


# -- the schema in each engine ---------------------------------------------------------------------------------


def arrow_schema(number: int = FORMAT) -> pyarrow.Schema:
    """The Arrow schema of a store format (the current one: what the recorder writes, its number in the
    metadata)."""
    import pyarrow as pa

    kinds: dict[str, Any] = {
        "timestamp": pa.timestamp("us", tz="UTC"),
        "int64": pa.int64(),
        "int32": pa.int32(),
        "int8": pa.int8(),
        "bool": pa.bool_(),
        "string": pa.string(),
        "float64": pa.float64(),
        "binary": pa.binary(),
        "map_double": pa.map_(pa.string(), pa.float64()),
    }
    fields = [pa.field(name, kinds[kind], nullable) for name, kind, nullable in format_fields(number)]
    return pa.schema(fields, metadata={FORMAT_KEY: str(number)})


def spark_schema() -> StructType:
    from pyspark.sql import types as T

    kinds: dict[str, Any] = {
        "timestamp": T.TimestampType(),
        "int64": T.LongType(),
        "int32": T.IntegerType(),
        "int8": T.ByteType(),
        "bool": T.BooleanType(),
        "string": T.StringType(),
        "float64": T.DoubleType(),
        "binary": T.BinaryType(),
        "map_double": T.MapType(T.StringType(), T.DoubleType()),
    }
    # Nullable everywhere on the Spark side: Spark reads Parquet columns as nullable whatever the file says.
    return T.StructType([T.StructField(name, kinds[kind], True) for name, kind, _ in FIELDS])
