"""End-to-end confirmation on the wire and in the store (docs/confirmation.md): virtual boards, Mosquitto and
`host-bridge record --confirm`, each as a user runs it.

- A broker SIGKILLed while it holds messages it has acknowledged loses them; the recorder's confirmations show
  the gaps, the boards (on TCP and on a serial line) send them again from flash, and the store ends with every
  message once, the repaired ones marked.
- A 3.1.1 board publishing outside its ACL: Mosquitto acknowledges and discards; the board says once that its
  messages stay unconfirmed, counts them, and the promises' judge lists them.
- Confirmations that never reach the board: nothing is sent again before confirm.timeout_s, and the store holds
  each message once all the same.
- Only the recorder may confirm: a board's forged confirmation for another is refused, and the victim loses
  nothing."""

from __future__ import annotations

import os
import random
import signal
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from dboard import console_host
from dmqtt_telemetry.format import read_committed
from dmqtt_telemetry.promises import Delivery, Expectation, Witness, boot_rows, judge
from host_bridge.broker.mosquitto import ACL, Mosquitto, write_password_file
from host_bridge.campaigns.stack import BoardSpec, Stack
from host_bridge.hil.subscriber import Subscriber
from host_bridge.recorder.confirmation import decode
from host_bridge.vboard.events import EventSpec, Hold
from tests.integration.boards import board_config, finish, start_board, summary
from tests.integration.recorder_proc import RecorderProcess

PASSWORDS = {"recorder": "rec-secret", "victim": "victim-secret", "mallory": "mallory-secret", "outsider": "out-secret"}


def stored_once(rows: list[dict[str, Any]], expected: dict[str, Expectation]) -> dict[str, Any]:
    """Judge the store with the promises (the audit's rules): the rows that count (not the recorder's re-stores)
    per device and boot, against what each board accepted (its summary and, where given, its console's witness).
    -> the judge's verdicts and the repaired count."""
    usable = [r for r in rows if not r["recorder_dup"] and r["dev"] is not None]
    deliveries = [Delivery(r["dev"], r["boot"], r["seq"], r["qos"]) for r in usable]
    verdicts, _ = judge(boot_rows(deliveries), expected)
    return {"verdicts": verdicts, "repaired": sum(bool(r["repaired"]) for r in usable), "usable": len(usable)}


def witnessed(stack: Stack) -> dict[str, Expectation]:
    """What each board of `stack` accepted: its summary's total and last boot, and its console's witness."""
    return {
        r.spec.client_id: Expectation(
            r.summary["total"],
            r.spec.qos,
            Witness(r.dut.console.acceptances()),
            (r.summary["boot"], r.summary["sent"]),
        )
        for r in stack.runs
        if r.summary
    }


def broker_sigkill_scenario(work: Path, app: Path | None = None) -> tuple[Stack, dict[str, Any], list[str]]:
    """Three boards with confirmation (TCP and serial, QoS 1 and 2) through a SIGKILL of a broker without
    persistence while it holds acknowledged messages for a stopped recorder; `app`: the boards' application (a
    plant, tests/plants). -> the stack, the store judged by the witness (stored_once), the boards' failures."""
    broker = Mosquitto(work / "broker")
    specs = (
        BoardSpec("confirm-tcp-q1", "tcp", "3.1.1", 1),
        BoardSpec("confirm-tcp-q2", "tcp", "5", 2),
        BoardSpec("confirm-serial-q2", "serial", "3.1.1", 2),
    )
    stack = Stack(work / "stack", broker, specs, messages=150, cuts=0, rng=random.Random(5), confirm=True, app=app)
    paused = False
    holds: list[Hold] = []
    try:
        # Each board waits at its 40th accepted message until the recorder is stopped, so that every board has
        # messages left to publish then, however slow the host.
        holds = stack.start(hold=EventSpec("accepted", 40))
        assert stack.recorder is not None
        deadline = time.monotonic() + 120  # (each wait bounds a hang: the boards share 2 cores with the suite)
        while len(read_committed(stack.recorded, ["dev"])) < 60 or not all(h.reached.is_set() for h in holds):
            assert time.monotonic() < deadline, "the recorder committed too little, or a board never got to 40"
            time.sleep(0.05)
        # The recorder stops reading: the broker acknowledges the boards' messages and holds them for it...
        os.kill(stack.recorder.process.pid, signal.SIGSTOP)
        paused = True
        accepted = {r.spec.client_id: accepted_count(r.dut.console.text()) for r in stack.runs}
        for hold in holds:
            hold.release()
        deadline = time.monotonic() + 120
        while any(accepted_count(r.dut.console.text()) < accepted[r.spec.client_id] + 15 for r in stack.runs):
            assert time.monotonic() < deadline, "the boards stopped publishing"
            time.sleep(0.02)
        # ... and dies with them.
        broker.kill()
        stack.start_broker()
        os.kill(stack.recorder.process.pid, signal.SIGCONT)
        paused = False
        while not stack.boards_finished:
            assert time.monotonic() < deadline + 120, "the boards did not finish"
            time.sleep(0.1)
        failures = stack.failures()
        stack.drain(print, timeout=60)
    finally:
        for hold in holds:
            hold.release()
        if paused and stack.recorder is not None:
            os.kill(stack.recorder.process.pid, signal.SIGCONT)
        stack.stop()
    return stack, stored_once(read_committed(stack.recorded), witnessed(stack)), failures


