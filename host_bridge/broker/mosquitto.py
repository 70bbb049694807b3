"""A Mosquitto broker of our own: started in the foreground on 127.0.0.1 and a free port, with its own config
file and (optionally) persistence, and stopped by its pid. Used by the demo, the tests and the bench."""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

from host_bridge.errors import BrokerError
from host_bridge.processes import register


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def mosquitto_executable() -> str:
    found = shutil.which("mosquitto") or ("/usr/sbin/mosquitto" if os.path.exists("/usr/sbin/mosquitto") else None)
    if not found:
        raise BrokerError("mosquitto is not installed: run `make system-deps` (apt-get install mosquitto)")
    return found


# The access rules of a broker that checks identity (`host-bridge broker --tls`, the demo's): each board publishes
# only under sensors/<its client id>/ and reads its commands and its confirmations; the user `recorder` reads
# every board's telemetry, writes commands, and is the only one that may write confirmations (a board that forged
# another's confirmation could make it give up messages the store never had: docs/confirmation.md).
ACL = (
    "user recorder\ntopic read sensors/#\ntopic write cmd/#\ntopic write confirm/#\n\n"
    "pattern write sensors/%c/#\npattern read cmd/%c\npattern read confirm/%c\n"
)


def write_password_file(path: Path, users: dict[str, str]) -> Path:
    """A Mosquitto password file (hashed by mosquitto_passwd) for `users` (name -> password)."""
    tool = shutil.which("mosquitto_passwd") or "/usr/bin/mosquitto_passwd"
    path.unlink(missing_ok=True)
    for i, (user, password) in enumerate(users.items()):
        try:
            done = subprocess.run(
                [tool, "-b", *(["-c"] if i == 0 else []), str(path), user, password], capture_output=True, text=True
            )
        except FileNotFoundError:
            raise BrokerError(
                "mosquitto_passwd is not installed: run `make system-deps` (apt-get install mosquitto)"
            ) from None
        if done.returncode:
            raise BrokerError(f"mosquitto_passwd failed for {user}: {done.stderr.strip()}")
    return path


class Mosquitto:
    def __init__(
        self,
        workdir: Path,
        port: int = 0,
        persistence: bool | str = False,
        tls: tuple[Path, Path] | None = None,
        options: tuple[str, ...] = (),
        allow_anonymous: bool = True,
        host: str = "127.0.0.1",
        tls_listener: tuple[Path, Path] | None = None,
    ) -> None:
        """`options`: further mosquitto.conf lines (e.g. "max_packet_size 200", "password_file PATH"); `host`: the
        address it listens on (127.0.0.1; 0.0.0.0 only for boards on a real network, never in tests);
        `tls_listener`: (certificate, key) of a second listener, TLS, beside a plain one (`tls_address`)."""
        self.workdir = Path(workdir)
        self.host = host
        self.options = options
        self.allow_anonymous = allow_anonymous
        self.port = port or free_port()
        self._port_chosen_here = not port  # a free port taken by another process first may be swapped for one
        self.persistence = persistence
        self.tls = tls  # (certificate, key) for a TLS listener
        self.tls_listener = tls_listener
        self.tls_port = free_port() if tls_listener else 0
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = self.workdir / "mosquitto.log"

    @property
    def client_host(self) -> str:
        """Where a client on this machine reaches it (loopback when it listens on every interface)."""
        return "127.0.0.1" if self.host == "0.0.0.0" else self.host

    @property
    def address(self) -> str:
        return f"{self.client_host}:{self.port}"

    @property
    def tls_address(self) -> str:
        """The second, TLS listener's address (tls_listener)."""
        if not self.tls_port:
            raise BrokerError("this broker has no second TLS listener (tls_listener)")
        return f"{self.client_host}:{self.tls_port}"

    def write_config(self) -> Path:
        self.workdir.mkdir(parents=True, exist_ok=True)
        lines = [
            f"listener {self.port} {self.host}",
            f"allow_anonymous {'true' if self.allow_anonymous else 'false'}",
            "log_dest stderr",
            "log_type error",
            "log_type warning",
            "log_type notice",
            # Queue QoS 1/2 messages for an offline persistent session up to a million (Mosquitto's default is
            # 1,000): a test that kills a subscriber loses nothing by configuration, and a session nobody comes back
            # to (a recorder retired without `record --retire`) does not grow without bound. Sessions unused for
            # 30 days are dropped.
            "max_queued_messages 1000000",
            "persistent_client_expiration 30d",
            # Mosquitto leaves Nagle on for its own small packets by default: acks then wait for the next segment
            # (a window of 8 QoS 1 messages over a 10 ms round trip: 489 msg/s with the default, 683 with this).
            "set_tcp_nodelay true",
        ]
        if self.tls is not None:
            lines += [f"certfile {self.tls[0]}", f"keyfile {self.tls[1]}"]
        if os.geteuid() == 0:
            # Started as root, Mosquitto would switch to the "mosquitto" user and lose access to our files.
            lines.append(f"user {getpass.getuser()}")
        if self.tls_listener is not None:
            lines += [f"listener {self.tls_port} {self.host}"]
            lines += [f"certfile {self.tls_listener[0]}", f"keyfile {self.tls_listener[1]}"]
        lines += list(self.options)
        if self.persistence == "every-change":
            # Saved after every queued message or subscription change, the nearest Mosquitto comes to durable:
            # a SIGKILL can still lose what was acknowledged in the moment before the save.
            lines += [
                "persistence true",
                f"persistence_location {self.workdir}/",
                "autosave_on_changes true",
                "autosave_interval 1",
            ]
        elif self.persistence:
            lines += ["persistence true", f"persistence_location {self.workdir}/", "autosave_interval 1"]
        conf = self.workdir / "mosquitto.conf"
        conf.write_text("\n".join(lines) + "\n")
        return conf

    def start(self, timeout: float = 10.0) -> None:
        for attempt in range(3):
            seen = self.log_path.stat().st_size if self.log_path.exists() else 0
            try:
                self._start(timeout)
                self._port_chosen_here = False  # restarts keep the address clients know
                return
            except BrokerError:
                # A port found free can be taken by another process (a parallel test's broker) before mosquitto
                # binds it: at a first start on a port chosen here, take another one.
                with open(self.log_path, "rb") as log:
                    log.seek(seen)
                    taken = b"Address already in use" in log.read()
                if not (taken and self._port_chosen_here and attempt < 2):
                    raise
                self.port = free_port()

    def _start(self, timeout: float) -> None:
        conf = self.write_config()
        log = open(self.log_path, "ab")
        # Restarted from helper threads in tests (a timer that disturbs a run): no parent-death signal, which
        # would follow the starting thread. Stopped by its owner; the bench's plugin checks that.
        self.process = subprocess.Popen([mosquitto_executable(), "-c", str(conf)], stdout=log, stderr=log)
        register(self.process, f"mosquitto on {self.address}", kind="broker")
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self.process = None
                raise BrokerError(f"mosquitto exited at start; see {self.log_path}")
            try:
                with socket.create_connection((self.client_host, self.port), timeout=0.2):
                    time.sleep(0.05 if self.tls else 0)  # let a TLS listener finish its set-up
                    return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise BrokerError(f"mosquitto did not accept connections on {self.address} within {timeout} s")

    def stop(self) -> None:
        """Terminate our broker (by its pid) and wait; persistence is saved on a clean stop."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def kill(self) -> None:
        """SIGKILL: no clean save, as a crash or a power cut of the broker's host."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self.process = None

    def __enter__(self) -> Mosquitto:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
