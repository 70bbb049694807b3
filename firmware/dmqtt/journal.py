# The flash journal of in-flight MQTT state: the records that let a board resume its QoS 1/2 flows after a reset
# or a power cut. Two backends with one interface, both specified byte for byte in docs/journal.md, each in a
# module of its own so that a board loads only the one it uses:
#
# - RingJournal (journal_ring.py): a log-structured ring on a raw flash partition, programming only a record's
#   own bytes and erasing a sector only when the ring comes round to it.
# - FileJournal (journal_file.py): an append-only file on LittleFS for boards whose partition table has no
#   journal partition. Compacted by writing a new file and renaming it over the old one (atomic on LittleFS).
#
# Interface: open(owner); body (memoryview to fill); commit(rtype, n) -> address; read(addr) -> (rtype, body).


def open_journal(label="mqttlog", path=None, record_max=1024):
    """The ring on the partition labelled `label` when the partition table has one, else the file fallback
    (default path: mqtt.journal at the filesystem root, /flash on the virtual board, / on an ESP32)."""
    try:
        import esp32

        parts = esp32.Partition.find(esp32.Partition.TYPE_DATA, label=label)
    except (ImportError, AttributeError):
        parts = []
    if parts:
        from dmqtt.journal_ring import RingJournal

        return RingJournal(parts[0], record_max)
    if path is None:
        import os

        try:
            os.stat("/flash")
            path = "/flash/mqtt.journal"
        except OSError:
            path = "/mqtt.journal"
    from dmqtt.journal_file import FileJournal

    return FileJournal(path, record_max)
