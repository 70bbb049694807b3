"""micropython-lib's drivers for the parts the virtual board models, unmodified, on one virtual board: `dht`
(DHT22 and DHT11 through esp.dht_readinto), `onewire` and `ds18x20` (three DS18B20s found by onewire's own ROM
search, through _onewire) and `neopixel` (a WS2812 strip through machine.bitstream).

    git clone https://github.com/micropython/micropython-lib   # on a machine that reaches GitHub
    python tools/lib_drivers.py micropython-lib

The four modules are copied as they are, beside a `main.py` of this project's that uses them as their docs show
(docs/virtual-board.md, "Parts on the pins"). Exit status 0 when every reading and the strip's colours are what the
bench wired. Not part of `make test`: micropython-lib is not on the package registries this project's machines
reach."""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from host_bridge.vboard.runner import VirtualBoard  # noqa: E402

DRIVERS = {
    "dht": "micropython/drivers/sensor/dht/dht.py",
    "onewire": "micropython/drivers/bus/onewire/onewire.py",
    "ds18x20": "micropython/drivers/sensor/ds18x20/ds18x20.py",
    "neopixel": "micropython/drivers/led/neopixel/neopixel.py",
}
THERMOMETERS = (21.5, 19.0, -0.5)
COLOURS = [(255, 0, 0), (0, 128, 0), (0, 0, 64)]

MAIN = f"""import time
import machine
import dht, onewire, ds18x20, neopixel
d = dht.DHT22(machine.Pin(4))
d.measure()
print("dht22", round(d.temperature(), 1), round(d.humidity(), 1))
d = dht.DHT11(machine.Pin(5))
d.measure()
print("dht11", d.temperature(), d.humidity())
ds = ds18x20.DS18X20(onewire.OneWire(machine.Pin(13)))
roms = ds.scan()
print("found", len(roms))
ds.convert_temp()
time.sleep_ms(750)
print("ds18b20", sorted(ds.read_temp(rom) for rom in roms))
strip = neopixel.NeoPixel(machine.Pin(2), {len(COLOURS)})
for i, colour in enumerate({COLOURS!r}):
    strip[i] = colour
strip.write()
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("lib", type=Path, help="a checkout of micropython/micropython-lib")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        app = Path(tmp) / "app"
        app.mkdir()
        for path in DRIVERS.values():
            source = args.lib / path
            if not source.exists():
                raise SystemExit(f"{source} is missing: give the path of a checkout of micropython-lib")
            shutil.copy(source, app)
        (app / "main.py").write_text(MAIN)
        board = VirtualBoard(Path(tmp) / "b.flash", app=app, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        board.drive(
            dht={4: {"model": "dht22", "temperature_c": -3.4, "humidity": 61.2},
                 5: {"model": "dht11", "temperature_c": 23, "humidity": 40}},
            onewire={13: [{"model": "ds18b20", "temperature_c": t} for t in THERMOMETERS]},
        )  # fmt: skip
        try:
            board.start()
            said = board.output(60)
            status = board.wait(10)
            strip = board.strip(2)
        finally:
            board.close()
    print(said + f"strip {strip}")
    expected = [
        "dht22 -3.4 61.2",
        "dht11 23 40",
        f"found {len(THERMOMETERS)}",
        f"ds18b20 {sorted(THERMOMETERS)}",
    ]
    missing = [line for line in expected if not re.search(rf"^{re.escape(line)}$", said, re.M)]
    ok = status == 0 and not missing and strip == COLOURS
    print(f"lib_drivers: {'as on a chip' if ok else 'NOT as on a chip: ' + ', '.join(missing or ['the strip'])}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
