"""`host-bridge package`: the client library as mip packages of .mpy files, for applications of their own.

The library's modules are listed once, in firmware/dmqtt/package.json and firmware/dlink/package.json (mip's
format, with the .py sources: what `mpremote mip install github:OWNER/REPO/firmware/dmqtt/package.json` installs).
A module installed as source is compiled on the board at import, which takes more heap than a stock ESP32 has
to spare; this command compiles every module with mpy-cross and writes a package.json per package that points
at the .mpy files, to install from the folder or from any web server:

    host-bridge package --out build/mip
    mpremote mip install build/mip/dmqtt/package.json        # every board
    mpremote mip install build/mip/dlink/package.json        # boards on a serial line to a host bridge
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path

from host_bridge import assets
from host_bridge.boards.firmware_build import LIBRARY_PACKAGES, compile_sources


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out", type=Path, default=Path("build/mip"), help="folder for the packages (default: %(default)s)"
    )


def build(out: Path, firmware: Path = assets.FIRMWARE) -> list[Path]:
    """Compile each library package into out/<package>/ (its .mpy files and a package.json naming them, with the
    source package's version and dependencies); returns the package.json files written. The folder is replaced
    whole, so nothing of an older build stays beside it."""
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".mip-", dir=out.parent))
    written = []
    try:
        for package in LIBRARY_PACKAGES:
            spec = json.loads((firmware / package / "package.json").read_text())
            # Each target (dmqtt/client.py) compiled to work/dmqtt/client.mpy, the .mpy package's own layout.
            compile_sources([(firmware / package / url, Path(target)) for target, url in spec["urls"]], work)
            compiled = {key: value for key, value in spec.items() if key != "urls"}
            compiled["urls"] = [
                [str(Path(target).with_suffix(".mpy")), Path(url).with_suffix(".mpy").name]
                for target, url in spec["urls"]
            ]
            (work / package / "package.json").write_text(json.dumps(compiled, indent=2) + "\n")
            written.append(out / package / "package.json")
        if out.exists():
            shutil.rmtree(out)
        work.rename(out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return written


def run(args: argparse.Namespace) -> int:
    for path in build(args.out):
        print(f"{path.parent.name}: {len(json.loads(path.read_text())['urls'])} modules in {path.parent}")
    print(f"install with: mpremote mip install {args.out}/dmqtt/package.json (and {args.out}/dlink/package.json for")
    print("a board on a serial line), or serve the folder over HTTP and give mip the package.json's URL")
    return 0
