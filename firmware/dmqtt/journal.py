# The flash journal of in-flight MQTT state: the records that let a board resume its QoS 1/2 flows after a reset
# or a power cut. Two backends with one interface, both specified byte for byte in docs/journal.md, each in a
# module of its own so that a board loads only the one it uses:
#
# - RingJournal (journal_ring.py): a log-structured ring on a raw flash partition, programming only a record's
#   own bytes and erasing a sector only when the ring comes round to it.
# - FileJournal (journal_file.py): an append-only file on LittleFS for boards whose partition table has no
#   journal partition. Compacted by writing a new file and renaming it over the old one (atomic on LittleFS).
#
# Interface: open(owner); body (memoryview to fill); commit(rtype, n) -> address; read(addr) -> the body's length,
# its type in record_type and its body at the start of record.


def open_journal(label="mqttlog", path=None, record_max=1024, resume=None):
    """The ring on the partition labelled `label` when the partition table has one, else the file fallback
    (default path: mqtt.journal at the filesystem root, /flash on the virtual board, / on an ESP32). `resume`:
    where the last wake left the ring (board_open.resume(), from the hint in RTC memory), for the ring's open to
    replay from there when the flash bears it out (replay_from)."""
    try:
        import esp32

        parts = esp32.Partition.find(esp32.Partition.TYPE_DATA, label=label)
    except (ImportError, AttributeError):
        parts = []
    if parts:
        from dmqtt.journal_ring import RingJournal

        ring = RingJournal(parts[0], record_max)
        if resume is not None:

            def start(seq):
                return replay_from(seq, resume)

            ring.resume = start
        return ring
    if path is None:
        import os

        try:
            os.stat("/flash")
            path = "/flash/mqtt.journal"
        except OSError:
            path = "/mqtt.journal"
    from dmqtt.journal_file import FileJournal

    return FileJournal(path, record_max)


def replay_from(seq, resume):
    """The sequence number below the first sector a sending wake's open replays (RingJournal.resume). `seq`: the
    sectors' sequence numbers, by sector; `resume`: where the last wake left the ring (board_open.resume()). The
    oldest live sector's less one when the flash bears that out: its head is the youngest sector, with its
    sequence number, and a sector with the oldest live one's number is still in the ring. Else 0: every sector."""
    head, head_seq, first = resume
    if 0 <= head < len(seq) and seq[head] == head_seq == max(seq):
        for number in seq:
            if number == first:
                return first - 1
    return 0
