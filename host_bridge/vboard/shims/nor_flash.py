# Emulated NOR flash for the virtual board (MicroPython side). A test double of the ESP32's SPI flash, kept
# out of firmware/.
#
# Semantics of real NOR flash that the firmware must respect:
# - erase works on whole 4096-byte sectors and sets every bit to 1 (0xFF);
# - programming can only clear bits: the cell ends as old AND new. Programming a byte that is not erased to a
#   different value corrupts it silently on a real chip; here the damage is done the same way and then
#   reported (stderr, a counter, OSError EIO) so a test sees it;
# - a power cut in the middle of an operation leaves it half done: a program, an arbitrary subset of the bits it
#   was clearing; an erase, part of the sector.
#
# Counters per partition (blocks read, bytes programmed, program operations, blocks erased, program
# violations) are written to a side file after every operation (once each), so they survive a SIGKILL; the
# runner turns them into JSON.

import os
import struct
import sys
import time

# The link's UART, when flash timing models what a flash operation does to it: machine.UART sets it. (Here, not in
# vboard_state: that module makes the flash and imports this one when it does; this one imports it back only inside
# the call that needs it, so neither import runs while the other module loads.)
uart = None

SECTOR = 4096
_PAGE = 256
_COUNTERS = 5
_FMT = "<5I"

# Opt-in timing of a real SPI NOR chip (VBOARD_FLASH_TIMING=1): a program or erase takes as long as the chip
# needs, so rates measured on the virtual board include real flash time. Espressif's module datasheets do not
# give the flash chip's timing; these are the typical values of the Winbond W25Q32JV (32 Mbit, fitted to ESP32
# boards), from its datasheet's AC characteristics: first byte of a page program 30 us (tBP1), each further byte
# 2.5 us (tBP2), a whole 256-byte page 0.4 ms (tPP), a 4 KB sector erase 45 ms (tSE). Maxima are 3 ms and 400 ms.
_T_FIRST_BYTE_US = 30
_T_NEXT_BYTE_US = 2.5
_T_PAGE_US = 400
_T_SECTOR_ERASE_US = 45000


class NorFlash:
    def __init__(self, path, stats_path, partitions, cut_at_op=0, rng=None, fail=None, timing=False):
        self._file = open(path, "r+b")
        self._file.seek(0, 2)
        self.size = self._file.tell()
        self._stats_file = open(stats_path, "r+b") if _exists(stats_path) else open(stats_path, "w+b")
        self._stats = bytearray(len(partitions) * _COUNTERS * 4)
        self._stats_file.seek(0)
        got = self._stats_file.readinto(self._stats) or 0
        self._stats[got:] = bytes(len(self._stats) - got)  # partitions the file has not counted yet (NVS) at 0
        self.partitions = partitions  # list of (label, type, subtype, offset, size)
        self._ops = 0  # program and erase operations since this boot, for cut_at_op
        self._erases = 0  # erase operations since this boot, for a cut_at_op below 0 (the -Nth erase)
        self.journal_events = False  # vboard_state.event("journal") after each program of the journal's partition
        self._paused = False  # a deploy by the host (vboot's install of the firmware): no cut, no fault, no count
        self._cut_at_op = cut_at_op
        # A flash fault, (partition label, n): from the nth program/erase on that partition on, every one fails.
        self._fail_part = -1
        self._fail_at = 0
        self._part_ops = 0
        if fail:
            label, self._fail_at = fail
            for i, entry in enumerate(partitions):
                if entry[0] == label:
                    self._fail_part = i
        self._rng = rng
        self._timing = timing
        self._scratch = bytearray(SECTOR)
        # A view, so that a half-done erase writes a prefix without copying it: the emulation is C on a real
        # board and must not take the firmware's heap (a 3 KB slice here ran a serial board out of memory).
        self._ff = memoryview(b"\xff" * SECTOR)

    def host_write(self, paused):
        """While the host deploys files (as `host-bridge deploy` would before the board runs), flash operations
        neither count towards cut_at_op or an injected fault nor can be cut: the cut and fault options are about
        the board's own writes. The wear counters still count them."""
        self._paused = paused

    def _bump(self, part, counter, amount):
        """Count in RAM; _save() writes the counters out, once per operation."""
        base = (part * _COUNTERS + counter) * 4
        value = struct.unpack_from("<I", self._stats, base)[0] + amount
        struct.pack_into("<I", self._stats, base, value & 0xFFFFFFFF)

    def _save(self):
        self._stats_file.seek(0)
        self._stats_file.write(self._stats)

    def read(self, part, addr, buf):
        n = len(buf)
        self._check(addr, n)
        self._file.seek(addr)
        self._file.readinto(buf)
        blocks = (addr + n - 1) // SECTOR - addr // SECTOR + 1 if n else 0
        self._bump(part, 0, blocks)
        self._save()

    def program(self, part, addr, data):
        begun = time.ticks_us()  # the chip's time runs from the command; the emulator's own work is inside it
        n = len(data)
        self._check(addr, n)
        if not self._paused:
            self._ops += 1
            self._fault(part, "program", addr)
        old = memoryview(self._scratch)[:n] if n <= SECTOR else bytearray(n)
        self._file.seek(addr)
        self._file.readinto(old)
        bad = -1
        if old == self._ff[:n]:
            old[:] = data  # erased cells take the data as it is: the common case, without a loop per byte
        else:
            for i in range(n):
                value = data[i]
                if old[i] & value != value:
                    if bad < 0:
                        bad = i
                old[i] &= value  # what a real cell keeps: bits only go 1 -> 0
        if self._ops == self._cut_at_op and not self._paused:
            torn = self._torn(addr, old)
            self._write(addr, torn)
            self._bump(part, 1, n)
            self._save()
            power_cut(
                "program of %d bytes at 0x%x (partition %s, first byte 0x%02x) torn: an arbitrary subset of its bits"
                " cleared" % (len(data), addr, self.partitions[part][0], data[0] if n else 0)
            )
        self._write(addr, old)
        self._bump(part, 1, n)
        self._bump(part, 2, 1)
        if bad >= 0:
            self._bump(part, 4, 1)
        self._save()
        if self._timing:
            _stall(program_us(addr, n), begun)
        if self.journal_events and not self._paused and self.partitions[part][0] == "mqttlog":
            import vboard_state  # (only when asked for: vboard_state makes this flash)

            vboard_state.event("journal")
        if bad >= 0:
            sys.stderr.write("flash: program over non-erased byte at 0x%x\n" % (addr + bad))
            raise OSError(5)  # EIO: the data on flash is now corrupt, as on a real chip

    def _torn(self, addr, target):
        """What a program cut short leaves: each bit it was clearing cleared or not, at random (the cells of a
        page are programmed in parallel, not byte after byte)."""
        torn = bytearray(len(target))
        self._file.seek(addr)
        self._file.readinto(torn)
        for i in range(len(torn)):
            clearing = torn[i] & ~target[i]
            torn[i] &= ~(clearing & self._rng.getrandbits(8)) & 0xFF
        return torn

    def erase(self, part, addr):
        begun = time.ticks_us()
        if addr % SECTOR:
            raise OSError(22)
        self._check(addr, SECTOR)
        if not self._paused:
            self._ops += 1
            self._erases += 1
            self._fault(part, "erase", addr)
        if (self._ops == self._cut_at_op or self._erases == -self._cut_at_op) and not self._paused:
            done = self._rng.randrange(SECTOR)
            self._write(addr, self._ff[:done])
            power_cut("erase of sector 0x%x (partition %s), %d bytes done" % (addr, self.partitions[part][0], done))
        self._write(addr, self._ff)
        self._bump(part, 3, 1)
        self._save()
        if self._timing:
            _stall(_T_SECTOR_ERASE_US, begun)

    def _fault(self, part, what, addr):
        if part != self._fail_part:
            return
        self._part_ops += 1
        if self._part_ops >= self._fail_at:
            sys.stderr.write("flash: injected fault: %s at 0x%x fails\n" % (what, addr))
            raise OSError(5)  # EIO, as the ESP-IDF flash driver reports a failed operation

    def _write(self, addr, data):
        self._file.seek(addr)
        self._file.write(data)

    def _check(self, addr, n):
        if addr < 0 or addr + n > self.size:
            raise OSError(22)


