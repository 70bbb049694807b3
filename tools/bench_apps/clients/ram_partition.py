# The esp32.Partition block interface over a bytearray, for the benchmarks' "dmqtt-ram" journal and the profile:
# reads, programs and erases cost RAM copies only, so what is measured is the client, not the flash emulator.
_ERASED = b"\xff" * 4096


class RamPartition:
    """The esp32.Partition block interface over a bytearray: reads, programs and erases cost RAM copies only."""

    def __init__(self, sectors):
        self.buf = bytearray(sectors * 4096)
        self.view = memoryview(self.buf)  # reads copy out of a view: no copy of the record on the heap
        for sector in range(sectors):
            self.ioctl(6, sector)

    def readblocks(self, block, buf, off=0):
        start = block * 4096 + off
        buf[:] = self.view[start : start + len(buf)]

    def writeblocks(self, block, buf, off=0):
        start = block * 4096 + off
        self.buf[start : start + len(buf)] = buf

    def ioctl(self, op, arg):
        if op == 4:
            return len(self.buf) // 4096
        if op == 5:
            return 4096
        if op == 6:
            start = arg * 4096
            self.buf[start : start + 4096] = _ERASED
        return 0
