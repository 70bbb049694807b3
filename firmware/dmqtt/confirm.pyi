# The signatures of dmqtt/confirm.py, for type checkers: end-to-end confirmation (docs/confirmation.md).
from collections.abc import Callable
from typing import Any

from dmqtt.client import MQTTClient
from dmqtt.interfaces import Bytes as _Bytes
from dmqtt.interfaces import Journal
from dmqtt.session import Session

class ConfirmingSession(Session):
    def resent_props(self, body: _Bytes) -> dict[int, list[tuple[str, str]]] | None: ...
    timeout_ms: int
    hold: bool
    floor: int
    resent: int
    dropped: int
    late: int
    on_late: Callable[[int], None] | None
    current_epoch: int
    def __init__(self, store: Journal, version: int, window: int, max_messages: int, rx_max: int) -> None: ...
    def unconfirmed(self) -> int: ...
    def stats(self) -> dict[str, int]: ...
    def take(self, data: _Bytes) -> None: ...
    def tend(self) -> None: ...

class ConfirmingClient(MQTTClient):
    session: ConfirmingSession
    confirm_topic: str
    def __init__(
        self,
        client_id: str,
        store: Journal,
        confirm_topic: str,
        epoch: int,
        timeout_s: int = 30,
        hold: bool = False,
        **options: Any,
    ) -> None: ...
    def unconfirmed(self) -> int: ...
