"""`host-bridge sub` prints what reaches the broker, a line per message, as a user watching their first board runs
it: from the moment it says it is watching, each message published after (text, binary, a copy marked as sent
again) is printed once, and it exits after --count messages."""

from __future__ import annotations

import subprocess
import sys

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from dmqtt_telemetry.format import RESENT_MARK
from host_bridge.broker.mosquitto import Mosquitto
from tests.conftest import REPO


def test_sub_prints_each_message_and_exits_after_its_count(mosquitto: Mosquitto) -> None:
    watcher = subprocess.Popen(
        [sys.executable, "-m", "host_bridge", "sub", "sensors/#", "--broker", mosquitto.address, "--count", "3",
         "--timeout", "30"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert watcher.stderr is not None
        said = watcher.stderr.readline()
        assert said.startswith("sub: watching sensors/# on "), said
        host, port = mosquitto.address.rsplit(":", 1)
        publisher = mqtt.Client(CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv5)
        publisher.connect(host, int(port))
        publisher.loop_start()
        marked = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
        marked.UserProperty = [RESENT_MARK]
        for topic, payload, props in [
            ("sensors/b1/telemetry", b'{"seq": 1}', None),
            ("sensors/b1/raw", b"\xff\x00", None),
            ("sensors/b1/telemetry", b'{"seq": 1}', marked),
        ]:
            publisher.publish(topic, payload, qos=1, properties=props).wait_for_publish(10)
        publisher.loop_stop()
        publisher.disconnect()
        out, _ = watcher.communicate(timeout=30)
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.wait()
    assert watcher.returncode == 0, out
    assert out.splitlines() == [
        'sensors/b1/telemetry qos=1 retain=0 {"seq": 1}',
        "sensors/b1/raw qos=1 retain=0 hex:ff00",
        'sensors/b1/telemetry qos=1 retain=0 dmqtt=resent {"seq": 1}',
    ]
