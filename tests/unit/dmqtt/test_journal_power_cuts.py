"""Power cuts inside journal writes, on the in-memory NOR model (CPython, fast): at each cut point the
operation in progress is left half done, then a new session boots on the same flash. Every message whose
accept() returned and whose flow had not finished must come back, in the right state; the journal must stay
writable (the NOR model raises on any program over non-erased bytes)."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

from dmqtt import codec_host as codec
from dmqtt import journal_record as rec
from dmqtt import journal_ring
from dmqtt.session import WAIT_COMP, Session
from tests.unit.dmqtt.test_session import ack, drain
from tests.unit.nor import NorPartition, PowerCut


class Model:
    """What the application and the broker know: messages accepted, and how far each flow got."""

    def __init__(self) -> None:
        self.live: dict[int, tuple[int, bytes, bool]] = {}  # pid -> (qos, payload, pubrec done)
        self.maybe: set[int] = set()  # the flow step in progress when the power went
        self.mark = 0  # the application's progress: messages whose accept() returned


def workload(session: Session, model: Model, rng: random.Random, steps: int) -> None:
    session.connected(True)
    drain(session)  # resends of what a previous boot left in flight: the broker can only ack what it got
    for step in range(steps):
        waiting = [pid for pid in model.live if pid not in model.maybe]
        if len(model.live) < 6 and (not waiting or rng.random() < 0.5):
            qos = rng.choice([1, 2])
            payload = b"msg-%d-%d" % (step, rng.randrange(1000)) * rng.randrange(1, 8)
            model.maybe = {-1}
            pid = session.accept(b"sensors/cut", payload, qos, mark=model.mark + 1)
            model.maybe = set()
            model.mark += 1
            model.live[pid] = (qos, payload, False)
            drain(session)
            continue
        pid = rng.choice(waiting)
        qos, payload, released = model.live[pid]
        model.maybe = {pid}
        if qos == 1:
            ack(session, codec.PUBACK, pid)
            del model.live[pid]
        elif not released:
            ack(session, codec.PUBREC, pid)
            model.live[pid] = (qos, payload, True)
        else:
            ack(session, codec.PUBCOMP, pid)
            del model.live[pid]
        model.maybe = set()
        drain(session)


def check_recovered(journal: Any, model: Model) -> Session:
    """A new session on `journal` (a backend over the flash a cut left): what the model says must be there."""
    session = Session(journal)
    session.open()
    found = {session._pid[i]: i for i in range(len(session._state)) if session._state[i]}
    for pid, (_qos, _payload, released) in model.live.items():
        if pid in model.maybe:
            continue  # its ack was being journaled: either state is right
        assert pid in found, f"accepted message {pid} lost"
        in_comp = session._state[found[pid]] == WAIT_COMP
        assert in_comp == released, f"message {pid}: PUBREC {'lost' if released else 'invented'}"
    extra = set(found) - set(model.live)
    assert extra <= model.maybe or (len(extra) <= 1 and -1 in model.maybe), f"messages from nowhere: {extra}"
    # The progress mark counts exactly the messages on flash: one more only if the interrupted one made it.
    landed = bool(extra - model.maybe) or (-1 in model.maybe and len(extra) == 1)
    assert session.mark == model.mark + (1 if landed else 0), f"mark {session.mark}, model {model.mark}"
    # What comes back is what was accepted: same payload, QoS; PUBLISH again with DUP=1, or PUBREL.
    session.connected(True)
    for p in drain(session):
        if p.type == codec.PUBLISH and p.pid in model.live and p.pid not in model.maybe:
            assert (p.qos, p.payload, p.dup) == (model.live[p.pid][0], model.live[p.pid][1], True)
    return session


STEPS = 1500
WRITES = (rec.PUB, rec.REL, rec.DONE)  # the records of an outgoing flow (a cut in another program: a header)


@pytest.mark.parametrize("seed", range(6))
def test_power_cut_at_every_operation(seed: int) -> None:
    # Count the operations of the workload once, then cut at each of them in turn.
    probe = NorPartition(5, seed)
    session = Session(journal_ring.RingJournal(probe, 512))
    session.open()
    workload(session, Model(), random.Random(seed), STEPS)
    total = probe.ops
    assert probe.erases > 8, "the workload must go round the ring"
    step = max(1, total // 60)
    landed: Counter[tuple[str, int]] = Counter()
    for cut in range(1, total + 1, step):
        part = NorPartition(5, seed * 1000 + cut)
        part.cut_at = cut
        model = Model()
        session = Session(journal_ring.RingJournal(part, 512))
        with pytest.raises(PowerCut):
            session.open()
            workload(session, model, random.Random(seed), STEPS)
        assert part.cut_op is not None
        landed[part.cut_op if part.cut_op[0] == "program" and part.cut_op[1] in WRITES else (part.cut_op[0], -1)] += 1
        part.cut_at = 0
        recovered = check_recovered(journal_ring.RingJournal(part, 512), model)
        # The journal keeps working after the cut (appends after a torn record, wraps again). The model now
        # follows what the board recovered: the step in progress either happened or did not.
        model.maybe = set()
        model.mark = recovered.mark
        model.live = {}
        for i in range(len(recovered._state)):
            if recovered._state[i]:
                recovered.journal.read(recovered._addr[i])
                body = recovered.journal.record
                released = recovered._state[i] == WAIT_COMP
                payload = b"" if released else bytes(body[13 + ((body[11] << 8) | body[12]) :])
                model.live[recovered._pid[i]] = (recovered._qos[i], payload, released)
        workload(recovered, model, random.Random(seed + 99), 300)
        check_recovered(journal_ring.RingJournal(part, 512), model)
    # The sweep landed in each of the ring's writes of a flow's records, and in its erases.
    wanted = {("program", t) for t in WRITES} | {("erase", -1)}
    assert wanted <= set(landed), f"no cut in {wanted - set(landed)}: {dict(landed)}"


def test_torn_record_is_ignored_and_the_next_append_goes_to_a_new_sector() -> None:
    part = NorPartition(5)
    s = Session(journal_ring.RingJournal(part, 512))
    s.open()
    keep = s.accept(b"t", b"kept", 1)
    part.cut_at = part.ops + 1
    with pytest.raises(PowerCut):
        s.accept(b"t", b"torn" * 20, 1)
    part.cut_at = 0
    j = journal_ring.RingJournal(part, 512)
    again = Session(j)
    notes = again.open()
    assert any("torn record" in n for n in notes) or again.outstanding() == 1
    assert again.outstanding() == 1 and again._find(keep) >= 0
    again.accept(b"t", b"after", 1)
    third = Session(journal_ring.RingJournal(part, 512))
    third.open()
    assert third.outstanding() == 2


def test_foreign_partition_content_is_reported_and_reinitialised() -> None:
    part = NorPartition(5)
    part.data[0:4096] = b"\x12\x34" * 2048  # not ours, and not erased
    s = Session(journal_ring.RingJournal(part, 512))
    notes = s.open()
    assert notes and "without a valid header" in notes[0]
    s.accept(b"t", b"x", 1)  # the foreign sector is erased before use: no program violation
    again = Session(journal_ring.RingJournal(part, 512))
    again.open()
    assert again.outstanding() == 1
