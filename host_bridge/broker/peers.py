"""The brokers the interop matrix runs the client against (docs/brokers.md), beside our own Mosquitto: each
installed from this machine's registries (`make broker-peers`: amqtt from PyPI and Aedes from npm into
build/brokers, RabbitMQ's MQTT plugin and ejabberd's mod_mqtt from Debian), started on 127.0.0.1 and a free port
with a config of its own in a work folder, and stopped by its pid. The Erlang brokers run without Erlang
distribution (no epmd, nothing listening but their MQTT port)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from host_bridge.broker.mosquitto import Mosquitto, free_port
from host_bridge.errors import BrokerError
from host_bridge.processes import register

REPO = Path(__file__).resolve().parents[2]
PEERS_DIR = REPO / "build" / "brokers"
AEDES_SCRIPT = Path(__file__).with_name("aedes_server.mjs")


class Peer:
    """A broker run for the matrix: `start()`, then clients reach it at `address`, then `stop()`. `versions`: the
    MQTT versions it speaks, as config.json spells them ("3.1.1", "5"); the matrix runs the others too, to see
    what the broker and the client say."""

    name = ""
    versions: tuple[str, ...] = ("3.1.1",)
    start_timeout = 30.0
    credentials: tuple[str, str] | None = None  # (user name, password) its clients must give, if any

    def __init__(self, workdir: Path) -> None:
        self.workdir = Path(workdir)
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = self.workdir / f"{self.name}.log"

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def command(self) -> tuple[list[str], dict[str, str]]:
        """The program and its added environment (after the work folder is made)."""
        raise NotImplementedError

    def installed(self) -> str | None:
        """None when the broker can run here; else what to run to install it."""
        return None

    def start(self) -> None:
        missing = self.installed()
        if missing is not None:
            raise BrokerError(f"{self.name} is not installed: {missing}")
        self.workdir.mkdir(parents=True, exist_ok=True)
        args, env = self.command()
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                args, stdout=log, stderr=subprocess.STDOUT, cwd=self.workdir, env={**os.environ, **env}
            )
        register(self.process, f"{self.name} on {self.address}", kind="broker")
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self.stop()  # (what it left: an Erlang broker's epmd)
                raise BrokerError(f"{self.name} exited at start; see {self.log_path}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise BrokerError(f"{self.name} did not accept connections on {self.address} within {self.start_timeout} s")

    def stop(self) -> None:
        """SIGTERM to the broker's process and every process under it (a start script may leave the broker a
        grandchild in a session of its own: ejabberdctl runs it through su), then SIGKILL to any left after 20 s."""
        if self.process is None:
            return
        ours = [self.process.pid, *_descendants(self.process.pid)]
        _signal(ours, signal.SIGTERM)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and any(_alive(pid) for pid in ours[1:]) | (self.process.poll() is None):
            time.sleep(0.1)
        _signal(ours, signal.SIGKILL)
        self.process.wait()
        self.process = None

    def version(self) -> str:
        """The broker's version, as its package says."""
        return ""


class MosquittoPeer(Peer):
    name = "mosquitto"
    versions = ("3.1.1", "5")

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir)
        self._broker = Mosquitto(self.workdir)
        self.port = self._broker.port

    def start(self) -> None:
        self._broker.start()
        self.port = self._broker.port

    def stop(self) -> None:
        self._broker.stop()

    def version(self) -> str:
        return _debian_version("mosquitto")


class AmqttPeer(Peer):
    """amqtt (PyPI), an asyncio broker in Python: MQTT 3.1.1 only, anonymous, in memory."""

    name = "amqtt"
    venv = PEERS_DIR / "amqtt-venv"

    def installed(self) -> str | None:
        return None if (self.venv / "bin" / "amqtt").exists() else "make broker-peers"

    def command(self) -> tuple[list[str], dict[str, str]]:
        config = self.workdir / "amqtt.yaml"
        config.write_text(
            "listeners:\n  default:\n    type: tcp\n"
            f"    bind: 127.0.0.1:{self.port}\n"
            "plugins:\n  amqtt.plugins.authentication.AnonymousAuthPlugin:\n    allow_anonymous: true\n"
        )
        return [str(self.venv / "bin" / "amqtt"), "-c", str(config)], {}

    def version(self) -> str:
        found = list((self.venv / "lib").glob("python3*/site-packages/amqtt-*.dist-info"))
        return found[0].name.removesuffix(".dist-info").split("-")[1] if found else ""


class AedesPeer(Peer):
    """Aedes (npm) on Node.js: MQTT 3.1.1 (and 3.1), in memory."""

    name = "aedes"
    home = PEERS_DIR / "aedes"

    def installed(self) -> str | None:
        if shutil.which("node") is None:
            return "apt-get install nodejs"
        return None if (self.home / "node_modules" / "aedes").is_dir() else "make broker-peers"

    def command(self) -> tuple[list[str], dict[str, str]]:
        return ["node", str(AEDES_SCRIPT), str(self.port), str(self.home)], {}

    def version(self) -> str:
        package = self.home / "node_modules" / "aedes" / "package.json"
        return str(json.loads(package.read_text()).get("version", "")) if package.exists() else ""


