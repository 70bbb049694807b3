"""The benchmarks' delay proxy (tools.delay_proxy): every byte arrives, in order, never before its delay,
in both directions; the end of a stream passes through after the data before it; the proxy counts what it
forwarded and how late."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from tools.delay_proxy import DelayProxy

ONE_WAY_MS = 20.0


@pytest.fixture
def echo() -> Iterator[str]:
    """A TCP echo server on 127.0.0.1 for one connection; closes its side when the client's side ends."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            while data := conn.recv(65536):
                conn.sendall(data)

    server = threading.Thread(target=serve)
    server.start()
    yield f"127.0.0.1:{listener.getsockname()[1]}"
    server.join(timeout=10)
    listener.close()
    assert not server.is_alive()


def receive(sock: socket.socket, count: int) -> bytes:
    got = bytearray()
    while len(got) < count:
        chunk = sock.recv(65536)
        assert chunk, f"stream ended after {len(got)} of {count} bytes"
        got += chunk
    return bytes(got)


def test_bytes_cross_in_order_after_the_delay_each_way_and_the_end_follows_them(echo: str) -> None:
    with DelayProxy(echo, ONE_WAY_MS) as proxy:
        host, port = proxy.address.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            start = time.monotonic()
            sock.sendall(b"ping")
            assert receive(sock, 4) == b"ping"
            assert (time.monotonic() - start) * 1000 >= 2 * ONE_WAY_MS  # never early: out and back

            chunks = [i.to_bytes(2, "big") * (1 + i % 7) for i in range(300)]  # many small writes
            for chunk in chunks:
                sock.sendall(chunk)
            expected = b"".join(chunks)
            assert receive(sock, len(expected)) == expected

            sock.sendall(b"last")
            sock.shutdown(socket.SHUT_WR)  # the end of the stream goes through after the bytes before it
            assert receive(sock, 4) == b"last"
            assert sock.recv(1) == b""
        forwarded, late_ms = proxy.lateness()
        assert forwarded >= 4 and late_ms >= 0.0  # ping, its echo, the small writes (some coalesced), the ends
        assert proxy.lateness() == (0, 0.0)  # reset by reading


def test_closing_with_a_connection_open_reports_no_error(echo: str, caplog: pytest.LogCaptureFixture) -> None:
    """A benchmark closes the proxy while its board is still connected: the connection is dropped, and nothing is
    logged as if it had failed (asyncio's server logged the cancelled handler with a traceback)."""
    with caplog.at_level("ERROR", logger="asyncio"), DelayProxy(echo, ONE_WAY_MS) as proxy:
        client = socket.create_connection(("127.0.0.1", proxy.port))
        client.sendall(b"x")
        assert receive(client, 1) == b"x"
    assert client.recv(10) == b""  # dropped, as a link going down
    client.close()
    assert not [r for r in caplog.records if r.name == "asyncio"], caplog.text