def test_a_broker_sigkill_loses_acknowledged_messages_and_the_boards_give_them_back(tmp_path: Path) -> None:
    # No persistence: a SIGKILL takes with it every message it had acknowledged and not yet delivered.
    stack, judged, failures = broker_sigkill_scenario(tmp_path)
    assert not failures, failures
    assert {dev: e["messages"] for dev, e in stack.expected().items()} == {r.spec.client_id: 150 for r in stack.runs}
    for qos, v in judged["verdicts"].items():
        assert v.lost == 0 and v.duplicates == 0 and v.ok, (qos, v.problems)
    assert judged["usable"] == 450
    # The broker did lose some, and the boards gave them back: the store says which.
    assert judged["repaired"] > 0, judged
    summaries = [r.summary for r in stack.runs]
    assert all(s is not None and s["confirm"]["unconfirmed"] == 0 for s in summaries), summaries
    assert sum(s["confirm"]["resent"] for s in summaries if s) >= judged["repaired"], summaries


def test_a_board_that_ends_with_messages_unconfirmed_sends_them_again_at_its_next_boot(tmp_path: Path) -> None:
    """The recorder stops confirming while the boards finish: each ends its run with its messages unconfirmed
    (kept in its journal). The campaign boots it once more (Stack.wake_unconfirmed), as a device in the field boots
    again: that boot sends again what the store lacks and ends with nothing unconfirmed, and the store holds every
    message once."""
    broker = Mosquitto(tmp_path / "broker")
    specs = (BoardSpec("wake-tcp-q2", "tcp", "5", 2), BoardSpec("wake-serial-q1", "serial", "3.1.1", 1))
    stack = Stack(tmp_path / "stack", broker, specs, messages=60, cuts=0, rng=random.Random(3), confirm=True)
    paused = False
    said: list[str] = []
    try:
        stack.start()
        assert stack.recorder is not None
        os.kill(stack.recorder.process.pid, signal.SIGSTOP)
        paused = True
        deadline = time.monotonic() + 120
        while not stack.boards_finished:
            assert time.monotonic() < deadline, "the boards did not finish"
            time.sleep(0.1)
        left = {r.spec.client_id: r.summary["confirm"]["unconfirmed"] for r in stack.runs if r.summary}
        assert all(n > 0 for n in left.values()) and len(left) == 2, left
        os.kill(stack.recorder.process.pid, signal.SIGCONT)
        paused = False
        stack.wake_unconfirmed(said.append)
        stack.drain(said.append, timeout=60)
    finally:
        if paused and stack.recorder is not None:
            os.kill(stack.recorder.process.pid, signal.SIGCONT)
        stack.stop()
    assert [line for line in said if "after its next boot" in line] == [
        f"{s.client_id}: 0 unconfirmed after its next boot" for s in specs
    ], said
    assert [r.boots for r in stack.runs] == [2, 2]
    judged = stored_once(read_committed(stack.recorded), witnessed(stack))
    assert {dev: e.messages for dev, e in witnessed(stack).items()} == {s.client_id: 60 for s in specs}
    for qos, v in judged["verdicts"].items():
        assert v.lost == 0 and v.duplicates == 0 and v.ok, (qos, v.problems)


