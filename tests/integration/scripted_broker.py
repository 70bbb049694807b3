"""A scripted MQTT broker for wire-level tests: a TCP listener on 127.0.0.1 that the test drives packet by
packet, keeping every packet's raw bytes so the test can check them byte for byte."""

from __future__ import annotations

import socket
import time

from dmqtt import codec_host as codec


class Connection:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.version = codec.V311
        self._buf = b""

    def _read(self, n: int, deadline: float) -> bytes:
        while len(self._buf) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the board sent nothing more")
            self.sock.settimeout(left)
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("the board closed the connection")
            self._buf += chunk
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def recv(self, timeout: float = 10.0) -> tuple[bytes, codec.Packet]:
        """The next packet: its raw bytes and its decoded form."""
        deadline = time.monotonic() + timeout
        raw = self._read(1, deadline)
        length = 0
        for shift in (0, 7, 14, 21):
            byte = self._read(1, deadline)
            raw += byte
            length |= (byte[0] & 0x7F) << shift
            if not byte[0] & 0x80:
                break
        body = self._read(length, deadline)
        raw += body
        return raw, codec.decode(raw[0] >> 4, raw[0] & 0x0F, body, self.version)

    def recv_type(self, ptype: int, timeout: float = 10.0) -> tuple[bytes, codec.Packet]:
        raw, packet = self.recv(timeout)
        assert packet.type == ptype, f"expected {codec.NAMES[ptype]}, got {packet!r} ({raw.hex()})"
        return raw, packet

    def nothing_for(self, seconds: float) -> bool:
        """True when the board sends nothing for that long."""
        try:
            self.recv(seconds)
        except TimeoutError:
            return True
        return False

    def expect_connect(self) -> codec.Packet:
        raw, packet = self.recv_type(codec.CONNECT)
        self.version = packet.version
        return packet

    def connack(self, session_present: bool, code: int = 0, props: dict[int, object] | None = None) -> None:
        self.send(codec.encode_connack(session_present, code, self.version, props))

    def ack(self, ptype: int, pid: int, reason: int = 0, props: dict[int, object] | None = None) -> None:
        self.send(codec.encode_ack(ptype, pid, reason, self.version, props))

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def close(self) -> None:
        """Close at once. With bytes of the board's still unread here, the kernel answers with a reset, and the
        board may lose what it had not read yet (a PUBACK among them): use hang_up() when that matters."""
        self.sock.close()

    def hang_up(self, timeout: float = 10.0) -> None:
        """Close gracefully: FIN after everything sent, then read (and drop) what the board sends until it closes
        its side, so that every packet sent reaches it before the end of the connection."""
        self.sock.shutdown(socket.SHUT_WR)
        self.sock.settimeout(timeout)
        try:
            while self.sock.recv(4096):
                pass
        except OSError:
            pass  # a board that resets its side: the end all the same
        self.sock.close()


class ScriptedBroker:
    def __init__(self, port: int = 0) -> None:
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", port))
        self.listener.listen(4)
        self.port: int = self.listener.getsockname()[1]

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def accept(self, timeout: float = 15.0) -> Connection:
        """The next client that says something: a connection closed before its first byte is a reachability
        probe (the host tools' await_broker, a load balancer's health check), not a client, and is skipped."""
        deadline = time.monotonic() + timeout
        while True:
            self.listener.settimeout(max(0.01, deadline - time.monotonic()))
            sock, _ = self.listener.accept()
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                first = sock.recv(1, socket.MSG_PEEK)
            except TimeoutError:
                first = b"?"  # silent so far: a client that has yet to write is still a client
            if first:
                sock.settimeout(None)
                return Connection(sock)
            sock.close()

    def close(self) -> None:
        self.listener.close()
