"""A wiring file: the parts on a virtual board's pins and buses, by name, with their starting values
(docs/testing-your-firmware.md). JSON:

    {"parts": {
        "sensor": {"part": "dht22", "pin": 4, "temperature_c": 21.5, "humidity": 48},
        "button": {"part": "button", "pin": 0},
        "heater": {"part": "relay", "pin": 26},
        "screen": {"part": "ssd1306", "address": "0x3c"}}}

It is checked as the board's config is: a wrong pin, an unknown part or value, two parts on one pin or address
each get a WiringError that names the part and what to do. `drive()` turns it into VirtualBoard.drive()'s inputs;
`set()` changes a part's values (a temperature, a button pressed, a pot's voltage) on a running board."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from host_bridge.errors import VBoardError
from host_bridge.vboard.runner import PART_FAULTS, check_fault

# Each part: what it is to the board, and the values the bench may set on it.
PARTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "dht22": ("dht", ("temperature_c", "humidity", "fault", "fault_at")),
    "dht11": ("dht", ("temperature_c", "humidity", "fault", "fault_at")),
    "ds18b20": ("onewire", ("temperature_c", "rom", "fault", "fault_at")),
    "aht20": ("i2c", ("temperature_c", "humidity", "fault", "fault_at")),
    "aht10": ("i2c", ("temperature_c", "humidity", "fault", "fault_at")),
    "bme280": ("i2c", ("temperature_c", "pressure_hpa", "humidity", "fault", "fault_at")),
    "bmp280": ("i2c", ("temperature_c", "pressure_hpa", "fault", "fault_at")),
    "ssd1306": ("i2c", ("height", "fault", "fault_at")),
    "button": ("button", ("pressed", "active")),
    "potentiometer": ("adc", ("volts",)),
    "led": ("output", ()),
    "relay": ("output", ()),
    "ws2812": ("strip", ("pixels", "order")),
}
DEFAULT_ADDRESS = {"aht20": 0x38, "aht10": 0x38, "bme280": 0x76, "bmp280": 0x76, "ssd1306": 0x3C}
# An ESP32's GPIOs (ESP32 datasheet, "Pin Description"): 6 to 11 carry the SPI flash, 34 to 39 are inputs only, the
# ADC reads 32 to 39 (ADC1) and 0, 2, 4, 12 to 15 and 25 to 27 (ADC2, not while the WiFi is on).
GPIOS = frozenset((*range(0, 6), *range(12, 20), 21, 22, 23, 25, 26, 27, *range(32, 40)))
FLASH_PINS = frozenset(range(6, 12))
INPUT_ONLY = frozenset(range(34, 40))
ADC_PINS = frozenset((*range(32, 40), 0, 2, 4, 12, 13, 14, 15, 25, 26, 27))


class WiringError(VBoardError):
    """A wiring file that names a part, a pin or a value the virtual board does not have."""


@dataclass
class Part:
    name: str
    part: str
    pin: int | None = None
    address: int | None = None
    values: dict[str, Any] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        return PARTS[self.part][0]


@dataclass
class Wiring:
    parts: dict[str, Part]
    source: str = "the wiring"

    @classmethod
    def load(cls, path: Path) -> Wiring:
        try:
            raw = json.loads(path.read_text())
        except OSError as exc:
            raise WiringError(f"cannot read the wiring file {path}: {exc.strerror}") from None
        except ValueError as exc:
            raise WiringError(f"{path} is not JSON: {exc}") from None
        return cls.parse(raw, str(path))

    @classmethod
    def for_app(cls, app: Path, path: Path | None = None) -> Wiring:
        """The wiring of the application folder `app`: the file `path`, else its own wiring.json, else none."""
        if path is None and (app / "wiring.json").exists():
            path = app / "wiring.json"
        return cls.load(path) if path is not None else cls({}, "no wiring file")

    @classmethod
    def parse(cls, raw: Any, source: str = "the wiring") -> Wiring:
        if not isinstance(raw, dict) or not isinstance(raw.get("parts"), dict) or set(raw) - {"parts"}:
            raise WiringError(f'{source}: a wiring is {{"parts": {{"name": {{"part": ..., "pin": ...}}}}}}')
        parts = {name: _part(source, name, spec) for name, spec in raw["parts"].items()}
        wiring = cls(parts, source)
        wiring._check_sharing()
        return wiring

    def _check_sharing(self) -> None:
        pins: dict[int, Part] = {}
        addresses: dict[int, Part] = {}
        for part in self.parts.values():
            if part.pin is not None:
                other = pins.get(part.pin)
                if other is not None and not (other.part == part.part == "ds18b20"):
                    raise WiringError(
                        f"{self.source}: {part.name} and {other.name} are both on pin {part.pin} (only DS18B20s "
                        "share a pin, their 1-Wire bus): move one"
                    )
                pins[part.pin] = part
            if part.address is not None:
                other = addresses.get(part.address)
                if other is not None:
                    raise WiringError(
                        f"{self.source}: {part.name} and {other.name} both answer at I2C 0x{part.address:02x}: "
                        'give one another "address"'
                    )
                addresses[part.address] = part

    def part(self, name: str) -> Part:
        found = self.parts.get(name)
        if found is None:
            raise WiringError(f"{self.source} has no part {name!r} (its parts: {', '.join(self.parts) or 'none'})")
        return found

    def set(self, name: str, **values: Any) -> Part:
        """Change a part's values (checked as the file's are); the part, for drive()."""
        part = self.part(name)
        merged = {**part.values, **values}
        updated = _part(self.source, name, {"part": part.part, "pin": part.pin, "address": part.address, **merged})
        self.parts[name] = updated
        return updated

    def drive(self) -> dict[str, Any]:
        """VirtualBoard.drive()'s inputs for every part: the sensors' values, the buttons' levels, the pots'
        voltages."""
        pins: dict[int, int | None] = {}
        adc: dict[int, int | None] = {}
        i2c: dict[int, dict[str, Any] | None] = {}
        onewire: dict[int, list[dict[str, Any]] | None] = {}
        dht: dict[int, dict[str, Any] | None] = {}
        for part in self.parts.values():
            values = dict(part.values)
            if part.kind == "dht":
                assert part.pin is not None
                dht[part.pin] = {"model": part.part, **values}
            elif part.kind == "onewire":
                assert part.pin is not None
                bus = onewire.setdefault(part.pin, [])
                assert bus is not None
                bus.append({"model": part.part, **values})
            elif part.kind == "i2c":
                assert part.address is not None
                i2c[part.address] = {"model": part.part, **values}
            elif part.kind == "button":
                assert part.pin is not None
                active = 1 if values.get("active", "low") == "high" else 0
                pins[part.pin] = active if values.get("pressed") else None  # released: the pin's pull decides
            elif part.kind == "adc":
                assert part.pin is not None
                adc[part.pin] = round(float(values.get("volts", 0.0)) * 1_000_000)
        return {"pins": pins, "adc": adc, "i2c": i2c, "onewire": onewire, "dht": dht}


def _part(source: str, name: str, spec: Any) -> Part:
    where = f"{source}: part {name!r}"
    if not isinstance(spec, dict) or "part" not in spec:
        raise WiringError(f'{where}: give it {{"part": one of {", ".join(PARTS)}, and its pin or address}}')
    kind_name = spec["part"]
    if kind_name not in PARTS:
        raise WiringError(f"{where}: no part {kind_name!r} on the virtual board (parts: {', '.join(PARTS)})")
    kind, allowed = PARTS[kind_name]
    values = {k: v for k, v in spec.items() if k not in ("part", "pin", "address") and v is not None}
    unknown = sorted(set(values) - set(allowed))
    if unknown:
        can = ", ".join(allowed) or "none"
        raise WiringError(f"{where}: a {kind_name} has no value {', '.join(unknown)} (its values: {can})")
    if kind in PART_FAULTS:
        try:
            check_fault(where, kind, values)
        except VBoardError as exc:
            raise WiringError(str(exc)) from None
    pin = spec.get("pin")
    address = spec.get("address")
    if kind == "i2c":
        if pin is not None:
            raise WiringError(f'{where}: a {kind_name} is on the I2C bus: give it an "address", not a pin')
        address = _address(where, address if address is not None else DEFAULT_ADDRESS[kind_name])
        return Part(name, kind_name, None, address, values)
    if address is not None:
        raise WiringError(f'{where}: a {kind_name} is on a pin: give it a "pin", not an address')
    if not isinstance(pin, int) or isinstance(pin, bool):
        raise WiringError(f'{where}: a {kind_name} needs a "pin" (a GPIO number)')
    if pin in FLASH_PINS:
        raise WiringError(f"{where}: GPIO {pin} carries the ESP32's SPI flash (6 to 11): use another pin")
    if pin not in GPIOS:
        raise WiringError(f"{where}: an ESP32 has no GPIO {pin} (0 to 5, 12 to 19, 21 to 23, 25 to 27, 32 to 39)")
    if kind in ("output", "strip", "onewire", "dht") and pin in INPUT_ONLY:
        raise WiringError(f"{where}: GPIO {pin} is an input only (34 to 39): a {kind_name} needs one that drives")
    if kind == "adc" and pin not in ADC_PINS:
        raise WiringError(f"{where}: GPIO {pin} has no ADC: use 32 to 39 (ADC1), which read while WiFi is on")
    return Part(name, kind_name, pin, None, values)


def _address(where: str, value: Any) -> int:
    try:
        address = int(value, 0) if isinstance(value, str) else int(value)
    except (TypeError, ValueError):
        address = -1
    if not 0x08 <= address <= 0x77:
        raise WiringError(f'{where}: an I2C address is 0x08 to 0x77 ("0x3c" or 60), not {value!r}')
    return address
