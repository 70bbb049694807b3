# esp module shim for the virtual board: what the ESP32 port's esp module gives firmware that asks about its chip.
# flash_size() is the board definition's (VBOARD_FLASH_SIZE); flash_read/flash_write/flash_erase reach the
# emulated flash only inside its data partitions and NVS (the file holds no bootloader or app: OSError elsewhere).
# Kept out of firmware/: C in the image on a real board.

import vboard_state

LOG_NONE = 0
LOG_ERROR = 1
LOG_WARNING = 2
LOG_INFO = 3
LOG_DEBUG = 4
LOG_VERBOSE = 5

_SECTOR = 4096
_EIO = 5


def osdebug(uart, level=LOG_ERROR):
    """ESP-IDF's log output on the UART: there is none to silence or raise on the virtual board."""


def flash_size():
    return int(vboard_state.env("VBOARD_FLASH_SIZE", "4194304"))


def flash_user_start():
    """Where the filesystem's partition starts: the first data partition (the emulated file's offset 0)."""
    return int(vboard_state.env("VBOARD_FLASH_BASE", "0"))


def _where(offset, length):
    """The (partition index, address in the file) of a chip offset, from the board's own table: the data
    partitions lie in the file as in the chip from flash_user_start() on; NVS lies after them in the file, at
    VBOARD_NVS_AT in the chip."""
    base = flash_user_start()
    nvs_at = int(vboard_state.env("VBOARD_NVS_AT", "-1"))
    for i, (_label, _type, subtype, start, size) in enumerate(vboard_state.flash().partitions):
        chip = nvs_at if subtype == "nvs" else base + start
        if chip <= offset and offset + length <= chip + size:
            return i, start + offset - chip
    raise OSError(_EIO)


def flash_read(offset, buf):
    part, addr = _where(offset, len(buf))
    vboard_state.flash().read(part, addr, buf)


def flash_write(offset, buf):
    part, addr = _where(offset, len(buf))
    vboard_state.flash().program(part, addr, buf)


def flash_erase(sector):
    part, addr = _where(sector * _SECTOR, _SECTOR)
    vboard_state.flash().erase(part, addr)


def dht_readinto(pin, buf):
    """A DHT11's or DHT22's 40 bits into buf (5 bytes), as the port's C reads them off the pin; OSError(ETIMEDOUT)
    when no sensor answers. The model: vparts.py."""
    import vparts

    vparts.dht_readinto(pin, buf)
