"""Closing a subscriber never fails on paho's own race (host_bridge/broker/paho_loop.py): its network thread clears
the client's reference to itself as it ends, and loop_stop() can read the reference set, then join None. The race
is made certain here. The network thread is held in its on_disconnect hook until loop_stop() has read the
reference, and loop_stop()'s call to threading.current_thread() then lets it go and waits until it has ended."""

from __future__ import annotations

import threading

import paho.mqtt.client as paho_client
import pytest

from host_bridge.broker.mosquitto import Mosquitto
from host_bridge.hil.subscriber import Subscriber


def test_a_subscriber_closes_when_paho_s_thread_ends_inside_loop_stop(
    mosquitto: Mosquitto, monkeypatch: pytest.MonkeyPatch
) -> None:
    subscriber = Subscriber(mosquitto.address, "paho-loop-race")
    network = [t for t in threading.enumerate() if t.name == "paho-mqtt-client-paho-loop-race"]
    assert len(network) == 1
    real_current_thread = threading.current_thread
    closing = real_current_thread()
    released = threading.Event()
    told = []

    def held(*_args: object) -> None:
        told.append(True)
        released.wait(10)

    subscriber.client.on_disconnect = held

    def after_the_network_thread_ended() -> threading.Thread:
        # (threading's own calls come here too: the module is the one paho imports.)
        if real_current_thread() is closing and not released.is_set():
            released.set()
            network[0].join(10)  # the DISCONNECT ends it: paho's thread clears client._thread as it goes
        return real_current_thread()

    monkeypatch.setattr(paho_client.threading, "current_thread", after_the_network_thread_ended)
    subscriber.close()
    assert released.is_set(), "loop_stop() asked for the current thread while the network thread ran"
    assert told and not network[0].is_alive()
