"""A TCP proxy on 127.0.0.1 that adds a fixed delay to every byte in each direction: a round trip of 2 x delay
between a client and a broker, as a WiFi link to a distant broker has, with no bandwidth limit and no loss.
Bytes keep their order; each chunk leaves `delay` seconds after it arrived. Both of its sockets set
TCP_NODELAY, so the proxy adds no coalescing of its own.

Used by the benchmarks (`make bench`): what a window buys is only visible with a round trip to wait for."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections import deque
from types import TracebackType

from host_bridge.errors import HostBridgeError

_WRITE_BACKLOG = 1 << 20  # bytes queued towards one side before the proxy stops reading the other


class DelayProxy:
    def __init__(self, target: str, one_way_ms: float) -> None:
        host, port = target.rsplit(":", 1)
        self.target = (host, int(port))
        self.delay = one_way_ms / 1000.0
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="delay-proxy", daemon=True)
        self._server: asyncio.base_events.Server | None = None
        # What the proxy itself adds past `delay` (its event loop's lateness, both directions): the bench states
        # a round trip's real length with it.
        self.chunks = 0
        self.late_s = 0.0

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def lateness(self) -> tuple[int, float]:
        """(chunks forwarded, their mean lateness in ms) since the last call; resets both."""
        chunks, late_s = self.chunks, self.late_s
        self.chunks, self.late_s = 0, 0.0
        return chunks, late_s * 1000 / chunks if chunks else 0.0

    def __enter__(self) -> DelayProxy:
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(self._listen(), self._loop)
        try:
            future.result(timeout=10)
        except OSError as exc:
            self.close()
            raise HostBridgeError(f"the delay proxy cannot listen on 127.0.0.1: {exc}") from None
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(timeout=10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
        self._loop.close()

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            broker_r, broker_w = await asyncio.open_connection(*self.target)
        except OSError:
            client_w.close()
            return
        for writer in (client_w, broker_w):
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            await asyncio.gather(self._pipe(client_r, broker_w), self._pipe(broker_r, client_w), return_exceptions=True)
        except asyncio.CancelledError:
            # The proxy is closing. Ended cancelled, the handler would be logged by asyncio's server with a
            # traceback (its done-callback asks the task for its exception), as if it had failed.
            pass
        finally:  # both directions ended, or the proxy is closing: drop both sides, as a link going down would
            client_w.close()
            broker_w.close()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """reader -> writer, each chunk `delay` after it arrived, and every chunk due at once in one write. One
        timer per direction rather than a task woken per chunk: the bench's 10 ms runs (3,000 chunks/s on two
        cores shared with the board and the broker) saw chunks 0.48 ms late on average that way, 0.39 ms this
        way; the rest is waiting for a core, which lateness() reports."""
        loop = asyncio.get_running_loop()
        pending: deque[tuple[float, bytes]] = deque()  # (due, chunk); an empty chunk is the end of the stream
        timer: asyncio.TimerHandle | None = None
        ended = asyncio.Event()

        def release() -> None:
            nonlocal timer
            timer = None
            now = loop.time()
            due: list[bytes] = []
            while pending and pending[0][0] <= now:
                when, chunk = pending.popleft()
                due.append(chunk)
                self.chunks += 1
                self.late_s += now - when
            if writer.is_closing():
                ended.set()
                return
            writer.write(b"".join(due))  # every chunk that is due, in one write
            if due and not due[-1]:  # the end of this direction's stream: pass it on, keep the other direction
                if writer.can_write_eof():
                    writer.write_eof()
                ended.set()
            elif pending:
                timer = loop.call_at(pending[0][0], release)

        try:
            while True:
                data = await reader.read(65536)
                pending.append((loop.time() + self.delay, data))
                if timer is None:
                    timer = loop.call_at(pending[0][0], release)
                if not data:
                    await ended.wait()
                    return
                if writer.transport.get_write_buffer_size() > _WRITE_BACKLOG:
                    await writer.drain()  # the far side stopped reading: stop reading this side too
        except (ConnectionError, asyncio.CancelledError):
            if timer is not None:
                timer.cancel()
            writer.close()
