"""Ending a paho client's network thread (the one loop_start() starts) at once, without paho's race."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # paho is an extra of the host package: imported by the callers that have it
    import paho.mqtt.client as mqtt


def end_loop(client: mqtt.Client) -> None:
    """A DISCONNECT, then the network thread joined. The DISCONNECT first: it wakes the thread, which then ends at
    once (stopped first, the thread would be joined only when its select() times out, a second later). The
    thread clears the client's reference to itself as it ends, so paho's loop_stop() can find the reference set
    and then join None (eclipse-paho/paho.mqtt.python issue 872): that AttributeError says the thread has ended."""
    client.disconnect()
    try:
        client.loop_stop()
    except AttributeError:
        pass
