"""The interop matrix (host_bridge/campaigns/interop.py): the board's client against every broker this machine can
install, at QoS 0, 1 and 2 over MQTT 3.1.1 and 5.0, each through a power cut mid-flow. Writes bench/brokers.json
and the table of docs/brokers.md from it.

    make broker-peers                          # amqtt and Aedes into build/brokers; RabbitMQ, ejabberd from Debian
    python tools/broker_matrix.py              # every broker (about 6 minutes)
    python tools/broker_matrix.py --only amqtt --count 6 --no-write

Exit status 0 when every broker started and every cell ran; the cells' outcomes are the table's, not the status."""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from host_bridge.broker.peers import PEERS  # noqa: E402
from host_bridge.campaigns.interop import render_table, run_matrix, save  # noqa: E402
from host_bridge.errors import HostBridgeError  # noqa: E402

RESULTS = REPO / "bench" / "brokers.json"
DOC = REPO / "docs" / "brokers.md"
BEGIN = "<!-- matrix: rendered from bench/brokers.json by tools/broker_matrix.py -->"
END = "<!-- /matrix -->"


def write_doc(table: str) -> None:
    text = DOC.read_text()
    pattern = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
    if not pattern.search(text):
        raise SystemExit(f"{DOC}: no {BEGIN} ... {END} section to write the table into")
    DOC.write_text(pattern.sub(lambda _: f"{BEGIN}\n{table}{END}", text))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", choices=sorted(PEERS), help="this broker only (repeatable)")
    parser.add_argument("--count", type=int, default=12, help="messages per cell (default 12)")
    parser.add_argument("--no-write", action="store_true", help="print the table; leave bench/ and docs/ alone")
    args = parser.parse_args()
    names = args.only or list(PEERS)
    with tempfile.TemporaryDirectory(prefix="broker-matrix-") as work:
        try:
            cells = run_matrix(names, Path(work), count=args.count)
        except HostBridgeError as exc:
            print(f"broker_matrix: {exc}", file=sys.stderr)
            return 1
    table = render_table(cells)
    print(table)
    if not args.no_write:
        save(cells, RESULTS, args.count)
        write_doc(table)
        print(f"wrote {RESULTS.relative_to(REPO)} and the table of {DOC.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
