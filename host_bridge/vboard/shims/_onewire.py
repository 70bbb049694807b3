# _onewire module shim for the virtual board: the ESP32 port's 1-Wire primitives (C there), which micropython-lib's
# onewire driver stands on, over the bus modelled in vparts.py (its DS18B20s, wired by the bench).
import vparts


def reset(pin):
    """True when a device answered the reset with its presence pulse."""
    return vparts.ow_reset(pin)


def readbit(pin):
    return vparts.ow_readbit(pin)


def readbyte(pin):
    return vparts.ow_readbyte(pin)


def writebit(pin, value):
    vparts.ow_writebit(pin, value)


def writebyte(pin, value):
    vparts.ow_writebyte(pin, value)


def crc8(data):
    return vparts.crc8(data)
