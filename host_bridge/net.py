"""How the host reaches a broker: its address and, for TLS, the certificates (the bridge and the recorder both
connect to one)."""

from __future__ import annotations

import argparse
import socket
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass

from host_bridge.errors import BrokerError, HostBridgeError


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


def add_wait_argument(parser: argparse.ArgumentParser) -> None:
    """`--wait S`, the same in every subcommand that needs a broker (see await_broker)."""
    parser.add_argument(
        "--wait",
        type=seconds,
        metavar="S",
        help="when the broker is unreachable at start: 0 fails at once (exit 2), S gives up after S seconds; "
        "without it the command starts anyway and retries quietly with backoff (it says once what to check)",
    )


def seconds(text: str) -> float:
    """An argparse type for a duration in seconds, 0 or more (--wait, --stats-every, --health-after)."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds (0 or more)")
    return value


def await_broker(broker: Destination, wait: float | None, say: Callable[[str], None], check: str) -> None:
    """Every subcommand that needs a broker starts with this probe (a TCP connection, nothing sent). When the
    broker does not answer, `wait` decides: 0 raises BrokerError at once; otherwise `say` is called once with
    what was tried and `check` (what to look at), then None returns (the caller's own connection retries quietly
    with backoff) and S probes again quietly with backoff, raising BrokerError after S seconds."""
    deadline = None if wait is None else time.monotonic() + wait
    delay = 0.25
    said = False
    while True:
        try:
            socket.create_connection((broker.host, broker.port), timeout=5).close()
            return
        except OSError as exc:
            error = exc.strerror or str(exc)
        text = f"broker {broker} unreachable ({error}): {check}"
        if wait == 0:
            raise BrokerError(f"{text} (--wait 0: not waiting)")
        if not said:
            said = True
            say(f"{text}; retrying quietly with backoff" if wait is None else f"{text}; waiting up to {wait:g} s")
        if deadline is None:
            return
        left = deadline - time.monotonic()
        if left <= 0:
            raise BrokerError(f"{text} (gave up after --wait {wait:g} s)")
        time.sleep(min(delay, left))
        delay = min(delay * 2, 5.0)
