"""`host-bridge record` as systemd runs it (tools/systemd/dmqtt-recorder.service): READY on the notify socket; its
Prometheus endpoint, parsed with prometheus-client's parser, counting what it received and wrote and, with
--confirm, each board's confirmation floor and the messages missing under it; /healthz failing while the broker
is away; the store's size, its disk's room and its maintenance; SIGHUP reading the config file again, applying
new topics (stored from then on) and naming what needs a restart, and a file that does not load keeping
everything (dmqtt_recorder_config_last_reload_successful 0); SIGTERM ending with the counters."""

from __future__ import annotations

import signal
import socket
from pathlib import Path

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from dmqtt_telemetry.format import payload
from host_bridge.broker.mosquitto import Mosquitto
from tests.integration.recorder_proc import RecorderProcess
from tests.integration.test_bridge_service import health, logged, notifications, scrape, until


def test_the_recorder_as_a_service(tmp_path: Path) -> None:
    broker = Mosquitto(tmp_path / "broker", persistence=True)
    broker.start()
    systemd = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    systemd.bind(str(tmp_path / "notify"))
    conf = tmp_path / "recorder.toml"
    conf.write_text('topic = ["sensors/#"]\nkeepalive = 30\n')
    recorder = RecorderProcess(
        tmp_path / "store", broker.address, "--confirm", "--metrics", "127.0.0.1:0", "--health-after", "1",
        "--stats-every", "0", "--config", str(conf), env={"NOTIFY_SOCKET": str(tmp_path / "notify")},
    )  # fmt: skip
    host, port = broker.address.rsplit(":", 1)
    board = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="svc-r1")
    board.connect(host, int(port))
    board.loop_start()
    try:
        recorder.wait_connected()
        address = logged(recorder.text(), "start")["metrics"]
        until(lambda: "READY=1" in notifications(systemd), "no READY=1")

        def send(seqs: list[int]) -> None:
            for seq in seqs:
                board.publish(
                    "sensors/svc-r1/telemetry", payload("svc-r1", 1, seq, seq, 20.5), qos=1
                ).wait_for_publish()

        send([s for s in range(20) if s != 7])  # seq 7 lost on the way
        until(lambda: scrape(address).get("dmqtt_recorder_rows_written_total") == 19, "19 rows never written")
        got = scrape(address)
        assert got["dmqtt_recorder_received_total"] == 19
        assert got['dmqtt_recorder_board_confirmed_floor{board="svc-r1",boot="1"}'] == 7
        assert got['dmqtt_recorder_board_missing{board="svc-r1",boot="1"}'] == 1
        assert got["dmqtt_recorder_connected"] == 1 and health(address) == 200
        send([7])  # the board sends it again: stored, and the floor moves past the top
        until(lambda: scrape(address).get('dmqtt_recorder_board_confirmed_floor{board="svc-r1",boot="1"}') == 20,
              "the floor did not move")  # fmt: skip
        assert scrape(address)['dmqtt_recorder_board_missing{board="svc-r1",boot="1"}'] == 0

        # The store as the metrics see it: its size, its disk, its oldest day, a maintenance pass at start.
        got = scrape(address)
        assert got["dmqtt_recorder_store_bytes"] > 0 and got["dmqtt_recorder_store_files"] >= 2
        assert 0 < got["dmqtt_recorder_store_free_bytes"] < got["dmqtt_recorder_store_filesystem_bytes"]
        assert got["dmqtt_recorder_store_oldest_day_timestamp_seconds"] % 86400 == 0
        assert got["dmqtt_recorder_maintenance_last_success_timestamp_seconds"] > 0
        assert got["dmqtt_recorder_maintenance_failing"] == 0

        # systemctl reload: a topic added applies (the session reconnects politely and subscribes), a keepalive
        # changed needs a restart and is named.
        conf.write_text('topic = ["sensors/#", "lab/#"]\nkeepalive = 45\n')
        recorder.process.send_signal(signal.SIGHUP)
        until(lambda: "event=reloaded" in recorder.text(), "SIGHUP did not reload")
        reloaded = logged(recorder.text(), "reloaded")
        assert reloaded["applied"] == "topic" and reloaded["needs_restart"] == "keepalive", reloaded
        until(lambda: "topics=sensors/#,lab/#" in recorder.text(), "the new topic was never subscribed")
        board.publish("lab/svc-r1/telemetry", payload("svc-r1", 1, 20, 20, 20.5), qos=1).wait_for_publish()
        until(lambda: scrape(address).get("dmqtt_recorder_rows_written_total") == 21, "the lab/ row never stored")
        assert scrape(address)["dmqtt_recorder_config_last_reload_successful"] == 1
        conf.write_text("topic = 7\n")  # a mistake: nothing changes, and the metric says so
        recorder.process.send_signal(signal.SIGHUP)
        until(lambda: "event=reload_failed" in recorder.text(), "the bad file was not refused")
        assert scrape(address)["dmqtt_recorder_config_last_reload_successful"] == 0 and recorder.running
        recorder.process.send_signal(signal.SIGUSR1)  # the counters, and it goes on
        until(lambda: "event=progress" in recorder.text(), "SIGUSR1 said no counters")

        broker.stop()
        until(lambda: health(address) == 503, "/healthz stayed healthy with the broker away")
        broker.start()
        until(lambda: health(address) == 200, "/healthz did not recover", limit_s=60)
    finally:
        board.loop_stop()
        board.disconnect()
        recorder.stop()
        broker.stop()
        systemd.close()
    log = recorder.text()
    assert "signal=SIGTERM action=stop" in log and logged(log, "progress")["rows_written"] == "21", log[-2000:]
