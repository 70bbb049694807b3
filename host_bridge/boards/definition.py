"""Board definitions (boards/NAME/board.json) for real ESP32-family boards and the virtual board alike: one
owner, one schema check, one set of partition-table rules. The virtual board, `host-bridge flash`/`deploy` and
the HIL bench all load boards through here.

A malformed file is refused with the field named; a real board's partition table is checked against the rules
the ESP-IDF bootloader applies (ESP-IDF Programming Guide, "Partition Tables"): app partitions aligned to 64 KiB,
data partitions to 4 KiB, everything after the table at 0x8000 (so from 0x9000 on), no overlap, inside the flash.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

from host_bridge import assets
from host_bridge.errors import HostBridgeError
from host_bridge.schema import SchemaError, convert

BOARDS_DIR = assets.BOARDS
SECTOR = 4096
APP_ALIGN = 0x10000
TABLE_OFFSET = 0x8000
FIRST_PARTITION = 0x9000  # the 3 KiB table occupies 0x8000..0x8BFF; partitions start at the next 4 KiB
# ESP32_GENERIC's partition table's NVS: where a table that names none keeps it.
DEFAULT_NVS_OFFSET = FIRST_PARTITION
DEFAULT_NVS_SIZE = 0x6000


@dataclass(frozen=True)
class Chip:
    """What the board checks need to know of a chip. Pin facts from Espressif's datasheets (ESP32 series
    datasheet section "Pin Definitions", ESP32-S3/C3/C6 datasheets "Pin Overview"): GPIOs that do not exist,
    that the SPI flash (and PSRAM on modules that have it) or the USB pins take, and input-only pins."""

    name: str
    bootloader_offset: int  # where the second-stage bootloader, the start of a MicroPython image, goes
    image_chip_id: int  # the chip id in an ESP image's extended header (esptool's image format)
    gpios: frozenset[int]
    reserved: frozenset[int]  # SPI flash / PSRAM / USB D-, D+
    input_only: frozenset[int] = frozenset()


def _pins(*ranges: range) -> frozenset[int]:
    return frozenset(p for r in ranges for p in r)


CHIPS = {
    "esp32": Chip(
        "esp32",
        0x1000,
        0x0000,
        gpios=_pins(range(0, 20), range(21, 24), range(25, 28), range(32, 40)),
        reserved=_pins(range(6, 12)),
        input_only=_pins(range(34, 40)),
    ),
    "esp32s3": Chip(
        "esp32s3",
        0x0,
        0x0009,
        gpios=_pins(range(0, 22), range(26, 49)),
        reserved=_pins(range(19, 21), range(26, 33), range(33, 38)),  # USB 19/20; flash 26-32; octal PSRAM 33-37
    ),
    "esp32c3": Chip(
        "esp32c3",
        0x0,
        0x0005,
        gpios=_pins(range(0, 22)),
        reserved=_pins(range(12, 18), range(18, 20)),  # flash 12-17; USB 18/19
    ),
    "esp32c6": Chip(
        "esp32c6",
        0x0,
        0x000D,
        gpios=_pins(range(0, 31)),
        reserved=_pins(range(12, 14), range(24, 31)),  # USB 12/13; flash 24-30
    ),
}
VIRTUAL_CHIP = "virtual"


class BoardError(HostBridgeError):
    """A board definition is missing, malformed or inconsistent."""


Offset = Annotated[int, msgspec.Meta(ge=0)]


class PartitionFile(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """partitions[]: one entry of the ESP-IDF partition table (offsets and sizes in bytes)."""

    label: str
    type: Literal["app", "data"]
    subtype: str
    offset: Offset
    size: Annotated[int, msgspec.Meta(gt=0)]


class UartFile(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """uart: the UART of the serial link to the bridge (its pins are checked against the chip's)."""

    id: Annotated[int, msgspec.Meta(ge=0, le=2)]
    tx: Offset
    rx: Offset
    baud: Annotated[int, msgspec.Meta(gt=0)]


class BoardFile(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """boards/NAME/board.json, key by key (docs/partition-layout.md describes each)."""

    name: str
    chip: str  # one of CHIPS, or "virtual"
    flash_size: Annotated[int, msgspec.Meta(gt=0)]
    erase_block: Literal[4096] = 4096  # SECTOR: every chip here erases 4 KiB sectors; the journal is laid out on them
    partitions: Annotated[list[PartitionFile], msgspec.Meta(min_length=1)]
    heap: str = "110k"
    heap_without_wifi: str | None = None
    description: str = ""
    console: Literal["usb-uart", "usb-serial-jtag", "virtual"] | None = None
    mpy_arch: Literal["xtensawin", "rv32imc"] | None = None  # None: the virtual board runs portable bytecode
    uart: UartFile | None = None
    led: Offset | None = None
    micropython_board: str | None = None
    firmware_image: str | None = None


@dataclass(frozen=True)
class Partition:
    label: str
    type: str
    subtype: str
    offset: int
    size: int


@dataclass(frozen=True)
class LinkUart:
    """The UART that carries the serial link to the bridge (not the console)."""

    id: int
    tx: int
    rx: int
    baud: int


@dataclass(frozen=True)
class BoardDefinition:
    name: str
    chip: str
    flash_size: int
    heap: str  # MicroPython's heap with WiFi and one TLS connection started (what they leave it)
    partitions: tuple[Partition, ...]
    description: str = ""
    console: str = "virtual"
    mpy_arch: str | None = None
    uart: LinkUart | None = None
    led: int | None = None
    firmware_image: str | None = None
    path: Path | None = None
    heap_without_wifi: str | None = None  # a board that never starts WiFi (the serial link): its heap grows more
    micropython_board: str | None = None  # MicroPython's name for its image's board (ESP32_GENERIC, ...)

    @property
    def virtual(self) -> bool:
        return self.chip == VIRTUAL_CHIP

    @property
    def chip_info(self) -> Chip:
        if self.virtual:
            raise BoardError(f"board {self.name} is the virtual board: it has no ESP32 chip to flash")
        return CHIPS[self.chip]

    @property
    def port_survives_reset(self) -> bool:
        """A USB-UART bridge chip stays enumerated through a reset of the ESP32; the native USB-Serial/JTAG of
        the S3, C3 and C6 is part of the chip, so its port disappears at every reset and comes back."""
        return self.console != "usb-serial-jtag"

    @classmethod
    def load(cls, board: str | Path) -> BoardDefinition:
        """By name (a folder under boards/), by folder, or by the path of a board.json."""
        path = Path(board)
        if not path.suffix:
            path = (path if path.is_dir() else BOARDS_DIR / str(board)) / "board.json"
        try:
            raw = json.loads(path.read_text())
        except FileNotFoundError:
            known = ", ".join(available()) or "none"
            raise BoardError(f"no board definition at {path}: give a folder under boards/ ({known})") from None
        except json.JSONDecodeError as exc:
            raise BoardError(f"{path} is not valid JSON: {exc}") from None
        return cls.from_json(raw, path)

    @classmethod
    def from_json(cls, raw: Any, path: Path | None = None) -> BoardDefinition:
        """A board.json's contents, checked against its schema (BoardFile), then for what a schema cannot say
        (pins, partition alignment and overlaps)."""
        where = str(path) if path else "board definition"
        try:
            f = convert(where, raw, BoardFile)
        except SchemaError as exc:
            raise BoardError(str(exc)) from None
        if f.chip != VIRTUAL_CHIP and f.chip not in CHIPS:
            raise BoardError(f"{where}: chip {f.chip!r} is not one of {', '.join([*CHIPS, VIRTUAL_CHIP])}")
        if f.console is None and f.chip != VIRTUAL_CHIP:
            raise BoardError(f"{where}: console is required for a real chip (usb-uart or usb-serial-jtag)")
        definition = cls(
            name=f.name,
            chip=f.chip,
            flash_size=f.flash_size,
            heap=f.heap,
            heap_without_wifi=f.heap_without_wifi,
            micropython_board=f.micropython_board,
            partitions=tuple(Partition(p.label, p.type, p.subtype, p.offset, p.size) for p in f.partitions),
            description=f.description,
            console=f.console or "virtual",
            mpy_arch=f.mpy_arch,
            uart=LinkUart(f.uart.id, f.uart.tx, f.uart.rx, f.uart.baud) if f.uart else None,
            led=f.led,
            firmware_image=f.firmware_image,
            path=path,
        )
        definition.validate(where)
        return definition

    def validate(self, where: str | None = None) -> None:
        where = where or f"board {self.name}"
        if self.flash_size <= 0 or self.flash_size % SECTOR:
            raise BoardError(f"{where}: flash_size {self.flash_size} is not a positive multiple of {SECTOR}")
        end, previous = 0, "the start of flash"
        if not self.virtual:
            if self.mpy_arch is None:
                raise BoardError(f"{where}: mpy_arch is required for a real chip (xtensawin or rv32imc)")
            end, previous = FIRST_PARTITION, "the partition table at 0x8000"
            self._check_pins(where)
        labels = set()
        for part in sorted(self.partitions, key=lambda p: p.offset):
            if part.label in labels:
                raise BoardError(f"{where}: partition label {part.label!r} is used twice")
            labels.add(part.label)
            align = APP_ALIGN if part.type == "app" and not self.virtual else SECTOR
            if part.offset % align or part.size % SECTOR or part.size <= 0:
                raise BoardError(
                    f"{where}: partition {part.label} at 0x{part.offset:x} size 0x{part.size:x} is not aligned "
                    f"({part.type} partitions start on 0x{align:x}, sizes are multiples of 0x{SECTOR:x})"
                )
            if part.offset < end:
                raise BoardError(f"{where}: partition {part.label} at 0x{part.offset:x} overlaps {previous}")
            end, previous = part.offset + part.size, f"partition {part.label}"
        if end > self.flash_size:
            raise BoardError(f"{where}: partitions end at 0x{end:x}, past the {self.flash_size // 1024} KiB flash")
        if "vfs" not in labels:
            raise BoardError(f"{where}: no 'vfs' partition (MicroPython's filesystem)")

    def _check_pins(self, where: str) -> None:
        chip = CHIPS[self.chip]
        pins = {"led": self.led}
        if self.uart is not None:
            pins.update({"uart.tx": self.uart.tx, "uart.rx": self.uart.rx})
        for field, pin in pins.items():
            if pin is None:
                continue
            if pin not in chip.gpios:
                raise BoardError(f"{where}: {field} GPIO{pin} does not exist on the {chip.name}")
            if pin in chip.reserved:
                raise BoardError(
                    f"{where}: {field} GPIO{pin} is taken by the SPI flash, PSRAM or USB on the {chip.name}"
                )
            if pin in chip.input_only and field != "uart.rx":
                raise BoardError(f"{where}: {field} GPIO{pin} is input-only on the {chip.name}")

    def emulated(self) -> list[Partition]:
        """The data partitions the virtual board's flash file holds (not NVS, PHY data or the app)."""
        data = [p for p in self.partitions if p.type == "data" and p.subtype in ("fat", "undefined", "romfs")]
        if not data:
            raise BoardError(f"board {self.name} has no data partitions for the emulated flash")
        return data

    def nvs(self) -> Partition:
        """The board's NVS partition, where the chip's flash has it: its table's, else ESP32_GENERIC's default
        (0x9000, 24 KiB) where that is free, else 24 KiB after the last partition. The virtual board's flash file
        keeps it after the data partitions."""
        found = next((p for p in self.partitions if p.type == "data" and p.subtype == "nvs"), None)
        if found is not None:
            return found
        end = DEFAULT_NVS_OFFSET + DEFAULT_NVS_SIZE
        if any(p.offset < end and DEFAULT_NVS_OFFSET < p.offset + p.size for p in self.partitions):
            # (a virtual table, the sim's, whose data starts at 0: NVS after its last partition)
            return Partition("nvs", "data", "nvs", max(p.offset + p.size for p in self.partitions), DEFAULT_NVS_SIZE)
        return Partition("nvs", "data", "nvs", DEFAULT_NVS_OFFSET, DEFAULT_NVS_SIZE)

    def data_base(self) -> int:
        """Where the virtual board's flash file starts in the chip's flash: its first data partition's offset."""
        return min(p.offset for p in self.emulated())

    def data_partitions(self, flash_size: int) -> list[Partition]:
        """The partitions the virtual board's flash file holds. A real ESP32 table starts with the bootloader
        and app; the emulated file holds only the data partitions, rebased to start at 0."""
        data = self.emulated()
        base = self.data_base()
        rebased = [Partition(p.label, p.type, p.subtype, p.offset - base, p.size) for p in data]
        end = max(p.offset + p.size for p in rebased)
        if end > flash_size:
            raise BoardError(f"data partitions need {end} bytes of flash, the flash file has {flash_size}")
        return rebased


def available() -> list[str]:
    return sorted(p.parent.name for p in BOARDS_DIR.glob("*/board.json"))


def image_chip_id(image: bytes) -> int | None:
    """The chip id of an ESP application/bootloader image (esptool's image format: magic 0xE9 at byte 0, the
    2-byte little-endian chip id at byte 12 of the extended header); None when the bytes are not an image."""
    if len(image) < 16 or image[0] != 0xE9:
        return None
    return int.from_bytes(image[12:14], "little")
