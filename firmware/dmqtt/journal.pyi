# The signatures of dmqtt/journal.py, for type checkers.
from typing import Any

from dmqtt.interfaces import Journal

def open_journal(
    label: str = "mqttlog", path: str | None = None, record_max: int = 1024, resume: tuple[int, int, int] | None = None
) -> Journal: ...
def replay_from(seq: Any, resume: tuple[int, int, int]) -> int: ...