def accepted_count(console: str) -> int:
    return len(console_host.lines(console, "accepted"))


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mosquitto]:
    """Mosquitto with passwords and the project's ACL (host_bridge.broker.mosquitto.ACL)."""
    work = tmp_path_factory.mktemp("acl")
    passwords = write_password_file(work / "passwords", PASSWORDS)
    (work / "acl").write_text(ACL)
    options = (f"password_file {passwords}", f"acl_file {work / 'acl'}")
    with Mosquitto(work / "broker", options=options, allow_anonymous=False) as broker:
        yield broker


def confirming_recorder(out: Path, broker: Mosquitto, *extra: str) -> RecorderProcess:
    password = out.parent / f"{out.name}.password"
    password.write_text(PASSWORDS["recorder"])
    recorder = RecorderProcess(
        out, broker.address, "--confirm", "--username", "recorder", "--password-file", str(password), *extra
    )
    recorder.wait_connected()
    return recorder


def test_a_311_board_outside_its_acl_says_its_messages_stay_unconfirmed(tmp_path: Path, acl_broker: Mosquitto) -> None:
    recorder = confirming_recorder(tmp_path / "recorded", acl_broker)
    try:
        # Its client id is "outsider": it may publish under sensors/outsider/ only. Mosquitto closes the connection
        # after each refused message; one flow at a time (window 1) reads each acknowledgement before writing more
        # (a write into the closed connection would draw a reset, and a reset discards what is unread).
        config = board_config(
            "outsider", acl_broker.address, 1, 5, "3.1.1", username="outsider", password=PASSWORDS["outsider"],
            publish={"topic": "sensors/somebody-else/telemetry"}, confirm={"timeout_s": 1}, window=1,
        )  # fmt: skip
        code, out = finish(start_board(tmp_path, config), timeout=60)
    finally:
        recorder.stop()
    assert code == 0, out
    result = summary(out)
    assert result["total"] == 5 and result["confirm"]["unconfirmed"] == 5, result
    assert result["confirm"]["late"] >= 1 and result["confirm"]["resent"] >= 5, result
    said = console_host.lines(out, "unconfirmed")
    assert len(said) == 1 and said[0].values == (5, 1), out  # said once, however often they were sent again
    # The store never had them, and the judge (the audit's) names them lost.
    verdicts, _ = judge(boot_rows([]), {"outsider": Expectation(5, 1)})
    assert verdicts[1].lost == 5 and verdicts[1].problems, verdicts
    assert read_committed(tmp_path / "recorded") == []


def test_lost_confirmations_mean_sent_again_after_the_timeout_and_stored_once(tmp_path: Path) -> None:
    with Mosquitto(tmp_path / "broker") as broker:
        observer = Subscriber(broker.address, "observer-lost-confirmations", "sensors/#", clean=True, mqtt5=True)
        # Its confirmations go where the board does not listen: as if the broker lost every one. In MQTT 5.0, so
        # that the copies' mark reaches the store.
        recorder = RecorderProcess(
            tmp_path / "recorded",
            broker.address,
            "--confirm",
            "--confirm-topic",
            "nowhere/{dev}",
            "--mqtt-version",
            "5",
        )
        recorder.wait_connected()
        try:
            config = board_config("forgotten", broker.address, 2, 12, "5", confirm={"timeout_s": 2})
            code, out = finish(start_board(tmp_path, config), timeout=60)
            recorder.wait_rows(12)
            time.sleep(1.0)  # the last re-sends' rows
        finally:
            recorder.stop()
            observer.close()
    assert code == 0, out
    result = summary(out)
    # A batch (8) a timeout, each after the last: in the three timeouts the board waits at its end, at least 8.
    assert result["confirm"]["resent"] >= 8 and result["confirm"]["unconfirmed"] == 12, result
    copies: dict[tuple[int, int], list[float]] = defaultdict(list)
    marks: dict[tuple[int, int], list[bool]] = defaultdict(list)
    for record in observer.records:
        assert record.telemetry is not None
        copies[(record.telemetry.boot, record.telemetry.seq)].append(record.arrived)
        marks[(record.telemetry.boot, record.telemetry.seq)].append(record.resent)
    assert len(copies) == 12 and sum(len(times) - 1 for times in copies.values()) == result["confirm"]["resent"]
    # Each copy sent again, and only those, carries the board's mark on the wire (docs/confirmation.md).
    assert all(m == [False] + [True] * (len(m) - 1) for m in marks.values()), dict(marks)
    # Never sooner than the timeout after the copy before it (the board can be late, never early).
    gaps = [later - earlier for times in copies.values() for earlier, later in zip(times, times[1:], strict=False)]
    assert min(gaps) >= 2.0 - 0.3, sorted(gaps)[:3]
    rows = read_committed(tmp_path / "recorded")
    judged = stored_once(rows, {"forgotten": Expectation(12, 2, Witness(console_host.acceptances(out)))})
    assert judged["usable"] == 12 and judged["verdicts"][2].ok, judged
    assert sum(r["recorder_dup"] for r in rows) == len(rows) - 12  # every re-send stored as a re-store
    assert [r["resent"] for r in rows if r["recorder_dup"]] == [True] * (len(rows) - 12), "a re-send unmarked"
    assert not any(r["resent"] for r in rows if not r["recorder_dup"]), "a first copy marked as sent again"