class ErlangPeer(Peer):
    """An Erlang broker. Its start scripts run Erlang helpers that start epmd, the port mapper, as a daemon: here
    it is a private one, on 127.0.0.1 and a port of its own, and stop() ends it after the broker (`epmd -kill`, which
    ends only the epmd on that port)."""

    start_timeout = 90.0

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir)
        self.epmd_port = free_port()

    def erlang_env(self) -> dict[str, str]:
        return {"ERL_EPMD_ADDRESS": "127.0.0.1", "ERL_EPMD_PORT": str(self.epmd_port), "HOME": str(self.workdir)}

    def stop(self) -> None:
        super().stop()
        epmd = shutil.which("epmd") or next(iter(sorted(Path("/usr/lib/erlang").glob("erts-*/bin/epmd"))), None)
        if epmd is not None:
            subprocess.run(
                [str(epmd), "-port", str(self.epmd_port), "-kill"], capture_output=True, timeout=10, check=False
            )


class RabbitMQPeer(ErlangPeer):
    """RabbitMQ (Debian's rabbitmq-server) with its MQTT plugin: MQTT 3.1 and 3.1.1 in this release."""

    name = "rabbitmq"

    def installed(self) -> str | None:
        return None if Path("/usr/lib/rabbitmq/bin/rabbitmq-server").exists() else "apt-get install rabbitmq-server"

    def command(self) -> tuple[list[str], dict[str, str]]:
        base = self.workdir
        (base / "rabbitmq.conf").write_text(
            f"listeners.tcp = none\nmqtt.listeners.tcp.default = 127.0.0.1:{self.port}\n"
            "mqtt.allow_anonymous = true\nloopback_users = none\n"
        )
        (base / "enabled_plugins").write_text("[rabbitmq_mqtt].\n")
        env = {
            "RABBITMQ_NODENAME": f"dmqtt{self.port}@localhost",
            "RABBITMQ_CONFIG_FILE": str(base / "rabbitmq.conf"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(base / "enabled_plugins"),
            "RABBITMQ_MNESIA_BASE": str(base / "mnesia"),
            "RABBITMQ_LOG_BASE": str(base / "log"),
            "RABBITMQ_LOGS": "-",
            "RABBITMQ_PID_FILE": str(base / "rabbitmq.pid"),
            # No distribution port open: the node needs none to serve MQTT.
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "-dist_listen false",
            **self.erlang_env(),
        }
        return ["/usr/lib/rabbitmq/bin/rabbitmq-server"], env

    def version(self) -> str:
        return _debian_version("rabbitmq-server")


class EjabberdPeer(ErlangPeer):
    """ejabberd (Debian) with mod_mqtt: MQTT 3.1.1 and 5.0."""

    name = "ejabberd"
    versions = ("3.1.1", "5")
    # Anonymous login (login_anon) still wants a user name and a password, any: without them, CONNACK 5.
    credentials = ("dmqtt", "any")

    def installed(self) -> str | None:
        if not Path("/usr/sbin/ejabberdctl").exists():
            return "apt-get install ejabberd"
        # Its control script runs the node as the user ejabberd, and only root or that user may start it.
        return None if os.geteuid() == 0 else "run as root (ejabberdctl switches to the user ejabberd)"

    def command(self) -> tuple[list[str], dict[str, str]]:
        base = self.workdir
        (base / "ejabberd.yml").write_text(
            "hosts:\n  - localhost\n"
            "loglevel: info\n"
            "listen:\n"
            f'  -\n    port: {self.port}\n    ip: "127.0.0.1"\n    module: mod_mqtt\n'
            'modules:\n  mod_mqtt:\n    access_publish:\n      "#":\n        - allow: all\n'
            '    access_subscribe:\n      "#":\n        - allow: all\n'
            "auth_method: [anonymous]\nanonymous_protocol: login_anon\nallow_multiple_connections: true\n"
        )
        env = {
            "EJABBERD_CONFIG_PATH": str(base / "ejabberd.yml"),
            "CONFIG_DIR": str(base),
            "LOGS_DIR": str(base / "log"),
            "SPOOL_DIR": str(base / "spool"),
            "EJABBERD_PID_PATH": str(base / "ejabberd.pid"),
            "ERLANG_NODE": f"dmqtt{self.port}@localhost",
            "ERL_OPTIONS": "-dist_listen false",
            **self.erlang_env(),
        }
        for folder in ("log", "spool"):
            (base / folder).mkdir(exist_ok=True)
        if os.geteuid() == 0:
            # ejabberdctl runs the node as the package's user, ejabberd: its folder must be that user's.
            import pwd

            user = pwd.getpwnam("ejabberd")
            for path in (base, *base.rglob("*")):
                os.chown(path, user.pw_uid, user.pw_gid)
            # And the folders above it, made here with mode 0700 (a temporary folder's), passable by that user.
            for parent in base.parents:
                mode = parent.stat().st_mode
                if mode & 0o001 or parent.stat().st_uid != os.geteuid():
                    break
                parent.chmod(mode | 0o011)
        return ["/usr/sbin/ejabberdctl", "foreground"], env

    def version(self) -> str:
        return _debian_version("ejabberd")


def _parents() -> dict[int, int]:
    """Every process's parent, by pid (from /proc)."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        found[int(stat.parent.name)] = int(fields[1])
    return found


def _descendants(pid: int) -> list[int]:
    parents = _parents()
    found: list[int] = []
    frontier = [pid]
    while frontier:
        children = [child for child, parent in parents.items() if parent in frontier]
        found += children
        frontier = children
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _signal(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def _debian_version(package: str) -> str:
    try:
        done = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True)
    except FileNotFoundError:
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


# Every broker of the matrix, by name, fastest first. The Paho test broker (eclipse/paho.mqtt.testing) is in no
# registry this machine reaches, so it is not among them (docs/brokers.md).
PEERS: dict[str, type[Peer]] = {
    "mosquitto": MosquittoPeer,
    "amqtt": AmqttPeer,
    "aedes": AedesPeer,
    "rabbitmq": RabbitMQPeer,
    "ejabberd": EjabberdPeer,
}
