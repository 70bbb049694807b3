"""The bridge's metrics (`host-bridge run --metrics HOST:PORT`): its counters per board and in total, which boards
are served and connected, and the broker's reachability; /healthz fails once the broker has been unreachable for
longer than --health-after. Read from the counters the board threads keep (host_bridge.bridge.relay) at each
scrape. docs/metrics.md lists them with alert rules."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import Metric

from host_bridge.bridge.relay import COUNTERS, Bridge
from host_bridge.metrics import counter, gauge

# Each counter's metric name (without dmqtt_bridge_ and _total) and help; base units in the names.
NAMES = {
    "frames_in": ("frames_in", "link frames received from boards"),
    "frames_out": ("frames_out", "link frames sent to boards"),
    "bytes_up": ("to_broker_bytes", "MQTT bytes relayed from boards to the broker"),
    "bytes_down": ("to_board_bytes", "MQTT bytes relayed from the broker to boards"),
    "retransmissions": ("retransmissions", "link frames sent again (a clean line has none)"),
    "timeouts": ("timeouts", "link retransmission timeouts"),
    "crc_errors": ("crc_errors", "link frames received damaged"),
    "resyncs": ("resyncs", "link decoder overflows (lost frame boundaries)"),
    "board_restarts": ("restarts", "boards seen restarting (a new link epoch)"),
    "connects": ("connects", "TCP connections opened to the broker for boards"),
    "connect_failures": ("connect_failures", "TCP connections to the broker that failed"),
    "refused": ("refused", "connection requests to destinations not allowed"),
    "port_reopens": ("port_reopens", "serial ports lost and opened again"),
    "noise_bytes": ("line_noise_bytes", "bytes on the line that were neither frames nor console text"),
    "broker_stalls": ("broker_stalls", "times a broker that stopped reading held a board back"),
    "flash_pauses": ("flash_pauses", "times a board paused the link for a flash erase"),
    "wrong_boards": ("wrong_boards", "connections refused because the board said it is another than expected"),
}
assert set(NAMES) == set(COUNTERS), "every counter of the bridge has its metric"


def families(bridge: Bridge) -> Iterator[Metric]:
    sessions = bridge.boards()
    totals = bridge.totals()
    for key, (name, doc) in NAMES.items():
        yield counter(
            f"dmqtt_bridge_{name}", f"{doc}, every board since start (boards gone included)", value=totals[key]
        )
        each = counter(f"dmqtt_bridge_board_{name}", f"{doc}, per board served now", ["board"])
        for session in sessions:
            each.add_metric([session.board.name], session.counters[key])
        yield each
    info = gauge("dmqtt_bridge_board_info", "a board served now: its port and the client id of its last CONNECT",
                 ["board", "path", "client_id"])  # fmt: skip
    connected = gauge("dmqtt_bridge_board_connected", "1 while a board has a connection to the broker", ["board"])
    present = gauge("dmqtt_bridge_board_present", "1 while a board's serial port is open", ["board"])
    for session in sessions:
        info.add_metric([session.board.name, session.board.path, session.client_id], 1)
        connected.add_metric([session.board.name], int(session.connected))
        present.add_metric([session.board.name], int(session.present))
    yield info
    yield connected
    yield present
    wrong = gauge(
        "dmqtt_bridge_board_wrong", "1 while the board on a port says it is another than expected (refused)",
        ["board", "client_id"],
    )  # fmt: skip
    for session in sessions:
        if session.wrong:
            wrong.add_metric([session.board.name, session.wrong], 1)
    yield wrong
    # The nodes behind gateway boards (docs/nodes.md): each a board of its own to the broker.
    node_info = gauge("dmqtt_bridge_node_info", "a node behind a gateway: the client id of its last CONNECT",
                      ["board", "node", "client_id"])  # fmt: skip
    node_connected = gauge(
        "dmqtt_bridge_node_connected", "1 while a node behind a gateway has a connection to the broker",
        ["board", "node"],
    )  # fmt: skip
    node_counts = {
        key: counter(f"dmqtt_bridge_node_{name}", f"{doc}, per node behind a gateway", ["board", "node"])
        for key, name, doc in (
            ("connects", "connects", "TCP connections opened to the broker"),
            ("connect_failures", "connect_failures", "TCP connections to the broker that failed"),
            ("bytes_up", "to_broker_bytes", "MQTT bytes relayed to the broker"),
            ("bytes_down", "to_node_bytes", "MQTT bytes relayed from the broker"),
        )
    }
    for session in sessions:
        relay = session.nodes
        for node in list(relay.nodes.values()) if relay is not None else []:
            node_info.add_metric([session.board.name, node.name, node.client_id], 1)
            node_connected.add_metric([session.board.name, node.name], int(node.connected))
            for key, family in node_counts.items():
                family.add_metric([session.board.name, node.name], node.counters[key])
    yield node_info
    yield node_connected
    yield from node_counts.values()
    # One series for each port and pattern of the configuration, served or not: the boards present behind it. A
    # pattern's boards come and go with their ports, and a board that is unplugged leaves the board_* series, so
    # an alert on a vanished board is written on this one (docs/metrics.md).
    configured = gauge(
        "dmqtt_bridge_port_boards", "boards present behind a configured port or pattern (0: none)", ["port"]
    )
    for entry in bridge.configured:
        configured.add_metric([entry.path], sum(s.present for s in bridge.behind(entry)))
    yield configured
    # A board expected and not here: a configured port not open, or a board that went from behind a pattern (its
    # board_* series are gone with it; this one stays until it is back or a reload forgets it).
    missing = gauge(
        "dmqtt_bridge_board_missing_seconds",
        "seconds a board expected here has been away (a configured port not open, a pattern's board gone)",
        ["board"],
    )  # fmt: skip
    for name, away in sorted(bridge.missing().items()):
        missing.add_metric([name], round(away, 3))
    yield missing
    yield gauge("dmqtt_bridge_boards", "boards served now", value=len(sessions))
    yield gauge(
        "dmqtt_bridge_boards_connected", "boards with a connection to the broker now",
        value=sum(s.connected for s in sessions),
    )  # fmt: skip
    yield gauge(
        "dmqtt_bridge_broker_unreachable_seconds",
        "how long every attempt to reach the broker has failed (0: it answers)",
        value=round(bridge.health.unreachable_for(), 3),
    )
    yield counter("dmqtt_bridge_broker_outages", "times the broker became unreachable", value=bridge.health.outages)
    pending = gauge(
        "dmqtt_bridge_reload_not_applied", "1 for each setting the last reload read changed and could not apply",
        ["setting"],
    )  # fmt: skip
    for setting in bridge.not_applied:
        pending.add_metric([setting], 1)
    yield pending
    yield gauge(
        "dmqtt_bridge_config_last_reload_successful",
        "0 when the last SIGHUP's config did not load (everything running kept), else 1", value=int(bridge.reload_ok),
    )  # fmt: skip


def health(bridge: Bridge, after_s: float) -> tuple[bool, str]:
    """/healthz: unhealthy once the broker has been unreachable for more than after_s seconds; degraded while
    ports or patterns are configured and no board is present behind any of them (nothing is being relayed), and
    while a board expected here has been away for more than after_s (Bridge.missing)."""
    down = bridge.health.unreachable_for()
    if down > after_s:
        return False, f"broker {bridge.broker} unreachable for {down:.0f} s"
    sessions = bridge.boards()
    if bridge.configured and not any(s.present for s in sessions):
        return False, f"degraded: no board present behind the {len(bridge.configured)} configured ports and patterns"
    away = sorted(name for name, seconds in bridge.missing().items() if seconds > after_s)
    if away:
        return False, f"degraded: {len(away)} boards missing for more than {after_s:g} s: {', '.join(away[:10])}"
    return True, f"ok: {len(sessions)} boards, broker {bridge.broker}" + (
        f" unreachable for {down:.0f} s" if down else ""
    )
