# ROMFS on the virtual board, as an ESP32 image built with MICROPY_VFS_ROM has it: `vfs.rom_ioctl`, through
# which `mpremote romfs query/deploy` finds and writes the "romfs" partition. Stock ESP32 images (1.29) have no
# ROMFS, so this is only switched on for board definitions that give the partition. The Unix port's vfs module
# cannot take a new attribute, so `import vfs` hands out a view of it that adds rom_ioctl. Kept out of
# firmware/: C in the image on a real board.

import builtins

import esp32
import vboard_state
import vfs

_SECTOR = 4096
_GET_NUMBER_OF_SEGMENTS = 1
_GET_SEGMENT = 2
_WRITE_PREPARE = 3
_WRITE = 4
_WRITE_COMPLETE = 5
_SEGMENT_BLOCK_SIZE = 6
_EINVAL = 22


def _partition():
    return esp32.Partition.find(esp32.Partition.TYPE_DATA, label="romfs")[0]


def rom_ioctl(op, *args):
    """The segment is the partition's bytes as the board mapped them at boot (vboot); writes go to the flash
    (erase, then program, with the emulation's rules and counters) and to those bytes."""
    image = vboard_state.rom_image
    if op == _GET_NUMBER_OF_SEGMENTS:
        return 1
    if args and args[0] != 0:
        return -_EINVAL
    if op == _GET_SEGMENT:
        return image
    if op == _SEGMENT_BLOCK_SIZE:
        return _SECTOR
    if op == _WRITE_PREPARE:
        offset, length = args[1], args[2]
        part = _partition()
        for block in range(offset // _SECTOR, (offset + length + _SECTOR - 1) // _SECTOR):
            part.ioctl(6, block)
            image[block * _SECTOR : (block + 1) * _SECTOR] = b"\xff" * _SECTOR
        return 4  # the smallest write
    if op == _WRITE:
        offset, data = args[1], args[2]
        _partition().writeblocks(offset // _SECTOR, data, offset % _SECTOR)
        image[offset : offset + len(data)] = data
        return 0
    if op == _WRITE_COMPLETE:
        return 0
    return -_EINVAL


class _Vfs:
    """The vfs module with rom_ioctl added."""

    rom_ioctl = staticmethod(rom_ioctl)

    def __getattr__(self, name):
        return getattr(vfs, name)


_view = _Vfs()
_import = builtins.__import__


def _hooked_import(name, *args):
    module = _import(name, *args)
    return _view if name == "vfs" else module


def enable():
    builtins.__import__ = _hooked_import
