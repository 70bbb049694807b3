"""The telemetry recorder (`host-bridge record`): subscribe at QoS 2 with a persistent session and keep every
delivery in Parquet.

The recorder speaks MQTT through the project's own codec rather than a client library because it must choose
when to acknowledge: a PUBACK or PUBREC leaves only after the delivery is fsynced in the write-ahead log
(host_bridge/recorder/store.py). paho-mqtt, for one, sends PUBREC on arrival and keeps the QoS 2 message in
RAM until PUBREL, so a recorder killed in between would lose it for good."""

from __future__ import annotations

import argparse
import logging
import select
import signal
import socket
import ssl
import time
from collections.abc import Callable
from datetime import UTC, datetime
from logging import DEBUG, ERROR, INFO, WARNING

from dmqtt import codec
from dmqtt.codec_host import NAMES, Packet, PacketDecoder, encode_publish
from dmqtt.errors import CodecError
from dmqtt_telemetry.format import marked_resent
from host_bridge.errors import HostBridgeError
from host_bridge.logs import event, log_to_stdout
from host_bridge.net import Destination, TLSConfig
from host_bridge.recorder.confirmation import stamp_now
from host_bridge.recorder.store import RecorderError, StoreWriteError, TelemetryStore
from host_bridge.systemd import Watchdog, notify

log = logging.getLogger("host_bridge.recorder.recorder")

VERSIONS = {"3.1": codec.V31, "3.1.1": codec.V311, "5": codec.V5}
_SESSION_NEVER_EXPIRES = 0xFFFFFFFF  # MQTT 5.0 3.1.2.11.2: the session outlives any disconnection
_RETAIN_HANDLING_NEW_ONLY = 1 << 4  # MQTT 5.0 3.8.3.1: retained messages only for a new subscription
_SHARED_SUBSCRIPTION_AVAILABLE = 0x2A  # MQTT 5.0 CONNACK property (absent: 1, available)
_SHARED_SUBSCRIPTIONS_NOT_SUPPORTED = 0x9E  # MQTT 5.0 SUBACK reason code
_MAX_PACKET = 16 * 1024 * 1024


