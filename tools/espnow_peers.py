"""Someone else's ESP-NOW code, unmodified, on two virtual boards over one air: glenn20's micropython-espnow-utils
(https://github.com/glenn20/micropython-espnow-utils, by the author of MicroPython's espnow module), whose
`wifi.py` resets the WLAN interfaces, `espnow_scan.py` finds a peer's channel by pinging it on every channel, and
`echo.py` echoes each message back to its sender.

    git clone https://github.com/glenn20/micropython-espnow-utils   # on a machine that reaches GitHub
    python tools/espnow_peers.py micropython-espnow-utils

Board A (24:d7:eb:00:00:01) resets its WiFi on channel 6 and runs `echo.server()`; board B resets its WiFi on
channel 1, scans for A with `espnow_scan.scan()`, sends five messages and reads their echoes, then `!done`. The
two `main.py` files are this project's harness (docs/virtual-board.md, "ESP-NOW"); the three modules are copied
as they are. Exit status 0 when B found A on channel 6 and every echo came back. Not part of `make test`: the
repository is not on the package registries this project's machines reach."""

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

from host_bridge.vboard.air import Air  # noqa: E402
from host_bridge.vboard.runner import VirtualBoard  # noqa: E402

SERVER_MAC = "24d7eb000001"
CLIENT_MAC = "24d7eb000002"
CHANNEL = 6
MESSAGES = 5

SERVER_MAIN = f"""import wifi
wifi.reset(channel={CHANNEL})
wifi.status()
import echo
echo.enow.active(True)  # (echo.py leaves ESP-NOW inactive: its user turns it on)
echo.enow.config(timeout_ms=3000)
for _ in range(40):
    echo.server()  # returns after an echo the scanning peer missed (it moved on), "!done", or 3 s of quiet
"""

CLIENT_MAIN = f"""import espnow
import wifi
import espnow_scan
wifi.reset()
peer = bytes.fromhex("{SERVER_MAC}")
print("found on channel", espnow_scan.scan(peer, verbose=True))
e = espnow.ESPNow()
while e.irecv(0)[0] is not None:
    pass  # the echoes of the scan's pings
for i in range({MESSAGES}):
    sent = e.send(peer, b"hello %d" % i)
    host, msg = e.recv(1000)
    print("sent", sent, "echo", msg)
print("done", e.send(peer, b"!done"))
"""


def app(folder: Path, utils: Path, modules: tuple[str, ...], main: str) -> Path:
    folder.mkdir()
    for name in modules:
        source = utils / "src" / f"{name}.py"
        if not source.exists():
            raise SystemExit(f"{source} is missing: give the path of a checkout of micropython-espnow-utils")
        shutil.copy(source, folder)
    (folder / "main.py").write_text(main)
    return folder


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("utils", type=Path, help="a checkout of glenn20/micropython-espnow-utils")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        server_app = app(work / "a", args.utils, ("wifi", "echo"), SERVER_MAIN)
        client_app = app(work / "b", args.utils, ("wifi", "espnow_scan"), CLIENT_MAIN)
        air = Air()
        common = {"air": air, "stdout": subprocess.PIPE, "stderr": subprocess.STDOUT}
        server = VirtualBoard(work / "a.flash", app=server_app, uid=SERVER_MAC, **common)  # type: ignore[arg-type]
        client = VirtualBoard(work / "b.flash", app=client_app, uid=CLIENT_MAC, **common)  # type: ignore[arg-type]
        try:
            server.start()
            client.start()
            said = client.output(120)
            server.power_cut()
            heard = server.output(10)
        finally:
            server.close()
            client.close()
            air.close()
    print("--- board B (scan and echo client)\n" + said + "--- board A (echo server)\n" + heard)
    found = re.search(r"^found on channel (\d+)$", said, re.M)
    echoes = re.findall(r"^sent True echo b'hello (\d+)'$", said, re.M)
    ok = found is not None and int(found.group(1)) == CHANNEL and len(echoes) == MESSAGES
    print(f"espnow_peers: channel found {found.group(1) if found else 'none'}, echoes {len(echoes)} of {MESSAGES}: "
          f"{'as on a chip' if ok else 'NOT as on a chip'}")  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
