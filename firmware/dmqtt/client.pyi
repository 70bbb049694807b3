# The signatures of dmqtt/client.py, for type checkers: the client's whole public API.
from collections.abc import Callable
from typing import Any, Final

from dmqtt.interfaces import Bytes as _Bytes
from dmqtt.interfaces import Journal, OnConnect, OnDisconnect, OnMessage, OnPublished, Transport
from dmqtt.interfaces import Text as _Text
from dmqtt.session import Session

DISCONNECTED: Final[int]

def ticks_ms() -> int: ...
def sleep_flags(on: int, off: int) -> int: ...
def elapsed(since: int) -> int: ...

CONNECTING: Final[int]
CONNECTED: Final[int]

class Backoff:
    """Capped exponential backoff with jitter, for reconnecting."""

    base_ms: int
    cap_ms: int
    attempt: int
    retry_at: int | None
    def __init__(self, base_ms: int = 500, cap_ms: int = 30000) -> None: ...
    def next_ms(self) -> int: ...
    def due(self) -> int: ...
    def reset(self) -> None: ...

class MQTTClient:
    client_id: str
    version: int
    keepalive: int
    clean: bool
    session_expiry: int
    username: str | None
    password: _Bytes | None
    will: tuple[_Text, _Bytes, int, bool] | None
    session: Session
    max_packet: int
    group_commit: int
    broker_max_packet: int
    state: int
    on_connect: OnConnect | None
    on_disconnect: OnDisconnect | None
    on_message: OnMessage | None
    on_published: OnPublished | None
    connects: int
    reconnects: int
    connect_failures: int
    disconnects: int
    received: int
    published: int
    refused: int
    retain_cleared: int
    connected: bool
    mark: int
    window: int
    blocking: bool
    slept: Callable[[int, int], int] | None
    def __init__(
        self,
        client_id: str,
        store: Journal,
        version: int | str = ...,
        keepalive: int = 60,
        clean: bool = False,
        session_expiry: int = 3600,
        window: int | str = "auto",
        max_messages: int = 32,
        username: str | None = None,
        password: _Bytes | None = None,
        will: tuple[_Text, _Bytes, int, bool] | None = None,
        max_packet: int = 1024,
        group_commit: int = 0,
    ) -> None: ...
    def open(self) -> list[str]: ...
    def message_number(self) -> int: ...
    def outstanding(self) -> int: ...
    def connect(self, transport: Transport, timeout_ms: int = 10000) -> bool: ...
    def close(self) -> None: ...
    def disconnect(self) -> None: ...
    def publish(
        self,
        topic: _Text,
        payload: _Bytes | str,
        qos: int = 0,
        retain: bool = False,
        mark: int | None = None,
        timeout_ms: int = 0,
    ) -> int: ...
    def flush(self) -> None: ...
    def subscribe(self, topic: _Text, qos: int = 1, timeout_ms: int = 10000) -> int: ...
    def unsubscribe(self, topic: _Text, timeout_ms: int = 10000) -> None: ...
    def wait_idle(self, timeout_ms: int) -> bool: ...
    def settle(self, timeout_ms: int) -> int: ...
    def poll(self, timeout_ms: int = 0) -> None: ...
    # The engine as the asyncio face drives it (dmqtt.interfaces.Engine says what each is).
    tx_buf: bytearray
    tx_tail: int
    tx_end: int
    transport: Transport | None
    last_tx: int
    ping_at: int
    acks: dict[int, Any]
    def send_connect(self, transport: Transport) -> None: ...
    def take_connack(self) -> bool | None: ...
    def establish(self, present: bool) -> bool: ...
    def write_packet(self, n: int, packets: bool = False) -> None: ...
    def send_pending(self, block: bool) -> bool: ...
    def pump(self) -> None: ...
    def ping_if_due(self) -> None: ...
    def fail(self, reason: str, code: int | None) -> None: ...
