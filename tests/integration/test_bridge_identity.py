"""Boards known by who they are: two virtual boards swapped between the ports a bridge config names for them (a
USB renumbering, a cable moved, a pseudo-terminal reused). With `identify = true` each port's name is the client id
its board must say in its CONNECT: both boards are refused (event=wrong_board, dmqtt_bridge_board_wrong, /healthz
degraded), and nothing of either reaches the broker, under any name. The config put right and reloaded, each board
delivers from its journal every message it accepted meanwhile, under its own name."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

from host_bridge.broker.mosquitto import Mosquitto
from host_bridge.hil.subscriber import Subscriber
from host_bridge.processes import ManagedProcess
from tests.conftest import REPO
from tests.integration.boards import check_promises, summary
from tests.integration.test_bridge import serial_board
from tests.integration.test_bridge_service import health, logged, scrape, until

COUNT = 20


def bridge_toml(broker: str, ports: dict[str, Path]) -> str:
    boards = "".join(f'[[board]]\nname = "{name}"\nport = "{path}"\n' for name, path in ports.items())
    return f'broker = "{broker}"\nidentify = true\nstats_every = 0\nhealth_after = 1\n{boards}'


def test_boards_swapped_between_ports_are_refused_and_publish_nothing_under_another_name(tmp_path: Path) -> None:
    with Mosquitto(tmp_path / "broker", persistence=True) as broker:
        observer = Subscriber(broker.address, "identity-observer", "sensors/#")
        boards = {name: serial_board(tmp_path / name, name, 1, COUNT) for name in ("swap-a", "swap-b")}
        links = {name: board.serial_link for name, board in boards.items()}
        config = tmp_path / "bridge.toml"
        config.write_text(bridge_toml(broker.address, {"swap-a": links["swap-b"], "swap-b": links["swap-a"]}))
        bridge = ManagedProcess(
            [sys.executable, "-m", "host_bridge", "run", "--config", str(config), "--metrics", "127.0.0.1:0"],
            tmp_path / "bridge.log",
            cwd=REPO,
        )  # fmt: skip
        try:
            for board in boards.values():
                board.start()
            bridge.wait_for("event=start")
            address = logged(bridge.text(), "start")["metrics"]
            # Each board tries its CONNECT, is refused, and tries again (twice each, to see it holds; the log says
            # it once, folding the repeats).
            for name, other in (("swap-a", "swap-b"), ("swap-b", "swap-a")):
                refusals = f'dmqtt_bridge_board_wrong_boards_total{{board="{name}"}}'
                until(lambda r=refusals: scrape(address).get(r, 0) >= 2, f"{name}'s port never refused", limit_s=60)
                got = scrape(address)
                assert got[f'dmqtt_bridge_board_wrong{{board="{name}",client_id="{other}"}}'] == 1, got
            log = bridge.text()
            assert "expected=swap-a client_id=swap-b" in log and "expected=swap-b client_id=swap-a" in log
            assert "event=connected" in log  # (the connection was opened, then closed on the CONNECT)
            until(lambda: health(address) == 503, "/healthz stayed ok with both boards wrong")
            assert observer.records == [], observer.records[:3]  # nothing of either board reached the broker

            # Put right: each name on its own board's port, read again on SIGHUP; both deliver everything.
            config.write_text(bridge_toml(broker.address, links))
            assert bridge.process is not None
            bridge.process.send_signal(signal.SIGHUP)
            for name, board in boards.items():
                assert board.process is not None
                out, _ = board.process.communicate(timeout=120)
                assert board.wait() == 0 and summary(out.decode())["total"] == COUNT, out.decode()[-2000:]
                check_promises(observer, name, 1, COUNT)
            assert {r.topic for r in observer.records} == {f"sensors/{n}/telemetry" for n in boards}
            assert not [k for k in scrape(address) if k.startswith("dmqtt_bridge_board_wrong{")]
            log = bridge.text()
            for name in boards:  # each now known by its own client id
                assert f"board={name} event=client client_id={name} " in log, log[-3000:]
        finally:
            observer.close()
            for board in boards.values():
                board.close()
            code = bridge.stop()
    assert code == 0, bridge.text()[-3000:]
