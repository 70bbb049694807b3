"""The schema of `host-bridge record --config` (TOML), declared once, as the bridge's is: every key and its type,
unknown keys refused, a mistake reported with the file, the key, the value found and what is expected
(host_bridge.schema), before anything runs. Its keys are the command's options (the same names, `_` for `-`);
an option given on the command line wins over the file, the file over these defaults. A unit file
(tools/systemd/dmqtt-recorder.service) then needs only --config."""

from __future__ import annotations

import argparse
import tomllib
from pathlib import Path
from typing import Annotated, Literal

import msgspec

from host_bridge.recorder.store import RecorderError
from host_bridge.schema import Seconds, TLSSection, convert

Positive = Annotated[int, msgspec.Meta(gt=0)]


class RecorderConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The whole file. broker and out are required, here or on the command line; topic is a list of filters
    (empty: sensors/#); password_file keeps the password out of the file; [tls] as the bridge's."""

    broker: str | None = None
    out: str | None = None
    topic: list[str] = []
    client_id: str | None = None
    mqtt_version: Literal["3.1", "3.1.1", "5"] = "3.1.1"
    keepalive: Positive = 30
    flush_seconds: Annotated[float, msgspec.Meta(gt=0)] = 30.0
    flush_rows: Positive = 100_000
    stats_every: Seconds = 300.0
    metrics: str | None = None
    health_after: Seconds = 60.0
    confirm: bool = False
    confirm_topic: str = "confirm/{dev}"
    confirm_every: Seconds = 1.0
    username: str | None = None
    password_file: str | None = None
    wait: Seconds | None = None
    log_format: Literal["logfmt", "json"] = "logfmt"
    compact: bool = True
    retain_days: Positive | None = None
    retain_gb: Annotated[float, msgspec.Meta(gt=0)] | None = None
    tls: TLSSection | None = None


DEFAULTS = RecorderConfig()
_PATHS = ("out", "password_file")  # options argparse gives as Path


def read(path: Path) -> RecorderConfig:
    """The file at `path`, checked; RecorderError (or SchemaError) saying what is wrong."""
    try:
        raw = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise RecorderError(f"config file {path} does not exist") from None
    except OSError as exc:
        raise RecorderError(f"cannot read config file {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise RecorderError(f"{path}: {exc}") from None
    return convert(path, raw, RecorderConfig)


def apply(args: argparse.Namespace) -> None:
    """Fill what the command line left unset (None) from --config, else from the defaults: the namespace then holds
    what the recorder runs with. RecorderError when broker or out is given nowhere."""
    conf = read(args.config) if args.config is not None else DEFAULTS
    for name in RecorderConfig.__struct_fields__:
        if name == "tls" or getattr(args, name) is not None:
            continue
        value = getattr(conf, name)
        if name in _PATHS and value is not None:
            value = Path(value)
        setattr(args, name, value)
    if not args.topic:
        args.topic = None  # (the recorder's own default, sensors/#)
    section = conf.tls
    if section is not None:
        args.tls = True
        args.cafile = args.cafile or section.cafile
        args.certfile = args.certfile or section.certfile
        args.keyfile = args.keyfile or section.keyfile
    if args.retain_days is not None and args.retain_days < 1:
        raise RecorderError(f"--retain-days {args.retain_days}: at least 1 (today's data is never dropped)")
    if args.retain_gb is not None and not args.retain_gb > 0:
        raise RecorderError(f"--retain-gb {args.retain_gb}: a size above 0 (50 keeps about 50 GB of days)")
    for name, option in (("broker", "--broker HOST:PORT"), ("out", "--out DIR")):
        if getattr(args, name) is None:
            raise RecorderError(f'no {name}: give {option} or {name} = "..." in the config file')
