"""ESP32 partition tables in the binary form the bootloader reads at 0x8000, built from a board definition.

Format (ESP-IDF's, documented in its partition-table guide): 32-byte entries, each magic 0xAA 0x50, type,
subtype, offset (u32 LE), size (u32 LE), a 16-byte NUL-padded label, flags (u32 LE); then an MD5 entry (0xEB 0xEB,
14 bytes of 0xFF, the MD5 of all preceding entries); the rest of the 3 KiB table is 0xFF.
"""

from __future__ import annotations

import hashlib
import struct

from host_bridge.boards.definition import BoardDefinition, Partition
from host_bridge.errors import HostBridgeError

TABLE_OFFSET = 0x8000
TABLE_SIZE = 0xC00
_ENTRY = struct.Struct("<2sBBII16sI")
_MAGIC = b"\xaa\x50"
_MD5_MAGIC = b"\xeb\xeb" + b"\xff" * 14
TYPES = {"app": 0x00, "data": 0x01}
SUBTYPES = {
    "app": {"factory": 0x00, "ota_0": 0x10, "ota_1": 0x11, "test": 0x20},
    "data": {
        "ota": 0x00,
        "phy": 0x01,
        "nvs": 0x02,
        "coredump": 0x03,
        "undefined": 0x06,
        "fat": 0x81,
        "littlefs": 0x83,
        "romfs": 0x8F,  # MicroPython 1.25+ images built with ROMFS: read-only, memory-mapped code
    },
}


class PartitionTableError(HostBridgeError):
    """The board's partition table cannot be built or read."""


def build(board: BoardDefinition) -> bytes:
    out = bytearray()
    for part in board.partitions:
        try:
            ptype = TYPES[part.type]
            subtype = SUBTYPES[part.type][part.subtype]
        except KeyError:
            raise PartitionTableError(
                f"partition {part.label}: unknown type/subtype {part.type}/{part.subtype}"
            ) from None
        label = part.label.encode()
        if len(label) > 16:
            raise PartitionTableError(f"partition label {part.label!r} is longer than 16 bytes")
        if part.offset < TABLE_OFFSET + 0x1000:
            raise PartitionTableError(f"partition {part.label} overlaps the bootloader or the partition table")
        out += _ENTRY.pack(_MAGIC, ptype, subtype, part.offset, part.size, label, 0)
    out += _MD5_MAGIC + hashlib.md5(out).digest()
    if len(out) > TABLE_SIZE:
        raise PartitionTableError("too many partitions for one table")
    return bytes(out) + b"\xff" * (TABLE_SIZE - len(out))


def parse(table: bytes) -> list[Partition]:
    """Read a binary table back (and check its MD5), e.g. one read off a board with esptool read-flash."""
    parts: list[Partition] = []
    names = {v: k for k, v in TYPES.items()}
    for pos in range(0, len(table), _ENTRY.size):
        chunk = table[pos : pos + _ENTRY.size]
        if chunk[:16] == _MD5_MAGIC:
            if hashlib.md5(table[:pos]).digest() != chunk[16:]:
                raise PartitionTableError("partition table MD5 does not match its entries")
            return parts
        magic, ptype, subtype, offset, size, label, _flags = _ENTRY.unpack(chunk)
        if magic != _MAGIC:
            raise PartitionTableError(f"no partition entry at 0x{pos:x}")
        kind = names.get(ptype, f"0x{ptype:02x}")
        sub = {v: k for k, v in SUBTYPES.get(kind, {}).items()}.get(subtype, f"0x{subtype:02x}")
        parts.append(Partition(label.rstrip(b"\0").decode(), kind, sub, offset, size))
    raise PartitionTableError("partition table has no MD5 entry")
