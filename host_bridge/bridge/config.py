"""The schema of `host-bridge run --config` (TOML), declared once: every key and its type, unknown keys refused,
a mistake reported with the file, the key, the value found and what is expected (host_bridge.schema), before
anything runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

from host_bridge.schema import Seconds, TLSSection, convert

Baud = Annotated[int, msgspec.Meta(gt=0)]


class BoardEntry(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """[[board]]: a board's serial port, its name in the logs (default: the port's file name), its baud rate, and
    the client id the board on that port must say in its CONNECT (client_id; default: not checked)."""

    port: str
    name: str | None = None
    baud: Baud | None = None
    client_id: str | None = None


class BridgeConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The whole file: broker = "HOST:PORT", baud, allow = ["HOST:PORT", ...], the run's settings (stats_every,
    log_format, wait, strict_ports, metrics, health_after: as the options of the same names, which win over
    them), [tls], [[board]]. A unit file (tools/systemd/) then needs only --config."""

    broker: str | None = None
    baud: Baud = 115200
    allow: list[str] = []
    stats_every: Seconds = 300.0
    log_format: Literal["logfmt", "json"] = "logfmt"
    wait: Seconds | None = None
    strict_ports: bool = False
    metrics: str | None = None
    health_after: Seconds = 60.0
    identify: bool = False  # each named board's name is the client id its board must say (as --identify)
    tls: TLSSection | None = None
    board: list[BoardEntry] = []


def load(path: Path, raw: dict[str, Any]) -> BridgeConfig:
    """`raw` (the parsed TOML of `path`) checked against the schema; SchemaError naming the key and the value."""
    return convert(path, raw, BridgeConfig)
