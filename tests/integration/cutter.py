"""A TCP proxy on 127.0.0.1 that cuts every connection through it on demand (cut()), as a WiFi access point that
drops its clients does: both sides see the connection end, the board reconnects. Threads, one pair per
connection; every socket it opened is closed by close()."""

from __future__ import annotations

import socket
import threading


class Cutter:
    def __init__(self, target: str) -> None:
        host, port = target.rsplit(":", 1)
        self.target = (host, int(port))
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        self.connections = 0
        self.cuts = 0
        self._stop = False
        self._acceptor = threading.Thread(target=self._accept, name="cutter", daemon=True)
        self._acceptor.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._stop:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open += [client, upstream]
                self.connections += 1
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            # An ended connection is no longer there to cut: a cut() that found only the sockets of a board that
            # had lost its power would count a drop that no board felt.
            with self._lock:
                self._open = [s for s in self._open if s is not src and s is not dst]

    def cut(self) -> int:
        """End every open connection; returns how many were open (0: none to cut, nothing counted)."""
        with self._lock:
            open_now, self._open = self._open, []
        for s in open_now:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
        if open_now:
            self.cuts += 1
        return len(open_now) // 2

    def close(self) -> None:
        self._stop = True
        self._server.close()
        self.cut()
        self._acceptor.join(2)
