"""The integration tests' broker: a Mosquitto of their own per test, with persistence (a restart keeps the
sessions, as a broker in service does). test_board_tls.py has its TLS broker and test_client_wire.py a scripted
one under their own names."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from host_bridge.broker.mosquitto import Mosquitto


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Mosquitto]:
    with Mosquitto(tmp_path / "broker", persistence=True) as b:
        yield b
