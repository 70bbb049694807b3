"""How the host reaches a broker: its address and, for TLS, the certificates (the bridge and the recorder both
connect to one)."""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from host_bridge.errors import HostBridgeError


class AddressError(HostBridgeError):
    """An address that is not host:port."""


@dataclass(frozen=True)
class Destination:
    host: str
    port: int

    @classmethod
    def parse(cls, text: str) -> Destination:
        host, _, port = text.strip().rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise AddressError(f"{text!r} is not host:port")
        return cls(host, int(port))

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class TLSConfig:
    cafile: str | None = None
    certfile: str | None = None
    keyfile: str | None = None

    def context(self) -> ssl.SSLContext:
        # Certificate verification and host name checking stay on: a bridge that relays sensor sessions to a
        # broker must know it is the broker.
        ctx = ssl.create_default_context(cafile=self.cafile)
        if self.certfile:
            ctx.load_cert_chain(self.certfile, self.keyfile)
        return ctx
