# esp32 module shim for the virtual board: Partition backed by the emulated NOR flash. Only what the firmware
# uses: find/info and the extended block interface (readblocks/writeblocks with an offset, ioctl erase).

import time

import vboard_state

_SECTOR = 4096
_TYPES = {"app": 0, "data": 1}
_SUBTYPES = {"factory": 0, "nvs": 2, "phy": 1, "fat": 0x81, "undefined": 0x06, "romfs": 0x8F}


class Partition:
    BOOT = 0
    RUNNING = 1
    TYPE_APP = 0
    TYPE_DATA = 1

    def __init__(self, index):
        if not isinstance(index, int) or index < 2:
            raise ValueError("the virtual board has no app partitions")
        self._index = index - 2
        label, ptype, subtype, offset, size = vboard_state.flash().partitions[self._index]
        self._label = label
        self._type = _TYPES[ptype]
        self._subtype = _SUBTYPES.get(subtype, 0xFF)
        self._offset = offset
        self._size = size

    @staticmethod
    def find(type=TYPE_APP, subtype=0xFF, label=None):
        found = []
        for i, (plabel, ptype, psub, _offset, _size) in enumerate(vboard_state.flash().partitions):
            if _TYPES[ptype] != type:
                continue
            if subtype != 0xFF and _SUBTYPES.get(psub, 0xFF) != subtype:
                continue
            if label is not None and plabel != label:
                continue
            found.append(Partition(i + 2))
        return found

    def info(self):
        return (self._type, self._subtype, self._offset, self._size, self._label, False)

    # Each operation's own time is counted (vboard_state.emulated_us): Python here, the flash driver's C and the chip's
    # SPI on a board, so that the firmware's time can be told apart from the emulation's (tools/bench_energy.py).
    def readblocks(self, block, buf, offset=0):
        begun = time.ticks_us()
        vboard_state.flash().read(self._index, self._addr(block, offset, len(buf)), buf)
        vboard_state.emulated_us += time.ticks_diff(time.ticks_us(), begun)

    def writeblocks(self, block, buf, offset=None):
        begun = time.ticks_us()
        flash = vboard_state.flash()
        if offset is None:
            # The simple block interface erases before writing whole blocks, as esp32.Partition does.
            for i in range((len(buf) + _SECTOR - 1) // _SECTOR):
                flash.erase(self._index, self._addr(block + i, 0, _SECTOR))
            offset = 0
        flash.program(self._index, self._addr(block, offset, len(buf)), buf)
        vboard_state.emulated_us += time.ticks_diff(time.ticks_us(), begun)

    def ioctl(self, op, arg):
        if op == 4:  # block count
            return self._size // _SECTOR
        if op == 5:  # block size
            return _SECTOR
        if op == 6:  # erase one block
            begun = time.ticks_us()
            vboard_state.flash().erase(self._index, self._addr(arg, 0, _SECTOR))
            vboard_state.emulated_us += time.ticks_diff(time.ticks_us(), begun)
            return 0
        return 0  # init, deinit, sync: nothing to do on NOR flash

    def _addr(self, block, offset, length):
        start = block * _SECTOR + offset
        if start < 0 or start + length > self._size:
            raise OSError(22)
        return self._offset + start
