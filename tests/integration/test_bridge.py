"""Virtual boards on emulated serial lines, through `host-bridge run`, to a real Mosquitto: every QoS, 16 boards
at once, a destination that is not allowed, start-up failures, TOML config, TLS. (Power cuts, a noisy line, a
killed bridge, a restarted broker and a pulled cable are scenarios of the HIL bench, in tests/hil.)"""

from __future__ import annotations

import json
import os
import select
import selectors
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from host_bridge.bridge.run_command import command as bridge_command
from host_bridge.broker.mosquitto import Mosquitto
from host_bridge.hil.subscriber import Subscriber
from host_bridge.processes import ManagedProcess
from host_bridge.vboard import LineFaults, VirtualBoard
from tests.conftest import REPO
from tests.integration.boards import check_promises, summary
from tests.integration.certificates import make_certificates

BAUD = 115200


class BridgeProcess(ManagedProcess):
    """`host-bridge run` as a user starts it, logging to a file; stopped (or killed) by its pid."""

    def __init__(self, workdir: Path, ports: dict[str, str], broker: str, *extra: str) -> None:
        args = bridge_command(broker, BAUD, ports, 1, *extra)
        super().__init__(args, workdir / f"bridge-{time.monotonic_ns()}.log", cwd=REPO)

    def stop(self, timeout: float = 15) -> int:
        return super().stop(timeout)


def serial_board(
    workdir: Path, client_id: str, qos: int, count: int, faults: LineFaults | None = None, **extra: Any
) -> VirtualBoard:
    workdir.mkdir(parents=True, exist_ok=True)
    publish = {"topic": "sensors/{client_id}/telemetry", "qos": qos, "count": count, "payload_bytes": 100}
    publish.update(extra.pop("publish", {}))
    config = {
        "client_id": client_id,
        "transport": "serial",
        "mqtt_version": "3.1.1",
        "uart": {"id": 1, "baud": BAUD},
        "publish": publish,
        **extra,
    }
    (workdir / "config.json").write_text(json.dumps(config))
    return VirtualBoard(
        flash=workdir / "board.flash",
        config=workdir / "config.json",
        faults=faults or LineFaults(baud=BAUD),
        serial_link=workdir / "ttyBOARD",
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        **extra.pop("board_kwargs", {}),
    )


def console_until(board: VirtualBoard, pattern: str, timeout: float = 30) -> str:
    """Start the board, read its console until `pattern` shows (or `timeout` passes), then cut its power; what
    it printed."""
    board.start()
    assert board.process is not None
    out = read_until(board.process, pattern, timeout)
    board.power_cut()
    return out + board.process.communicate()[0].decode(errors="replace")


def read_until(process: subprocess.Popen[bytes], marker: str, timeout: float = 30) -> str:
    """What `process` writes on its piped stdout until `marker` shows (or `timeout` passes)."""
    assert process.stdout is not None
    out = b""
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        sel.register(process.stdout, selectors.EVENT_READ)
        while marker.encode() not in out and time.monotonic() < deadline:
            if sel.select(max(0.0, deadline - time.monotonic())):
                chunk = os.read(process.stdout.fileno(), 4096)
                if not chunk:
                    break
                out += chunk
    return out.decode(errors="replace")


def run_board(board: VirtualBoard, timeout: float = 120) -> tuple[int, str]:
    board.start()
    assert board.process is not None
    out, _ = board.process.communicate(timeout=timeout)
    return board.wait(), out.decode(errors="replace")


def test_every_qos_through_one_bridge(tmp_path: Path, broker: Mosquitto) -> None:
    observer = Subscriber(broker.address, "bridge-observer-qos")
    boards = {f"ser-q{q}": serial_board(tmp_path / f"q{q}", f"ser-q{q}", q, 30) for q in (0, 1, 2)}
    bridge = BridgeProcess(tmp_path, {n: str(b.serial_link) for n, b in boards.items()}, broker.address)
    try:
        for board in boards.values():
            board.start()
        for _name, board in boards.items():
            assert board.process is not None
            out, _ = board.process.communicate(timeout=120)
            assert board.wait() == 0, out.decode()
            assert summary(out.decode())["total"] == 30
        for q in (0, 1, 2):
            check_promises(observer, f"ser-q{q}", q, 30)  # a clean line: even QoS 0 arrives
    finally:
        observer.close()
        for board in boards.values():
            board.close()
        assert bridge.stop() == 0
    log = bridge.text()
    assert "event=refused" not in log and log.count("event=connected") >= 3


