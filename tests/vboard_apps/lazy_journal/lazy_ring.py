# The planted bug of tests/hil/test_witness.py: a ring journal whose publish() returns before the message's
# record is programmed. PUB records wait in RAM (the ring's group-commit stage) and reach flash only with the
# next record of another kind (an acknowledgement's); the session reads a waiting record back from RAM, so
# resends work and nothing crashes. A power cut loses the waiting records, which publish() reported accepted,
# and their progress mark with them: the run republishes their readings under the next boot, so its total
# still comes out right. Only a witness of what publish() returned can tell.

from dmqtt import journal_record as rec
from dmqtt.journal_ring import RingJournal

_STAGE = 512  # the ring's stage (dmqtt/journal_ring.py)
_SECTOR = 4096


class LazyRing(RingJournal):
    def sync(self):
        pass  # publish()'s durability point, skipped

    def commit(self, rtype, n, defer=False):
        total = n + rec.OVERHEAD
        if rtype == rec.PUB:
            if self._staged + total > _STAGE or self._offset + self._staged + total > _SECTOR:
                RingJournal.sync(self)
            return RingJournal.commit(self, rtype, n, True)
        RingJournal.sync(self)  # the waiting PUB records go to flash only now, with this record
        return RingJournal.commit(self, rtype, n, defer)

    def read(self, addr):
        start = self._head * _SECTOR + self._offset
        if self._staged and start <= addr < start + self._staged:
            mv = self._stage_mv
            off = addr - start
            n = (mv[off + 1] << 8) | mv[off + 2]
            return mv[off], mv[off + 3 : off + 3 + n]
        return RingJournal.read(self, addr)


def open_lazy(label="mqttlog", path=None, record_max=1024):
    import esp32

    return LazyRing(esp32.Partition.find(esp32.Partition.TYPE_DATA, label=label)[0], record_max)
