# The signatures of dmqtt/journal.py, for type checkers.
from dmqtt.interfaces import Journal

def open_journal(label: str = "mqttlog", path: str | None = None, record_max: int = 1024) -> Journal: ...
