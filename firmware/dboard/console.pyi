# The signatures of dboard/console.py (the board application's console protocol: docs/console-protocol.md).
from typing import Final

BOOT: Final[str]
ACCEPTED: Final[str]
CONNECTED: Final[str]
CONNECT_FAILED: Final[str]
CONNECTION_LOST: Final[str]
PUBLISH_REFUSED: Final[str]
PUBLISH_NACKED: Final[str]
QUEUE_FULL: Final[str]
MESSAGE: Final[str]
HEAP: Final[str]
CONFIG_ERROR: Final[str]
JOURNAL_ERROR: Final[str]
UNCONFIRMED: Final[str]
WIFI_JOINED: Final[str]
WIFI_DOWN: Final[str]
WIFI_UP: Final[str]
SLEEP: Final[str]
SUMMARY_KEYS: Final[tuple[str, ...]]

def payload(dev: str, boot: int, seq: int, size: int, t: int, value: int | float | None = None) -> bytes: ...
