"""The board application on the virtual board publishes over TCP to a real Mosquitto; a paho-mqtt observer
checks what arrives: every QoS on every protocol version, in order, DUP 0 and RETAIN 0 on first delivery."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from host_bridge.boards.definition import BoardDefinition
from host_bridge.broker.mosquitto import Mosquitto
from host_bridge.hil.cycle import boot_once
from host_bridge.hil.dut import BootEnd
from host_bridge.hil.virtual_dut import VirtualDut
from host_bridge.vboard import VirtualBoard


def test_bad_config_is_reported_without_a_crash(tmp_path: Path) -> None:
    conf = tmp_path / "config.json"
    conf.write_text(json.dumps({"client_id": "bad", "broker": "127.0.0.1:1", "publish": {"qos": 5}}))
    with VirtualBoard(flash=tmp_path / "b.flash", config=conf, stdout=subprocess.PIPE) as board:
        board.start()
        assert board.process is not None
        out, _ = board.process.communicate(timeout=30)
        assert board.wait() == 3
    text = out.decode()
    assert "config error: publish.qos must be 0, 1 or 2" in text and "Traceback" not in text


def test_foreign_journal_partition_is_reported_and_reinitialised(tmp_path: Path, mosquitto: Mosquitto) -> None:
    from host_bridge.vboard.flash_image import create_flash
    from tests.integration.boards import MQTTLOG

    create_flash(tmp_path / "b.flash", 2 * 1024 * 1024)
    with open(tmp_path / "b.flash", "r+b") as f:
        f.seek(MQTTLOG.offset)
        f.write(bytes(range(256)) * 64)  # 16 KiB that are not a journal
    conf = tmp_path / "config.json"
    conf.write_text(
        json.dumps({"client_id": "foreign", "broker": mosquitto.address, "publish": {"qos": 1, "count": 5}})
    )
    with VirtualBoard(flash=tmp_path / "b.flash", config=conf, stdout=subprocess.PIPE) as board:
        board.start()
        assert board.process is not None
        out, _ = board.process.communicate(timeout=60)
        assert board.wait() == 0, out.decode()
    assert "journal: 4 sector(s) without a valid header will be erased before use" in out.decode()


def run_vdut(tmp_path: Path, config: dict[str, object], cut_after: float | None = None, check: bool = True) -> BootEnd:
    dut = VirtualDut("d", BoardDefinition.load("sim"), flash=tmp_path / "b.flash", console_log=tmp_path / "console.log")
    try:
        dut.configure(config, check=check)
        return boot_once(dut, cut_after, timeout=60)
    finally:
        dut.close()


def test_a_message_the_broker_can_never_take_is_refused_before_journaling(tmp_path: Path) -> None:
    """Mosquitto announces a Maximum Packet Size of 200 bytes (5.0 CONNACK): 300-byte messages are refused by
    publish() before they reach the journal, counted, and the run finishes; none is ever sent [MQTT-3.2.2-15]."""
    with Mosquitto(tmp_path / "broker", options=("max_packet_size 200",)) as broker:
        config = {
            "client_id": "big",
            "broker": broker.address,
            "mqtt_version": "5",
            "publish": {"qos": 1, "count": 5, "payload_bytes": 300},
        }
        end = run_vdut(tmp_path, config)
        log = broker.log_path.read_text()
    assert end.kind == "done" and end.summary is not None, end.console
    assert (end.summary["sent"], end.summary["total"], end.summary["refused"]) == (0, 0, 5), end.summary
    assert end.console.count("publish refused: a PUBLISH of 3") == 5
    assert not any(w in log.lower() for w in ("too large", "exceed", "protocol error", "malformed")), log
    assert "disconnected." in log  # the clean DISCONNECT at the end of the run, not one forced by the broker


def test_a_311_broker_that_drops_the_connection_on_a_large_message_has_it_refused_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    """MQTT 3.1.1 cannot say the broker's packet limit: Mosquitto with max_packet_size 600 drops the connection on
    each 700-byte PUBLISH. Once the same message has been in flight at two dropped connections, the client takes
    the limit as shown (dmqtt.oversize): the journaled messages end as refused (0x95), the ones published after are
    refused by publish(), and the run finishes instead of reconnecting for ever."""
    with Mosquitto(tmp_path / "broker", options=("max_packet_size 600",)) as broker:
        config = {
            "client_id": "big-311",
            "broker": broker.address,
            "mqtt_version": "3.1.1",
            "publish": {"qos": 1, "count": 6, "payload_bytes": 700, "interval_ms": 100},
        }
        end = run_vdut(tmp_path, config)
    assert end.kind == "done" and end.summary is not None, end.console
    # The first message was journaled and ended refused; the five after it were refused before the journal.
    assert (end.summary["total"], end.summary["refused"]) == (1, 6), end.summary
    assert end.console.count("reason 0x95") == 1, end.console
    assert end.console.count("dropped the connection twice") == 5, end.console
    reconnects = end.console.count("\nconnection lost (")
    assert 2 <= reconnects <= 3, end.console  # two drops to learn the limit, not one per attempt for ever


def test_a_journaled_message_found_too_large_later_ends_as_refused_and_frees_its_slot(tmp_path: Path) -> None:
    """Accepted into the journal while no broker was reachable, then the broker turns out to allow 200 bytes:
    each flow ends as refused (0x95) instead of holding a window slot for ever, and the run finishes."""
    offline = {
        "client_id": "late",
        "broker": "127.0.0.1:1",
        "mqtt_version": "5",
        "publish": {"qos": 2, "count": 6, "payload_bytes": 300},
    }
    first = run_vdut(tmp_path, offline, cut_after=2.0)
    assert first.kind == "power-cut" and "connect failed" in first.console, first.console
    with Mosquitto(tmp_path / "broker", options=("max_packet_size 200",)) as broker:
        end = run_vdut(tmp_path, {**offline, "broker": broker.address})
        log = broker.log_path.read_text()
    assert end.kind == "done" and end.summary is not None, end.console
    assert (end.summary["total"], end.summary["refused"]) == (6, 6), end.summary
    assert end.console.count("reason 0x95") == 6
    assert not any(w in log.lower() for w in ("too large", "exceed", "protocol error", "malformed")), log
    assert "disconnected." in log  # the clean DISCONNECT at the end of the run, not one forced by the broker


def test_topics_are_checked_with_the_codec_rules_at_boot(tmp_path: Path) -> None:
    for topic, why in (("sensors/+/t", "wildcards"), ("", "must not be empty")):
        config = {"client_id": "t", "broker": "127.0.0.1:1", "publish": {"qos": 1, "topic": topic}}
        end = run_vdut(tmp_path, config, check=False)  # the board's own words, not the host's check
        assert end.status == 3 and "config error: publish.topic" in end.console and why in end.console, end.console
    config = {"client_id": "t", "broker": "127.0.0.1:1", "subscribe": [{"topic": "cmd/#/x", "qos": 1}]}
    end = run_vdut(tmp_path, config, check=False)
    assert end.status == 3 and "config error: subscribe topic 'cmd/#/x'" in end.console, end.console


def test_a_config_changed_since_the_kept_check_is_checked_again(tmp_path: Path, mosquitto: Mosquitto) -> None:
    """A config.json changed after a good boot, into one the checker refuses, is refused at the next boot (a board
    that sleeps keeps its check in .kept/config.checked: tests/unit/board/test_config_checked.py)."""
    good = {"client_id": "kept", "broker": mosquitto.address, "publish": {"qos": 1, "count": 2}}
    end = run_vdut(tmp_path, good)
    assert end.kind == "done", end.console
    end = run_vdut(tmp_path, {**good, "publish": {"qos": 1, "count": 3}})  # a changed config, the kept check not
    assert end.kind == "done" and end.summary is not None and end.summary["count"] == 3, end.console
    bad = {**good, "publish": {"qos": 1, "topic": "sensors/+/t"}}
    end = run_vdut(tmp_path, bad, check=False)
    assert end.status == 3 and "config error: publish.topic" in end.console, end.console