class BrokerLink:
    """One MQTT connection of the recorder: connect, subscribe, read packets, send acknowledgements."""

    def __init__(self, sock: socket.socket, version: int, keepalive: int) -> None:
        self.sock = sock
        self.version = version
        self.keepalive = keepalive
        self.decoder = PacketDecoder(version, _MAX_PACKET)
        self.last_sent = self.last_heard = time.monotonic()
        self.backlog: list[Packet] = []
        # MQTT 5.0's CONNACK says whether the broker has shared subscriptions; 3.1.1 cannot say (docs/brokers.md).
        self.shared_available = True

    @classmethod
    def open(
        cls,
        broker: Destination,
        tls: TLSConfig | None,
        client_id: str,
        version: int,
        keepalive: int,
        username: str | None,
        password: bytes | None,
        retire: bool = False,
    ) -> tuple[BrokerLink, bool]:
        """Connect (session kept, [MQTT-3.1.2-4] clean session 0) and return the link and session-present. With
        `retire`, the session is ended instead: clean session 1 has the broker discard it and what it queued
        [MQTT-3.1.2-6]; in 5.0, Clean Start with a Session Expiry of 0, so nothing is kept after this connection."""
        sock = socket.create_connection((broker.host, broker.port), timeout=10)
        try:
            if tls is not None:
                sock = tls.context().wrap_socket(sock, server_hostname=broker.host)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            link = cls(sock, version, keepalive)
            expiry = 0 if retire else _SESSION_NEVER_EXPIRES
            props = {codec.SESSION_EXPIRY_INTERVAL: expiry} if version == codec.V5 else None
            link.send(codec.encode_connect(client_id, version, keepalive, retire, username, password, props=props))
            connack = link.expect(codec.CONNACK)
            if connack.reason != 0:
                raise RecorderError(
                    f"the broker refused the connection (code 0x{connack.reason:02x}); "
                    "check the credentials and client id"
                )
            # MQTT 3.1 has no session-present flag: the session is assumed kept, as on the board.
            present = bool(connack.session_present) or version == codec.V31
            if connack.props:
                link.shared_available = bool(connack.props.get(_SHARED_SUBSCRIPTION_AVAILABLE, 1))
            return link, present
        except BaseException:
            sock.close()
            raise

    def subscribe(self, topics: list[str], confirm: bool = False) -> None:
        """Subscribe `topics` at QoS 2. What the broker cannot do for them is refused here, with what to do: a
        shared subscription where its CONNACK says it has none, and with `confirm` (--confirm) a grant below QoS 2."""
        shared = [t for t in topics if t.startswith("$share/")]
        if shared and not self.shared_available:
            raise RecorderError(
                f"the broker has no shared subscriptions (its CONNACK's Shared Subscription Available is 0): "
                f"{', '.join(shared)} would record nothing; subscribe a plain topic filter (docs/brokers.md)"
            )
        options = 2 | (_RETAIN_HANDLING_NEW_ONLY if self.version == codec.V5 else 0)
        self.send(codec.encode_subscribe(1, [(t, options) for t in topics], self.version))
        suback = self.expect(codec.SUBACK)
        granted = list(zip(topics, suback.codes, strict=False))
        unshared = [t for t, code in granted if code == _SHARED_SUBSCRIPTIONS_NOT_SUPPORTED]
        if unshared:
            raise RecorderError(
                f"the broker does not support shared subscriptions ({', '.join(unshared)}): subscribe a plain topic "
                "filter (docs/brokers.md)"
            )
        refused = [t for t, code in granted if code >= 0x80]
        if refused:
            raise RecorderError(f"the broker refused the subscription to {', '.join(refused)}; check its ACL")
        lower = [t for t, code in granted if code < 2]
        if lower and confirm:
            raise RecorderError(
                f"--confirm: the broker granted QoS {min(c for _, c in granted)} for {', '.join(lower)}, below the "
                "QoS 2 that end-to-end confirmation is judged at (RabbitMQ's MQTT plugin has no QoS 2): use a broker "
                "that supports QoS 2, or record without --confirm (docs/brokers.md)"
            )
        if lower:
            # QoS 2 promises cannot be audited for them.
            event(log, WARNING, "subscribed_below_qos2", topics=",".join(lower), audit="qos2-impossible")

    def expect(self, ptype: int, timeout: float = 10) -> Packet:
        """Wait for a CONNACK or SUBACK. A kept session's queued PUBLISH packets may come first, or right behind
        it in the same read: they wait in the backlog for the receive loop."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            packets = self._receive(deadline - time.monotonic())  # from the socket: the backlog is not due yet
            for i, packet in enumerate(packets):
                if packet.type == ptype:
                    self.backlog += packets[i + 1 :]
                    return packet
                if packet.type == codec.CONNACK or ptype == codec.CONNACK:
                    raise RecorderError(f"the broker sent {NAMES[packet.type]} where {NAMES[ptype]} was due")
                self.backlog.append(packet)
        raise RecorderError(f"no {NAMES[ptype]} from the broker within {timeout:.0f} s")

    def read(self, timeout: float) -> list[Packet]:
        """The packets that arrived (the backlog first), waiting up to `timeout` seconds for some."""
        if self.backlog:
            packets, self.backlog = self.backlog, []
            return packets
        return self._receive(timeout)

    def _receive(self, timeout: float) -> list[Packet]:
        ready, _, _ = select.select([self.sock], [], [], max(0.0, timeout))
        if not ready and not (isinstance(self.sock, ssl.SSLSocket) and self.sock.pending()):
            return []
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("the broker closed the connection")
        self.last_heard = time.monotonic()
        return list(self.decoder.packets(data))

    def send(self, data: bytes | bytearray) -> None:
        self.sock.sendall(data)
        self.last_sent = time.monotonic()

    def keep_alive(self) -> None:
        """PINGREQ when idle for half the keep-alive; give up after 1.5 keep-alives of silence."""
        now = time.monotonic()
        if now - self.last_heard > 1.5 * self.keepalive:
            raise ConnectionError(f"nothing from the broker for {now - self.last_heard:.0f} s")
        if now - self.last_sent > self.keepalive / 2:
            self.send(codec.encode_empty(codec.PINGREQ))

    def close(self, polite: bool) -> None:
        try:
            if polite:
                self.send(codec.encode_disconnect(version=self.version))
        except OSError:
            pass
        self.sock.close()


# What a reload applies while running, and what it names as needing a restart (every other setting).
_LIVE = (
    "topic", "stats_every", "log_format", "health_after", "retain_days", "retain_gb", "compact", "flush_seconds",
    "flush_rows", "confirm_every",
)  # fmt: skip
_RESTART = (
    "broker", "out", "client_id", "mqtt_version", "keepalive", "confirm", "confirm_topic", "username",
    "password_file", "tls", "cafile", "certfile", "keyfile", "metrics",
)  # fmt: skip


class Recorder:
    """The receive loop: deliveries into the store, acknowledgements after the store syncs, periodic commits."""

    def __init__(
        self,
        args: argparse.Namespace,
        broker: Destination,
        store: TelemetryStore,
        client_id: str,
        password: bytes | None,
    ) -> None:
        self.args = args
        self.store = store
        self.client_id = client_id
        self.password = password
        self.version = VERSIONS[args.mqtt_version]
        self.topics: list[str] = args.topic or ["sensors/#"]
        self.broker = broker
        self.tls = TLSConfig(args.cafile, args.certfile, args.keyfile) if args.tls or args.cafile else None
        self.stop = False
        self.link: BrokerLink | None = None
        self.connected_once = False
        self.retry_at = 0.0
        self.backoff = 0.5
        self.received = 0
        self.last_commit = time.monotonic()
        self.maintain_at = 0.0  # the store is maintained at start, then every MAINTAIN_EVERY
        self.maintained_at: float | None = None  # the wall time of the last maintenance pass that succeeded
        self.maintenance_failing: str | None = None  # why the last pass failed, if it did
        self.maintenance_failures = 0
        self.reload_ok = True  # the last SIGHUP's config loaded (dmqtt_recorder_config_last_reload_successful)
        # The configuration read again (the command line over --config), checked: SIGHUP applies it (reload()).
        self.reread: Callable[[], argparse.Namespace] | None = None
        self.store_broken: str | None = None  # the storage condition that stopped acknowledgements, if any
        self.commit_failing: str | None = None
        self.reload_at = 0.0
        self.confirmed_at = 0.0  # when the last round of confirmations went out
        self.confirmations = 0
        self.disconnected_since: float | None = time.monotonic()  # (health: the broker out of reach since)
        self.signals: list[int] = []  # signals not yet handled by the loop (the handler only queues them)
        self.watchdog = Watchdog()
        if store.unavailable is not None:
            self._store_failed(StoreWriteError(OSError(0, store.unavailable)))

    def run(self) -> None:
        stats_every = self.args.stats_every
        next_stats = time.monotonic() + stats_every if stats_every else None
        notify("READY=1", f"STATUS=recording {','.join(self.topics)} into {self.store.out}")
        while not self.stop:
            self.watchdog.pet()
            while self.signals:
                self._signal(self.signals.pop(0))
            if self.store_broken is not None:
                self._try_reload()
            elif self.link is None:
                self._connect()
            if self.link is not None:
                try:
                    self._serve(timeout=0.2)
                except StoreWriteError as exc:
                    self._store_failed(exc)
                except (OSError, CodecError) as exc:
                    self._drop(f"{exc}")
            else:
                time.sleep(0.2 if self.store_broken else min(0.2, max(0.0, self.retry_at - time.monotonic())))
            now = time.monotonic()
            if (
                self.store_broken is None
                and self.store.pending
                and (
                    now - self.last_commit >= self.args.flush_seconds or len(self.store.pending) >= self.args.flush_rows
                )
            ):
                self._commit()
            if self.store_broken is None:
                self._maintain()
            if self.args.stats_every != stats_every:  # a reload changed the period: from now
                stats_every = self.args.stats_every
                next_stats = now + stats_every if stats_every else None
            if next_stats is not None and now >= next_stats:
                self.report()
                next_stats = now + stats_every
        notify("STOPPING=1")
        if self.store_broken is None:
            self._commit()
        if self.link is not None:
            self.link.close(polite=True)
        self.report()

    RELOAD_EVERY = 2.0
    RECENT_S = 30.0  # a board with news this recently keeps getting confirmations, one per --confirm-every

    def _store_failed(self, exc: StoreWriteError) -> None:
        """The log could not store what arrived: acknowledge none of it (the connection goes without a word, so
        the broker keeps every unacknowledged delivery in the session), say so once, and wait for the disk."""
        if self.link is not None:
            self.link.close(polite=False)
            self.link = None
        if self.store_broken != str(exc):
            # Nothing is acknowledged that is not stored; the broker keeps the session's messages meanwhile.
            event(
                log, ERROR, "store_failed", error=str(exc), fix=f"free space in {self.store.out} (or make it writable)",
                retry_every=f"{self.RELOAD_EVERY:.0f}s",
            )  # fmt: skip
        self.store_broken = str(exc)
        self.reload_at = time.monotonic() + self.RELOAD_EVERY

    def _try_reload(self) -> None:
        if time.monotonic() < self.reload_at:
            return
        try:
            self.store.reload()
        except (OSError, StoreWriteError) as exc:
            self.reload_at = time.monotonic() + self.RELOAD_EVERY
            why = (exc.strerror if isinstance(exc, OSError) else None) or str(exc)
            if why != self.store_broken:
                event(log, WARNING, "store_still_failing", error=why)
                self.store_broken = why
            return
        # Storing and acknowledging again.
        event(log, INFO, "store_recovered", committed=self.store.recovered)
        self.store_broken = None
        self.commit_failing = None
        self.retry_at = 0.0

    def _connect(self) -> None:
        if time.monotonic() < self.retry_at:
            return
        try:
            link, present = BrokerLink.open(
                self.broker,
                self.tls,
                self.client_id,
                self.version,
                self.args.keepalive,
                self.args.username,
                self.password,
            )
            try:
                self._subscriptions(link, present)
            except BaseException:
                link.close(polite=False)
                raise
            self.link = link
            self.connected_once = True
            self.disconnected_since = None
            if self.store.ledger is not None:
                # Every board's newest confirmation again: one published before the broker lost it (a broker
                # killed before its persistence saved the retained message) must not be missed.
                self.store.ledger.dirty.update(self.store.ledger.devices)
            event(log, INFO, "connected", broker=self.broker, client_id=self.client_id, session_present=int(present))
            self.backoff = 0.5
        except (OSError, CodecError) as exc:
            self.retry_at = time.monotonic() + self.backoff
            # Retried for ever (a broker that restarts must not stop the recording). A broker not there before the
            # first connection is retried quietly (the start said once what to check: await_broker); anything
            # else (refused credentials, a certificate) and every outage after a connection is a warning, its
            # repeats folded by the log.
            unreachable = isinstance(exc, (ConnectionRefusedError, TimeoutError)) and not self.connected_once
            event(
                log, DEBUG if unreachable else WARNING, "connect_failed", broker=self.broker, error=str(exc),
                retry_in=f"{self.backoff:.1f}s",
            )  # fmt: skip
            self.backoff = min(self.backoff * 2, 10.0)

    def _subscriptions(self, link: BrokerLink, present: bool) -> None:
        """A kept session keeps its subscriptions: subscribe only when the session is new or the topics changed
        (subscribing again would have the broker resend retained messages), and drop filters no longer asked for."""
        path = self.store.state / "subscriptions"
        before = path.read_text().split("\n") if present and path.exists() else []
        if sorted(before) == sorted(self.topics):
            return
        gone = [t for t in before if t and t not in self.topics]
        if gone:
            link.send(codec.encode_unsubscribe(2, gone, self.version))
            link.expect(codec.UNSUBACK)
        link.subscribe(self.topics, confirm=bool(self.args.confirm))
        path.write_text("\n".join(sorted(self.topics)))
        event(log, INFO, "subscribed", topics=",".join(self.topics), unsubscribed=",".join(gone) or "-")

    def _drop(self, why: str) -> None:
        assert self.link is not None
        self.link.close(polite=False)
        self.link = None
        self.disconnected_since = time.monotonic()
        self.retry_at = time.monotonic() + 0.2
        event(log, WARNING, "disconnected", error=why)  # the persistent session keeps what arrives meanwhile

    def _serve(self, timeout: float) -> None:
        link = self.link
        assert link is not None
        acks: list[bytes | bytearray] = []
        for packet in link.read(timeout):
            if packet.type == codec.PUBLISH:
                self._on_publish(packet, acks)
            elif packet.type == codec.PUBREL:
                known = self.store.release(packet.pid)
                # MQTT 5.0: an id the recorder is not holding is answered 0x92 (Packet Identifier not found).
                reason = codec.SUCCESS if known or link.version != codec.V5 else codec.PACKET_ID_NOT_FOUND
                acks.append(codec.encode_ack(codec.PUBCOMP, packet.pid, reason, link.version))
            elif packet.type == codec.DISCONNECT:
                raise ConnectionError(f"the broker disconnected the recorder (reason 0x{packet.reason:02x})")
            elif packet.type != codec.PINGRESP:
                raise CodecError(f"unexpected {NAMES[packet.type]} from the broker", codec.PROTOCOL_ERROR)
        # The acknowledgements promise the broker that these deliveries are stored: make it true first.
        self.store.sync()
        for ack in acks:
            link.send(ack)
        self._confirm(link)  # after the sync: a confirmation names only what is durable
        link.keep_alive()

    def _confirm(self, link: BrokerLink) -> None:
        """At most once per --confirm-every: to each board with news, and to each that had news in the last
        RECENT_S seconds (a board whose confirmations were lost, or that is still walking its older boots, hears
        again), what the store holds of its messages, retained (QoS 0: a newer one follows, and a board
        subscribing gets the newest at once)."""
        ledger = self.store.ledger
        now = time.monotonic()
        if ledger is None or now - self.confirmed_at < self.args.confirm_every:
            return
        devices = sorted(ledger.dirty | ledger.recent(self.RECENT_S))
        if not devices:
            return
        self.confirmed_at = now
        stamp = stamp_now()
        ledger.dirty.clear()  # (a device with more news than one confirmation lists is dirty again after it)
        for dev in devices:
            topic = self.args.confirm_topic.replace("{dev}", dev)
            link.send(encode_publish(topic, ledger.confirmation(dev, stamp), 0, 0, True, version=link.version))
            self.confirmations += 1

    def _on_publish(self, packet: Packet, acks: list[bytes | bytearray]) -> None:
        received_at_us = time.time_ns() // 1000
        resent = None  # MQTT 3.1 and 3.1.1 cannot carry the mark
        if self.version == codec.V5:
            resent = marked_resent((packet.props or {}).get(codec.USER_PROPERTY))
        self.store.add(
            received_at_us, packet.topic, packet.qos, packet.dup, packet.retain, packet.pid, packet.payload, resent
        )
        self.received += 1
        # [MQTT-3.3.4-1]: PUBACK for QoS 1, PUBREC for QoS 2, nothing for QoS 0.
        if packet.qos == 1:
            acks.append(codec.encode_ack(codec.PUBACK, packet.pid, version=self.version))
        elif packet.qos == 2:
            acks.append(codec.encode_ack(codec.PUBREC, packet.pid, version=self.version))

    def _commit(self) -> None:
        try:
            self.store.commit()
        except StoreWriteError as exc:
            self._store_failed(exc)
        except OSError as exc:
            # The deliveries are still in the log (and acknowledged from there); the next commit writes them.
            if self.commit_failing != str(exc):
                # Deliveries stay in the log until Parquet can be written.
                event(log, ERROR, "commit_failed", error=str(exc), fix=f"free space in {self.store.out}")
                self.commit_failing = str(exc)
        else:
            if self.commit_failing is not None:
                event(log, INFO, "commit_recovered")
                self.commit_failing = None
        self.last_commit = time.monotonic()

    MAINTAIN_EVERY = 600.0  # seconds between maintenance passes (one closed day compacted a pass)

    def _maintain(self) -> None:
        """At start, then every MAINTAIN_EVERY, when the log holds no delivery (right after a commit, or while
        nothing arrives): days past --retain-days dropped, one closed day with several files compacted
        (TelemetryStore.maintain). A failure is said and tried again at the next pass; what was stored stays as it
        was (docs/telemetry-parquet.md). The metrics say when a pass last succeeded and whether the last failed."""
        if self.store.pending or time.monotonic() < self.maintain_at:
            return
        self.maintain_at = time.monotonic() + self.MAINTAIN_EVERY
        today = datetime.now(UTC).date().isoformat()
        try:
            limit = None if self.args.retain_gb is None else int(self.args.retain_gb * 1e9)
            done = self.store.maintain(
                today, self.args.retain_days, max_days=1 if self.args.compact else 0, retain_bytes=limit
            )
        except StoreWriteError as exc:
            self.maintenance_failing = str(exc)
            self.maintenance_failures += 1
            self._store_failed(exc)
        except (OSError, RecorderError) as exc:
            self.maintenance_failing = str(exc)
            self.maintenance_failures += 1
            event(log, ERROR, "maintenance_failed", error=str(exc), retry_in=f"{self.MAINTAIN_EVERY:.0f}s")
        else:
            self.maintained_at = time.time()
            self.maintenance_failing = None
            if done["compacted"] or done["dropped"]:
                event(log, INFO, "maintained", compacted_files=done["compacted"], dropped_days=done["dropped"])

    def _signal(self, signum: int) -> None:
        """A signal, in the loop: SIGINT and SIGTERM stop (the last rows committed, the counters said), SIGHUP
        (systemctl reload) reads the configuration again (reload()), SIGUSR1 says the counters; each is logged."""
        stopping = signum in (signal.SIGINT, signal.SIGTERM)
        action = "stop" if stopping else "reload" if signum == signal.SIGHUP else "counters"
        event(log, INFO, "signal", signal=signal.Signals(signum).name, action=action)
        if stopping:
            self.stop = True
        elif action == "reload":
            self.reload()
        else:
            self.report()

    def reload(self) -> None:
        """The configuration read again and what can change while running applied: the topics (the connection
        is closed politely and opened again, the persistent session keeping what arrives meanwhile, and the
        subscriptions follow), the periods, the log format, compaction and retention. What needs a restart
        (the broker, the store, the session's identity, TLS, the metrics address) is named, and kept as it runs.
        A configuration that does not load changes nothing (reload_failed)."""
        if self.reread is None:
            return
        try:
            new = self.reread()
        except HostBridgeError as exc:
            self.reload_ok = False
            event(log, ERROR, "reload_failed", error=str(exc), kept="everything")
            return
        self.reload_ok = True
        applied = [name for name in _LIVE if getattr(new, name) != getattr(self.args, name)]
        restart = [name for name in _RESTART if getattr(new, name) != getattr(self.args, name)]
        for name in applied:
            setattr(self.args, name, getattr(new, name))
        if "log_format" in applied:
            log_to_stdout(log.name, self.args.log_format)
        if "topic" in applied:
            self.topics = self.args.topic or ["sensors/#"]
            if self.link is not None:
                self.link.close(polite=True)  # (a clean DISCONNECT: the session queues what arrives meanwhile)
                self.link = None
                self.disconnected_since = time.monotonic()
                self.retry_at = 0.0
        event(
            log, WARNING if restart else INFO, "reloaded", applied=",".join(applied) or "-",
            needs_restart=",".join(restart) or "-",
        )  # fmt: skip

    def lag_s(self) -> float:
        """How long the oldest delivery not yet in Parquet has waited (0: none waits)."""
        pending = self.store.pending
        if not pending:
            return 0.0
        return max(0.0, time.time() - pending[0].received_at_us / 1e6)

    def report(self) -> None:
        s = self.store
        event(
            log, INFO, "progress", received=self.received, rows_written=s.rows_committed, files=s.files_committed,
            logged_not_written=len(s.pending), recorder_duplicates=s.recorder_dups,
            connected=int(self.link is not None), confirmations=self.confirmations,
        )  # fmt: skip
