"""The virtual ESP32 board (MicroPython Unix port, emulated NOR flash, pty UART)."""

from host_bridge.boards import BoardDefinition
from host_bridge.vboard.runner import (
    POWER_CUT_EXIT_STATUS,
    LineFaults,
    VirtualBoard,
    read_stats,
)

__all__ = ["POWER_CUT_EXIT_STATUS", "BoardDefinition", "LineFaults", "VirtualBoard", "read_stats"]
