"""Power cuts at every operation of the receive side and of the file journal (CPython, fast): incoming QoS 2
messages reach the application exactly once through a cut anywhere, on the ring (NOR model, programs torn to
an arbitrary subset of bits) and on the LittleFS file journal (commits atomic, unsynced writes lost). The one
window no journal closes is allowed: the handler returned, then the power went before its return was
journaled; that message alone may come a second time, flagged dup. The outgoing flows on the file journal are
held to what test_journal_power_cuts.py holds the ring to."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from dmqtt import codec_host as codec
from dmqtt import journal_file, journal_ring
from dmqtt.session import Session
from tests.unit.fakefs import FakeFS
from tests.unit.nor import NorPartition, PowerCut
from tests.unit.test_journal_power_cuts import Model, check_recovered, workload
from tests.unit.test_session import ack, deliver, drain

TOPIC = "cmd/board"


class Medium:
    """A journal's storage across reboots: a NOR partition (the ring) or a file system (the file journal),
    each with an operation counter and a power cut armed at the Nth operation."""

    def __init__(self, kind: str, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
        self.kind = kind
        if kind == "ring":
            self.part = NorPartition(5, seed)
            self.store: Callable[[], Any] = lambda: journal_ring.RingJournal(self.part, 512)
        else:
            self.fs = FakeFS()
            monkeypatch.setattr(journal_file, "open", self.fs.open, raising=False)
            monkeypatch.setattr(journal_file, "os", self.fs)
            self.store = lambda: journal_file.FileJournal("/mqtt.journal", 512, compact_bytes=6000)

    @property
    def device(self) -> Any:
        return self.part if self.kind == "ring" else self.fs


class App:
    """The application's handler: it does work of its own on the same power (an operation a cut can land in),
    then its effect is done: every delivery whose handler returned, in order."""

    def __init__(self, medium: Medium) -> None:
        self.medium = medium
        self.got: list[bytes] = []

    def __call__(self, topic: str, payload: bytes, qos: int, retain: bool, dup: bool) -> None:
        assert (topic, qos) == (TOPIC, 2)
        self.medium.device.work(f"the handler of {payload[:12]!r}")
        self.got.append(payload)


class Broker:
    """What the broker knows of its QoS 2 flows to the board: sent without PUBREC yet, and released (PUBREC
    seen, PUBREL to send until PUBCOMP)."""

    def __init__(self) -> None:
        self.unacked: dict[int, bytes] = {}
        self.released: set[int] = set()
        self.sent: list[bytes] = []
        self.next_pid = 0

    def answers(self, session: Session) -> None:
        for p in drain(session):
            if p.type == codec.PUBREC:
                self.unacked.pop(p.pid, None)
                self.released.add(p.pid)
            elif p.type == codec.PUBCOMP:
                self.released.discard(p.pid)

    def resend(self, session: Session) -> None:
        """After the board reconnects with its session: PUBLISH again (DUP) what got no PUBREC, PUBREL again."""
        for pid, payload in sorted(self.unacked.items()):
            deliver(session, codec.encode_publish(TOPIC, payload, 2, pid, dup=True))
            self.answers(session)
        for pid in sorted(self.released):
            ack(session, codec.PUBREL, pid)
            self.answers(session)


def receive(session: Session, broker: Broker, rng: random.Random, steps: int) -> None:
    for _ in range(steps):
        in_flight = len(broker.unacked) + len(broker.released)
        if in_flight < 8 and (not broker.released or rng.random() < 0.6):
            broker.next_pid = broker.next_pid % 200 + 1
            while broker.next_pid in broker.unacked or broker.next_pid in broker.released:
                broker.next_pid = broker.next_pid % 200 + 1
            payload = b"cmd-%d-" % len(broker.sent) + b"x" * rng.randrange(10, 200)
            broker.sent.append(payload)
            broker.unacked[broker.next_pid] = payload
            deliver(session, codec.encode_publish(TOPIC, payload, 2, broker.next_pid))
        else:
            ack(session, codec.PUBREL, rng.choice(sorted(broker.released)))
        broker.answers(session)


def boot(medium: Medium, app: App) -> Session:
    session = Session(medium.store())
    session.on_message = app
    session.open()
    session.deliver_pending()
    session.connected(True)
    return session


STEPS = 400


@pytest.mark.parametrize("kind", ["ring", "file"])
@pytest.mark.parametrize("seed", range(3))
def test_incoming_qos2_exactly_once_through_a_cut_at_every_operation(
    kind: str, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    probe = Medium(kind, seed, monkeypatch)
    receive(boot(probe, App(probe)), Broker(), random.Random(seed), STEPS)
    total = probe.device.ops
    step = max(1, total // 50)
    for cut in range(1, total + 1, step):
        medium = Medium(kind, seed * 1000 + cut, monkeypatch)
        medium.device.cut_at = cut
        app, broker = App(medium), Broker()
        with pytest.raises(PowerCut):
            receive(boot(medium, app), broker, random.Random(seed), STEPS)
        window = app.got[-1] if app.got else None  # the handler's last return: its HANDLED may be what the cut tore
        medium.device.cut_at = 0
        app.medium = medium
        session = boot(medium, app)  # the reboot delivers what the cut interrupted
        broker.resend(session)
        receive(session, broker, random.Random(seed + 7), 40)
        broker.resend(session)
        assert not broker.unacked and not broker.released, f"cut {cut}: flows left open"
        missing = set(broker.sent) - set(app.got)
        assert not missing, f"cut {cut}: {len(missing)} messages never reached the application"
        twice = {p for p in app.got if app.got.count(p) > 1}
        assert twice <= {window}, f"cut {cut}: delivered twice outside the handler's window: {twice}"


@pytest.mark.parametrize("seed", range(3))
def test_outgoing_flows_on_the_file_journal_through_a_cut_at_every_operation(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    probe = Medium("file", seed, monkeypatch)
    session = Session(probe.store())
    session.open()
    workload(session, Model(), random.Random(seed), 600)
    total = probe.fs.ops
    assert any(name.endswith(".tmp") for name in probe.fs.files) or total > 50, "the workload must compact"
    for cut in range(1, total + 1, max(1, total // 50)):
        medium = Medium("file", seed, monkeypatch)
        medium.fs.cut_at = cut
        model = Model()
        session = Session(medium.store())
        with pytest.raises(PowerCut):
            session.open()
            workload(session, model, random.Random(seed), 600)
        medium.fs.cut_at = 0
        check_recovered(medium.store(), model)
