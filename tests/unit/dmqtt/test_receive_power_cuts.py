"""Power cuts at every operation of the receive side and of the file journal (CPython, fast): incoming QoS 2
messages reach the application exactly once through a cut anywhere, on the ring (NOR model, programs torn to
an arbitrary subset of bits) and on the LittleFS file journal (commits atomic, unsynced writes lost). The one
window no journal closes (the handler returned, then the power went before its return was journaled) gives
that message alone a second delivery, flagged dup and with the same receive number; the application here
keeps the number with its effect and so applies every message exactly once. The outgoing flows on the file
journal are held to what test_journal_power_cuts.py holds the ring to."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from dmqtt import codec_host as codec
from dmqtt import journal_file, journal_ring
from dmqtt import journal_record as rec
from dmqtt.session import Session
from host_bridge.hil.cycle import RECORD_NAMES
from tests.unit.dmqtt.test_journal_power_cuts import Model, check_recovered, workload
from tests.unit.dmqtt.test_session import ack, deliver, drain
from tests.unit.fakefs import FakeFS
from tests.unit.nor import NorPartition, PowerCut

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

        # The application's own store, which survives reboots: its effects and the receive number kept with
        # them, and every number each message was given (to check the numbers).
        self.effects: list[bytes] = []
        self.kept = 0
        self.numbers: dict[bytes, int] = {}

    @property
    def device(self) -> Any:
        return self.part if self.kind == "ring" else self.fs


class App:
    """The application: its handler does work of its own on the same power (an operation a cut can land in),
    then applies its effect as the docs say: the effect and the message's receive number in one atomic write
    (an operation too), skipped for a delivery whose number is the one kept. `got` is every delivery whose
    handler returned; the effects and the kept number live on the medium, across reboots."""

    def __init__(self, medium: Medium) -> None:
        self.medium = medium
        self.got: list[bytes] = []
        self.session: Session | None = None

    def __call__(self, topic: str, payload: bytes, qos: int, retain: bool, dup: bool) -> None:
        assert (topic, qos) == (TOPIC, 2) and self.session is not None
        medium = self.medium
        number = self.session.rx_number
        assert number > 0, "a message journaled by this firmware has a receive number"
        assert medium.numbers.setdefault(payload, number) == number, f"{payload[:12]!r}: its number changed"
        medium.device.work("inside the handler")
        if number != medium.kept:
            medium.device.work("the handler's effect")
            medium.effects.append(payload)
            medium.kept = number
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
    app.session = session
    session.open()
    session.deliver_pending()
    session.connected(True)
    return session


def window_of(device: Any, cut: PowerCut) -> str:
    """Where a cut landed: the application's own work (its message), a journal record's program or commit (by
    the record's type), or the journal's housekeeping (erase, a sector or file header, rename, remove)."""
    op, first = device.cut_op
    if op == "work":
        return str(cut)
    if op in ("program", "commit") and first in RECORD_NAMES:
        return f"{RECORD_NAMES[first]} record"
    return op


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
    windows: Counter[str] = Counter()
    for cut in range(1, total + 1, step):
        medium = Medium(kind, seed * 1000 + cut, monkeypatch)
        medium.device.cut_at = cut
        app, broker = App(medium), Broker()
        with pytest.raises(PowerCut) as power_cut:
            receive(boot(medium, app), broker, random.Random(seed), STEPS)
        windows[window_of(medium.device, power_cut.value)] += 1
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
        assert sorted(medium.effects) == sorted(broker.sent), f"cut {cut}: an effect lost or applied twice"
        numbers = [medium.numbers[p] for p in broker.sent]
        assert numbers == sorted(set(numbers)), f"cut {cut}: receive numbers not unique and increasing"
    # The sweep landed in every window of a delivery, and in the journal's housekeeping.
    wanted = {"RX record", "inside the handler", "the handler's effect", "HANDLED record", "RXDONE record"}
    assert wanted <= set(windows), f"no cut in {wanted - set(windows)}: {dict(windows)}"


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


@pytest.mark.parametrize("kind", ["ring", "file"])
def test_a_cut_in_each_window_of_a_delivery_leaves_its_effect_applied_once(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One message, cut at each operation of its delivery in turn: the RX record, the handler's own work, its
    effect, HANDLED (after the handler returned: the window no journal closes), RXDONE. After the reboot and
    the broker's resends, its effect is there exactly once, whatever the window."""
    payload = b"cmd-open-valve"

    def one_message(session: Session, broker: Broker) -> None:
        broker.sent.append(payload)
        broker.unacked[7] = payload
        deliver(session, codec.encode_publish(TOPIC, payload, 2, 7))
        broker.answers(session)
        broker.resend(session)  # PUBREL

    probe = Medium(kind, 0, monkeypatch)
    session = boot(probe, App(probe))
    first = probe.device.ops + 1
    one_message(session, Broker())
    assert probe.effects == [payload] and not probe.device.cut_op
    windows = []
    for cut in range(first, probe.device.ops + 1):
        medium = Medium(kind, cut, monkeypatch)
        app, broker = App(medium), Broker()
        session = boot(medium, app)
        medium.device.cut_at = cut
        with pytest.raises(PowerCut) as power_cut:
            one_message(session, broker)
        windows.append(window_of(medium.device, power_cut.value))
        medium.device.cut_at = 0
        session = boot(medium, app)  # delivers what the cut interrupted
        broker.resend(session)
        broker.resend(session)
        assert not broker.unacked and not broker.released, f"{windows[-1]}: the flow was left open"
        assert medium.effects == [payload], f"a cut in {windows[-1]}: effects {medium.effects}"
    delivery = [w for w in windows if w not in ("META record", "erase", "program", "commit", "rename", "remove")]
    assert delivery == ["RX record", "inside the handler", "the handler's effect", "HANDLED record", "RXDONE record"]


def test_receive_numbers_survive_compaction_and_an_older_journal_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """The receive number keeps rising through many compactions of the ring (META carries it), and a journal
    written before format 4 is read as docs/journal.md says: an RX without a number is delivered with 0, a META
    without one counts from the largest number found, a META with the confirmation's tail of format 3 keeps it."""
    medium = Medium("ring", 1, monkeypatch)
    app, broker = App(medium), Broker()
    receive(boot(medium, app), broker, random.Random(1), 600)
    assert medium.part.erases > 5, "the ring must go round"
    session = boot(medium, app)
    assert session.received == len(broker.sent) == max(medium.numbers.values())

    # Format 3 records, as older firmware wrote them (put by hand: this firmware writes format 4 only).
    older = Medium("file", 2, monkeypatch)
    journal = older.store()
    session = Session(journal)
    session.open()
    body = journal.body
    topic, message = TOPIC.encode(), b"from-format-3"
    body[:5] = bytes([0, 9, 2, 0, len(topic)])
    body[5 : 5 + len(topic) + len(message)] = topic + message
    journal.commit(rec.RX, 5 + len(topic) + len(message))
    body[:10] = bytes([0, 3, 0, 0, 0, 40, 0, 0, 0, 0])  # next pid 3, serial 40, mark 0
    journal.commit(rec.META, 10)
    delivered: list[tuple[bytes, int, bool]] = []
    session = Session(older.store())
    session.on_message = lambda t, p, q, r, dup: delivered.append((p, session.rx_number, dup))
    session.open()
    session.deliver_pending()
    assert delivered == [(message, 0, True)]
    assert (session.serial, session.received) == (40, 0)
    # A META of format 3 with the confirmation's tail (15 + 12k bytes) and one of format 4 (19 + 12k).
    assert rec.meta_size(bytes(10)) == rec.meta_size(bytes(15)) == rec.meta_size(bytes(27)) == 10
    assert rec.meta_size(bytes(14)) == rec.meta_size(bytes(19)) == rec.meta_size(bytes(31)) == rec.META_SIZE == 14
    assert rec.meta(bytes([0, 3, 0, 0, 0, 40, 0, 0, 0, 7]))[3] == 0
    assert rec.meta(bytes([0, 3, 0, 0, 0, 40, 0, 0, 0, 7, 0, 0, 0, 9]))[3] == 9
