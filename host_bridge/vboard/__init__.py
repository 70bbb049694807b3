"""The virtual ESP32 board (MicroPython Unix port, emulated NOR flash, pty UART)."""

from host_bridge.boards.definition import BoardDefinition
from host_bridge.vboard.flash_image import read_stats
from host_bridge.vboard.runner import POWER_CUT_EXIT_STATUS, VirtualBoard
from host_bridge.vboard.serial_line import LineFaults

__all__ = ["POWER_CUT_EXIT_STATUS", "BoardDefinition", "LineFaults", "VirtualBoard", "read_stats"]