def test_a_bridge_started_before_its_broker_says_so_once_and_relays_when_it_comes(tmp_path: Path) -> None:
    """Without --wait the bridge starts anyway: one line says what to check, the boards' sessions are retried
    quietly, and once the broker is there every QoS 1 message is acknowledged."""
    from host_bridge.broker.mosquitto import free_port

    port = free_port()
    board = serial_board(tmp_path / "b", "ser-early", 1, 10)
    bridge = BridgeProcess(tmp_path, {"early": str(board.serial_link)}, f"127.0.0.1:{port}")
    try:
        bridge.wait_for("event=broker_unreachable")
        board.start()
        assert board.process is not None
        with Mosquitto(tmp_path / "broker", persistence=True, port=port):
            # The board ends only when the broker has acknowledged every message, which it reaches through the
            # bridge alone.
            out, _ = board.process.communicate(timeout=120)
            assert board.wait() == 0, out.decode()
            assert summary(out.decode())["total"] == 10
    finally:
        board.close()
        bridge.stop()
    assert bridge.text().count("event=broker_unreachable") == 1, bridge.text()


def test_sixteen_boards_on_one_bridge(tmp_path: Path, broker: Mosquitto) -> None:
    observer = Subscriber(broker.address, "sixteen-observer")
    boards = {f"b{i:02d}": serial_board(tmp_path / f"b{i}", f"ser-16-{i:02d}", 1 + i % 2, 20) for i in range(16)}
    bridge = BridgeProcess(tmp_path, {n: str(b.serial_link) for n, b in boards.items()}, broker.address)
    try:
        for board in boards.values():
            board.start()
        for board in boards.values():
            assert board.process is not None
            out, _ = board.process.communicate(timeout=180)
            assert board.wait() == 0, out.decode()
        for i in range(16):
            check_promises(observer, f"ser-16-{i:02d}", 1 + i % 2, 20)
    finally:
        observer.close()
        for board in boards.values():
            board.close()
        bridge.stop()


def test_destination_not_allowed_is_refused(tmp_path: Path, broker: Mosquitto) -> None:
    forbidden = socket.socket()
    forbidden.bind(("127.0.0.1", 0))
    forbidden.listen(1)
    forbidden.settimeout(0.1)
    port = forbidden.getsockname()[1]
    board = serial_board(tmp_path / "b", "ser-evil", 1, 1, broker=f"127.0.0.1:{port}")
    bridge = BridgeProcess(tmp_path, {"evil": str(board.serial_link)}, broker.address)
    try:
        out = console_until(board, "not allowed")
    finally:
        board.close()
        bridge.stop()
    with pytest.raises(TimeoutError):
        forbidden.accept()  # nothing ever connected to the destination the board asked for
    forbidden.close()
    assert "refused" in out and "not allowed" in out, out
    assert f"event=refused destination=127.0.0.1:{port} reason=not_allowed" in bridge.text()


def run_bridge_once(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "host_bridge", "run", *args], capture_output=True, text=True, timeout=60, cwd=REPO
    )


def test_bridge_says_what_to_do_when_it_cannot_start(tmp_path: Path, broker: Mosquitto) -> None:
    import serial

    board = serial_board(tmp_path / "b", "ser-busy", 1, 1)
    try:
        assert board.serial_port is not None
        with serial.Serial(board.serial_port, exclusive=True):  # someone else has the port
            busy = run_bridge_once("--port", board.serial_port, "--broker", broker.address)
        assert busy.returncode == 2 and "is busy: another program has it open" in busy.stderr
        dead = run_bridge_once("--port", board.serial_port, "--broker", "127.0.0.1:1", "--wait", "0")
        assert dead.returncode == 2 and "broker 127.0.0.1:1 unreachable" in dead.stderr
        assert "is it running (host-bridge broker starts one)" in dead.stderr and "Traceback" not in dead.stderr
        empty = run_bridge_once("--broker", broker.address)
        assert empty.returncode == 2 and "no serial ports" in empty.stderr
    finally:
        board.close()