def test_only_the_recorder_may_confirm(tmp_path: Path, acl_broker: Mosquitto) -> None:
    forged = bytes.fromhex("01ffffffff01") + bytes.fromhex("000000017fffffff7fffffff00")
    host, port = acl_broker.address.rsplit(":", 1)
    mallory = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="mallory", protocol=mqtt.MQTTv5)
    mallory.username_pw_set("mallory", PASSWORDS["mallory"])
    acks: list[int] = []
    mallory.on_publish = lambda _c, _u, _mid, reason, _p: acks.append(reason.value)
    mallory.connect(host, int(port))
    mallory.loop_start()
    try:
        mallory.publish("confirm/victim", forged, qos=1, retain=True, properties=Properties(PacketTypes.PUBLISH))
        deadline = time.monotonic() + 10
        while not acks:
            assert time.monotonic() < deadline, "no PUBACK for the forged confirmation"
            time.sleep(0.02)
    finally:
        mallory.loop_stop()
        mallory.disconnect()
    assert acks == [0x87], acks  # Not authorized [MQTT-3.4.2.1]: the ACL lets only the recorder write confirm/#
    recorder = confirming_recorder(tmp_path / "recorded", acl_broker)
    try:
        config = board_config(
            "victim", acl_broker.address, 2, 20, "5", username="victim", password=PASSWORDS["victim"],
            confirm={"timeout_s": 2},
        )  # fmt: skip
        code, out = finish(start_board(tmp_path, config), timeout=60)
        recorder.wait_rows(20)
    finally:
        recorder.stop()
    assert code == 0, out
    result = summary(out)
    assert result["confirm"] == {"unconfirmed": 0, "resent": 0, "dropped": 0, "late": 0}, result
    judged = stored_once(
        read_committed(tmp_path / "recorded"), {"victim": Expectation(20, 2, Witness(console_host.acceptances(out)))}
    )
    assert judged["usable"] == 20 and judged["verdicts"][2].ok, judged
    # What the victim reads on its topic is the recorder's, not the forgery.
    seen = retained(acl_broker, "confirm/victim")
    assert seen is not None and seen != forged and decode(seen)[1][0].stored == 20


def retained(broker: Mosquitto, topic: str) -> bytes | None:
    """The retained message on `topic`, read as the victim reads it (None when there is none)."""
    host, port = broker.address.rsplit(":", 1)
    got: list[bytes] = []
    reader = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="victim", clean_session=True)
    reader.username_pw_set("victim", PASSWORDS["victim"])
    reader.on_message = lambda _c, _u, msg: got.append(bytes(msg.payload))
    reader.on_connect = lambda c, _u, _f, _rc, _p: c.subscribe(topic, 0)
    reader.connect(host, int(port))
    reader.loop_start()
    try:
        deadline = time.monotonic() + 3
        while not got and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        reader.loop_stop()
        reader.disconnect()
    return got[0] if got else None
