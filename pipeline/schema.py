"""The recorder's Parquet schema, defined once: the recorder (pyarrow) and the Spark jobs both build theirs from
FIELDS, so the two cannot drift. docs/telemetry-parquet.md specifies it; changing a field is a format change.

This module imports neither pyarrow nor pyspark at load time: the recorder must not pay for Spark."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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
    ("dev", "string", True),
    ("boot", "int64", True),
    ("seq", "int64", True),
    ("t", "int64", True),  # the board's ms since boot when it published
    ("reading", "float64", True),
    ("payload", "binary", False),  # the raw payload, always kept
    ("parse_error", "string", True),  # null when the payload is the expected JSON
)

# Hive-style partition directory under the output folder: date=YYYY-MM-DD (UTC date of received_at).
PARTITION_COLUMN = "date"
NAMES = tuple(name for name, _, _ in FIELDS)


def arrow_schema() -> pyarrow.Schema:
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
    }
    return pa.schema([pa.field(name, kinds[kind], nullable) for name, kind, nullable in FIELDS])


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
    }
    # Nullable everywhere on the Spark side: Spark reads Parquet columns as nullable whatever the file says.
    return T.StructType([T.StructField(name, kinds[kind], True) for name, kind, _ in FIELDS])