def test_toml_config_921600_baud_counters_on_sigusr1_and_no_secrets_in_logs(tmp_path: Path, broker: Mosquitto) -> None:
    observer = Subscriber(broker.address, "toml-observer")
    faults = LineFaults(baud=921600)
    board = serial_board(
        tmp_path / "b",
        "ser-fast",
        2,
        200,
        faults,
        uart={"id": 1, "baud": 921600},
        username="u",
        password="hunter2-secret",
    )
    (tmp_path / "bridge.toml").write_text(
        f'broker = "{broker.address}"\nbaud = 921600\n[[board]]\nname = "fast"\nport = "{board.serial_link}"\n'
    )
    bridge = subprocess.Popen(
        [sys.executable, "-m", "host_bridge", "run", "--config", str(tmp_path / "bridge.toml"), "--stats-every", "600"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=REPO,
    )
    try:
        code, out = run_board(board)
        assert code == 0, out
        check_promises(observer, "ser-fast", 2, 200)
        bridge.send_signal(signal.SIGUSR1)  # counters now, not in ten minutes
        early = read_until(bridge, "event=counters")
    finally:
        observer.close()
        board.close()
        bridge.send_signal(signal.SIGTERM)
    log = early + bridge.communicate(timeout=15)[0].decode()
    counters = [line for line in log.splitlines() if "event=counters" in line or "event=stopped" in line]
    assert len(counters) == 2 and "board=fast" in counters[0]  # SIGUSR1, then at exit once: the board's stopped
    assert all(" retransmissions=" in c and " timeouts=" in c for c in counters)  # the link's, as the board's summary
    assert "baud=921600" in log
    assert "hunter2-secret" not in log and '"reading"' not in log  # no credentials, no payloads


def test_tls_context_verifies_the_broker() -> None:
    import ssl

    from host_bridge.net import TLSConfig

    ctx = TLSConfig().context()
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname


def test_tls_to_the_broker_with_a_verified_certificate(tmp_path: Path) -> None:
    ca, cert, key = make_certificates(tmp_path)
    with Mosquitto(tmp_path / "tls-broker", tls=(cert, key)) as broker:
        board = serial_board(tmp_path / "b", "ser-tls", 1, 10)
        wrong_ca = tmp_path / "other"
        wrong_ca.mkdir()
        other_ca, _, _ = make_certificates(wrong_ca)
        good = BridgeProcess(tmp_path, {"tls": str(board.serial_link)}, broker.address, "--tls", "--cafile", str(ca))
        try:
            code, out = run_board(board)
            assert code == 0 and summary(out)["total"] == 10, out
        finally:
            good.stop()
        assert "event=connected destination=127.0.0.1" in good.text() and "tls=true" in good.text()
        # A broker whose certificate the CA does not sign: the bridge refuses to connect, the board is told.
        board2 = serial_board(tmp_path / "b2", "ser-tls2", 1, 1)
        bad = BridgeProcess(
            tmp_path, {"tls2": str(board2.serial_link)}, broker.address, "--tls", "--cafile", str(other_ca)
        )
        try:
            out2 = console_until(board2, "SSLCertVerificationError")
        finally:
            board2.close()
            board.close()
            bad.stop()
        assert "event=connect_failed" in bad.text() and "SSLCertVerificationError" in out2


class StallingProxy:
    """A TCP relay to the broker on loopback that can stop reading from the bridge (`stall()`), as a broker
    that stops taking data does; both directions flow again on `resume()`."""

    def __init__(self, target: str) -> None:
        import threading

        self.target = target
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(4)
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.reading = threading.Event()
        self.reading.set()
        self.closing = threading.Event()
        self.threads = [threading.Thread(target=self._accept, daemon=True)]
        self.threads[0].start()

    def _accept(self) -> None:
        import threading

        self.listener.settimeout(0.2)
        while not self.closing.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                continue
            host, port = self.target.rsplit(":", 1)
            upstream = socket.create_connection((host, int(port)))
            for src, dst, gated in ((client, upstream, True), (upstream, client, False)):
                t = threading.Thread(target=self._pipe, args=(src, dst, gated), daemon=True)
                t.start()
                self.threads.append(t)

    def _pipe(self, src: socket.socket, dst: socket.socket, gated: bool) -> None:
        # Each socket is used by both directions' threads: no socket timeout (a timed-out sendall would end
        # the relay), readiness by select() instead.
        while not self.closing.is_set():
            if gated and not self.reading.is_set():
                self.reading.wait(0.2)
                continue
            try:
                if not select.select([src], [], [], 0.2)[0]:
                    continue
                data = src.recv(4096)
            except OSError:
                break
            if not data:
                break
            try:
                dst.sendall(data)
            except OSError:
                break
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        self.closing.set()
        self.reading.set()
        self.listener.close()
        for t in self.threads:
            t.join(2)


def test_a_broker_that_stops_reading_for_ten_seconds(tmp_path: Path, broker: Mosquitto) -> None:
    """Mid-run the broker side stops reading for 10 s: the bridge keeps serving the board's link (no link
    reset, no MQTT reconnect), and when the broker reads again every QoS 2 message arrives exactly once."""
    observer = Subscriber(broker.address, "stall-observer")
    proxy = StallingProxy(broker.address)
    board = serial_board(tmp_path / "b", "ser-stall", 2, 300, publish={"interval_ms": 10, "payload_bytes": 400})
    bridge = BridgeProcess(tmp_path, {"stall": str(board.serial_link)}, proxy.address)
    try:
        board.start()
        observer.wait_for("ser-stall", 30, timeout=30)  # the flow is up before the stall
        proxy.reading.clear()
        stalled = time.monotonic()
        time.sleep(10)
        proxy.reading.set()
        assert board.process is not None
        out = board.process.communicate(timeout=120)[0].decode()
        assert board.wait() == 0, out
        result = summary(out)
        assert (result["total"], result["reconnects"], result["connect_failures"]) == (300, 0, 0), out
        check_promises(observer, "ser-stall", 2, 300)
        # The stall was felt end to end: nothing arrived for most of it, and the board's flow was held (the
        # run took the stall longer than its 3 s of messages).
        arrivals = sorted(r.arrived for r in observer.records)
        assert max(b - a for a, b in zip(arrivals, arrivals[1:], strict=False)) > 8, "no gap: the stall was not felt"
        assert result["ms"] > 10_000 and time.monotonic() - stalled > 10, result
    finally:
        observer.close()
        board.close()
        bridge.stop()
        proxy.close()
    log = bridge.text()
    assert "event=board_restarted" not in log and log.count("event=connected") == 1, log[-2000:]
