"""`host-bridge run` as systemd runs it (tools/systemd/dmqtt-bridge.service), with virtual boards on serial lines
and a real Mosquitto: the notify protocol (READY, WATCHDOG, STOPPING) on a socket that stands in for systemd's;
the Prometheus endpoint scraped while a board goes through a power cut, parsed with prometheus-client's own
parser, its counters the same as the log's; SIGHUP adding a board without touching the other's session; /healthz
failing while the broker is away and back once it returns, said once each in the log; every signal logged and
the final counters at exit."""

from __future__ import annotations

import re
import signal
import socket
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from host_bridge.bridge.metrics import NAMES as METRIC_NAMES
from host_bridge.broker.mosquitto import Mosquitto
from host_bridge.hil.subscriber import Subscriber
from host_bridge.processes import ManagedProcess
from tests.conftest import REPO
from tests.integration.boards import read_until, summary
from tests.integration.test_bridge import serial_board


def scrape(address: str) -> dict[str, float]:
    """Every sample of /metrics: `name{label="value",...}` -> value."""
    text = urllib.request.urlopen(f"http://{address}/metrics", timeout=10).read().decode()
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            out[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return out


def health(address: str) -> int:
    try:
        return int(urllib.request.urlopen(f"http://{address}/healthz", timeout=10).status)
    except urllib.error.HTTPError as exc:
        return exc.code


def until(condition: object, what: str, limit_s: float = 30) -> None:
    deadline = time.monotonic() + limit_s
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def notifications(sock: socket.socket) -> list[str]:
    out = []
    sock.setblocking(False)
    while True:
        try:
            out += sock.recv(4096).decode().split("\n")
        except BlockingIOError:
            return out


def logged(log: str, name: str) -> dict[str, str]:
    """The fields of the last `event=name` line."""
    line = [ln for ln in log.splitlines() if f"event={name} " in ln or ln.endswith(f"event={name}")][-1]
    return dict(re.findall(r"(\w+)=(\S+)", line))


def test_the_bridge_as_a_service(tmp_path: Path) -> None:
    broker = Mosquitto(tmp_path / "broker", persistence=True)
    broker.start()
    systemd = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    systemd.bind(str(tmp_path / "notify"))
    board_a = serial_board(tmp_path / "a", "svc-a", 1, 60, publish={"interval_ms": 20})
    board_b = serial_board(tmp_path / "b", "svc-b", 1, 100000, publish={"interval_ms": 50})
    toml = tmp_path / "bridge.toml"
    head = f'broker = "{broker.address}"\nstats_every = 0\nmetrics = "127.0.0.1:0"\nhealth_after = 1\n'
    toml.write_text(head + f'[[board]]\nname = "a"\nport = "{board_a.serial_link}"\n')
    bridge = ManagedProcess(
        [sys.executable, "-m", "host_bridge", "run", "--config", str(toml)],
        tmp_path / "bridge.log",
        cwd=REPO,
        env={"NOTIFY_SOCKET": str(tmp_path / "notify"), "WATCHDOG_USEC": "400000"},
    )
    subscriber = Subscriber(broker.address, "svc-observer", "sensors/#")
    other = Mosquitto(tmp_path / "broker2")  # the broker a reload moves the boards to
    try:
        bridge.wait_for("event=start")
        address = logged(bridge.text(), "start")["metrics"]
        seen: list[str] = []
        until(lambda: (seen.extend(notifications(systemd)) or True) and seen.count("WATCHDOG=1") >= 2,
              "no READY then WATCHDOG from the main loop")  # fmt: skip
        assert seen.index("READY=1") < seen.index("WATCHDOG=1")

        # Board a: through a power cut, to the end of its run.
        board_a.start()
        assert board_a.process is not None
        read_until(board_a, lambda out: out.count("\naccepted ") >= 20, timeout=60)
        board_a.power_cut()
        board_a.start()
        out, _ = board_a.process.communicate(timeout=120)
        assert board_a.wait() == 0 and summary(out.decode())["total"] == 60, out.decode()[-2000:]
        time.sleep(0.3)  # the bridge's board thread takes in the last frames' counters (it accounts every 50 ms)
        bridge.process.send_signal(signal.SIGUSR1)
        until(lambda: "event=counters" in bridge.text(), "no counters on SIGUSR1")
        said = logged(bridge.text(), "counters")
        got = scrape(address)
        assert got['dmqtt_bridge_board_info{board="a",client_id="svc-a",path="' + str(board_a.serial_link) + '"}'] == 1
        for counter in ("frames_in", "connects", "board_restarts", "retransmissions"):
            name = METRIC_NAMES[counter][0]  # the log's key, the metric's name
            assert got[f'dmqtt_bridge_board_{name}_total{{board="a"}}'] == int(said[counter]), counter
        assert got['dmqtt_bridge_board_restarts_total{board="a"}'] >= 1  # the power cut: a new link epoch
        assert got['dmqtt_bridge_board_connects_total{board="a"}'] >= 2
        assert got["dmqtt_bridge_to_broker_bytes_total"] > 60 * 100  # 60 messages of 100 bytes, at least
        assert got["dmqtt_bridge_boards"] == 1 and health(address) == 200

        # SIGHUP: board b added; a's session goes on untouched. The counters' period changed too, applied at once;
        # nothing is left unapplied, in the line and in the metric.
        toml.write_text(
            toml.read_text().replace("stats_every = 0", "stats_every = 3600")
            + f'[[board]]\nname = "b"\nport = "{board_b.serial_link}"\n'
        )
        bridge.process.send_signal(signal.SIGHUP)
        until(lambda: "event=reloaded" in bridge.text(), "no reload on SIGHUP")
        reloaded = logged(bridge.text(), "reloaded")
        assert reloaded["started"] == "b" and reloaded["stopped"] == "-", reloaded
        assert reloaded["applied"] == "stats_every" and reloaded["not_applied"] == "-", reloaded
        assert not any(k.startswith("dmqtt_bridge_reload_not_applied") for k in scrape(address))
        board_b.start()
        until(lambda: sum(r.topic == "sensors/svc-b/telemetry" for r in subscriber.records) >= 5, "board b silent")
        assert scrape(address)["dmqtt_bridge_boards"] == 2

        # The broker away: /healthz fails past health_after, and comes back with it.
        broker.stop()
        until(lambda: health(address) == 503, "/healthz stayed healthy with the broker away")
        assert scrape(address)["dmqtt_bridge_broker_unreachable_seconds"] > 1
        broker.start()
        until(lambda: health(address) == 200, "/healthz did not recover with the broker", limit_s=60)
        until(lambda: "event=broker_back" in bridge.text(), "no broker_back")

        # SIGHUP with another broker: every board moves to it, and board b, publishing at QoS 1 all along, loses
        # nothing: what the first broker had not acknowledged goes to the second (the board's journal).
        other.start()
        moved = Subscriber(other.address, "svc-observer-2", "sensors/#")
        try:
            toml.write_text(toml.read_text().replace(f'broker = "{broker.address}"', f'broker = "{other.address}"'))
            bridge.process.send_signal(signal.SIGHUP)
            until(lambda: bridge.text().count("event=reloaded") >= 2, "no second reload")
            assert logged(bridge.text(), "reloaded")["applied"] == "broker"
            until(
                lambda: sum(r.topic == "sensors/svc-b/telemetry" for r in moved.records) >= 10, "b silent on broker 2"
            )
            # Observed on each broker (a persistent QoS 2 subscription there gets all it routed, the first one's
            # after its restart too, once its observer is back): every seq up to the last, in one or the other.

            def missing() -> list[int]:
                seqs = {d.seq for obs in (subscriber, moved) for d in obs.deliveries() if d.dev == "svc-b"}
                return sorted(set(range(max(seqs) + 1)) - seqs)

            until(lambda: not missing(), "board b lost messages across the move", limit_s=60)
            assert 'board=b event=disconnected reason="reload:' in bridge.text()
        finally:
            moved.close()
    finally:
        subscriber.close()
        board_a.close()
        board_b.close()
        notifications(systemd)  # (read as systemd reads them: a full queue drops the rest)
        code = bridge.stop()
        broker.stop()
        other.stop()  # (after the bridge: its boards would otherwise see a second outage)
        tail = notifications(systemd)
        systemd.close()
    log = bridge.text()
    assert code == 0, log[-3000:]
    assert log.count("event=broker_unreachable") == 1 and log.count("event=broker_back") == 1, log[-3000:]
    assert "signal=SIGHUP action=reload" in log and "signal=SIGTERM action=stop" in log
    # Board a's session ended only at exit: the reload did not touch it.
    assert log.index("board=a event=stopped") > log.index("signal=SIGTERM")
    assert "event=exit" in log and logged(log, "exit")["connects"] != "0"
    assert "STOPPING=1" in tail