def program_us(addr, n):
    """A program of n bytes at addr: one page program per 256-byte page touched, each by its byte count."""
    total = 0
    while n > 0:
        chunk = min(n, _PAGE - addr % _PAGE)
        total += min(_T_PAGE_US, _T_FIRST_BYTE_US + (chunk - 1) * _T_NEXT_BYTE_US)
        addr += chunk
        n -= chunk
    return int(total)


def _stall(us, begun):
    """The chip busy for `us` microseconds from `begun`, when the operation was issued: the emulator's own work
    (its file I/O and counters) happens inside the chip's time, as the chip's own does, rather than on top of it.
    The UART, modelled as an ESP32's then, takes no more than its FIFO. (Modules imported at the top: an import
    statement run in a function costs the virtual board's import hook a quarter of a millisecond, which was
    counted as flash time.)"""
    global model_us
    model_us += us
    if uart is not None:
        uart.stall(us, begun)
    else:
        busy_us(us, begun)


# Microseconds of flash time by the model since boot: what a chip's CPU would have waited for its flash, whatever
# the host did meanwhile (tools/bench_stalls.py counts it per publish() call).
model_us = 0
# Microseconds the waits below ran past their end since boot: the host took the core from the spin just before
# its end (another process's turn), or the emulator's own work outlasted the model's time. A chip spends neither;
# tools/bench_stalls.py takes them out of publish().
overshoot_us = 0


def busy_us(us, begun):
    """Wait until `us` microseconds after `begun` as the chip does, its CPU held while the flash works: sleep for
    all but the last millisecond, then spin on the clock. sleep_us alone overshoots on a host (by about 70 us a
    call here: a sleep_us(357) took 430 us), which would count as flash time a chip never spends."""
    global overshoot_us
    end = time.ticks_add(begun, us)
    left = time.ticks_diff(end, time.ticks_us())
    if left > 1500:
        time.sleep_us(left - 1000)
    while time.ticks_diff(end, time.ticks_us()) > 0:
        pass
    overshoot_us += time.ticks_diff(time.ticks_us(), end)


def power_cut(what):
    # A power cut is SIGKILL of the whole board process: nothing after this line runs, no file is closed, no
    # finally block runs. The Unix port has no kill(), so a shell does it to its parent, which is this process.
    sys.stderr.write("vboard: power cut during %s\n" % what)
    os.system("kill -9 $PPID")
    while True:  # never return into the half-done operation
        pass


def _exists(path):
    try:
        os.stat(path)
        return True
    except OSError:
        return False
