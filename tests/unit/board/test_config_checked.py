"""The check a boot keeps beside config.json (firmware/app/config_file.py reads it, config.store() writes it), so
that the boots after, a battery board's sending wakes among them, load no checker: read back, it is what
config.check() made, value for value and type for type; and its format is held to _CHECK_FORMAT, which a change
to check()'s output must bump (a board keeps the old file across a firmware update of the same version)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from host_bridge import assets
from host_bridge.boards.board_config import checker

config = checker()

# check()'s output, key by key (nested objects' keys after a dot), by _CHECK_FORMAT (2: the names on a line of
# their own, before the config; 3: the sensor hook; 4: a node's link to its gateway, espnow). A change here is a
# change of the kept format: bump config_file._CHECK_FORMAT with it, and config_file.read() and config.store() to
# match.
FORMATS = {
    4: (
        "client_id confirm confirm.confirm_topic confirm.hold confirm.timeout_s connect count espnow group_commit"
        " heap_log_every host interval_ms keepalive password payload_bytes port qos root sensor session_expiry sleep"
        " sleep.awake_s sleep.every_s sleep.max_reading_age_s sleep.queue_limit sleep.readings_per_send subscribe"
        " tls tls.ca tls.cert tls.insecure tls.key tls.server_hostname topic transport uart username version will wifi"
        " wifi.bssid wifi.ip wifi.password wifi.ssid window"
    ).split()
}

EVERYTHING = {
    "client_id": "shed-1",
    "broker": "10.0.0.5:8883",
    "mqtt_version": "5",
    "wifi": {
        "ssid": "lab",
        "password": "pw",
        "ip": ["10.0.0.9", "255.255.255.0", "10.0.0.1", "10.0.0.1"],
        "bssid": "02:00:00:aa:bb:fe",
    },  # fmt: skip
    "will": {"topic": "status/{client_id}", "payload": "gone", "qos": 1, "retain": True},
    "username": "u",
    "password": "pässword",
    "publish": {"topic": "sensors/{client_id}/telemetry", "qos": 2, "count": 100, "payload_bytes": 64},
    "subscribe": [{"topic": "cmd/{client_id}/#", "qos": 1}],
    "tls": {"ca": "ca.pem", "server_hostname": "broker.lan"},
    "confirm": {"timeout_s": 20},
    "sleep": {"every_s": 60, "awake_s": 10, "readings_per_send": 10, "queue_limit": 32},
}


def config_file(root: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """firmware/app/config_file.py on CPython, reading its files from `root` (a board's filesystem), the checker
    importable as on the board."""
    monkeypatch.syspath_prepend(str(assets.APP))
    monkeypatch.setitem(sys.modules, "config", config)
    spec = importlib.util.spec_from_file_location("config_file", assets.APP / "config_file.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "ROOTS", (str(root),))
    return module


def keys(value: dict[str, Any], where: str = "", bare: bool = False) -> list[str]:
    """Every key of `value`'s objects, in order: nested ones after their parent's and a dot, or `bare`."""
    out = []
    for key, item in value.items():
        out.append(where + key)
        if isinstance(item, dict):
            out += keys(item, "" if bare else where + key + ".", bare)
    return out


@pytest.mark.parametrize(
    "raw",
    [
        EVERYTHING,
        {"client_id": "b1", "broker": "127.0.0.1:1883", "sleep": {}},
        {"client_id": "b2", "transport": "serial", "wifi": None, "will": {"topic": "w"}, "sleep": {}},
    ],
    ids=["everything", "least", "serial"],
)
def test_a_kept_check_reads_back_as_the_check_made_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, raw: dict[str, Any]
) -> None:
    (tmp_path / "config.json").write_text(json.dumps(raw))
    reader = config_file(tmp_path, monkeypatch)
    checked = reader.read()  # checked by config.py, and the check kept
    # Its first line names every key of the checked config, for the board to intern before it parses the second.
    head, body = (tmp_path / ".kept" / "config.checked").read_text().split("\n")
    stored = json.loads(body)
    names = json.loads(head)[1]
    assert sorted(names) == sorted(set(keys(stored, "", bare=True))) and len(names) == len(set(names))
    monkeypatch.setattr(config, "load", lambda base: pytest.fail("checked again"))
    kept = reader.read()  # from the check kept
    assert kept == checked == {**config.check(json.loads(json.dumps(raw))), "root": str(tmp_path)}
    assert [type(kept[k]) for k in checked] == [type(checked[k]) for k in checked]
    if checked["wifi"]:
        assert [type(v) for v in kept["wifi"].values()] == [type(v) for v in checked["wifi"].values()]
        assert isinstance(kept["wifi"]["bssid"], bytes) and isinstance(kept["wifi"]["ip"], tuple)
    if checked["will"]:
        assert isinstance(kept["will"], tuple) and isinstance(kept["will"][1], bytes)
    assert all(isinstance(entry, tuple) for entry in kept["subscribe"])


def test_a_board_that_stays_awake_keeps_no_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"client_id": "b1", "broker": "127.0.0.1:1883"}))
    reader = config_file(tmp_path, monkeypatch)
    assert reader.read() == reader.read()
    assert not (tmp_path / ".kept").exists()


def test_a_changed_file_is_checked_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"client_id": "b1", "broker": "127.0.0.1:1883", "sleep": {}}))
    reader = config_file(tmp_path, monkeypatch)
    reader.read()
    (tmp_path / "secrets.json").write_text(json.dumps({"password": "changed"}))
    assert reader.read()["password"] == b"changed"
    (tmp_path / "config.json").write_text(json.dumps({"client_id": "b1", "broker": "127.0.0.1", "sleep": {}}))
    with pytest.raises(Exception, match="broker must be host:port"):  # (config.py as the board imports it)
        reader.read()


def test_the_kept_format_is_the_one_check_makes() -> None:
    checked = config.check(json.loads(json.dumps(EVERYTHING)))
    checked["root"] = "/flash"
    source = (assets.APP / "config_file.py").read_text()
    form = int(source.split("_CHECK_FORMAT = const(")[1].split(")")[0])
    assert sorted(keys(checked)) == sorted(FORMATS[form]), (
        "config.check()'s output changed: bump config_file._CHECK_FORMAT, "
        "and make config_file.read() and config.store() match"
    )
