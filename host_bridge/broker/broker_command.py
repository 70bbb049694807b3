"""`host-bridge broker`: Mosquitto configured as the project's tests and demo use it, for a board's or a bridge's
first minute: acknowledgements without Nagle's delay (`set_tcp_nodelay`), persistence, no queue limit for offline
sessions. It runs in the foreground until Ctrl-C (or SIGTERM), and says its address and its folder.

    host-bridge broker                                   # 127.0.0.1:1883, anonymous
    host-bridge broker --tls --user board-1:SECRET --user recorder:SECRET

With --tls it generates into --dir a CA (ca.pem: the boards' `tls.ca`), a broker certificate signed by it, a
password file of the --user entries and an ACL (host_bridge.broker.mosquitto.ACL): each client publishes only
under sensors/<its client id>/ and reads cmd/<its client id> and confirm/<its client id>; the user `recorder`
reads sensors/# and writes cmd/# and confirm/#. Boards on WiFi reach it only when it listens on the network
(--host 0.0.0.0)."""

from __future__ import annotations

import argparse
from pathlib import Path

from host_bridge.broker.mosquitto import ACL, Mosquitto, write_password_file
from host_bridge.broker.pki import CertificateAuthority, stamp
from host_bridge.errors import BrokerError
from host_bridge.processes import sigterm_as_ctrl_c


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=int, default=1883, help="TCP port (default: %(default)s)")
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        choices=("127.0.0.1", "0.0.0.0"),
        help="listen on loopback, or on every interface for boards on WiFi (default: %(default)s)",
    )
    parser.add_argument(
        "--dir",
        type=Path,
        default=Path("build/broker"),
        help="config, persistence, log, TLS files (default: %(default)s)",
    )
    parser.add_argument("--tls", action="store_true", help="a TLS listener, passwords and the per-board ACL")
    parser.add_argument(
        "--user", action="append", default=[], metavar="NAME:PASSWORD", help="a client allowed in (with --tls)"
    )
    parser.add_argument(
        "--tls-name", default="localhost", help="the broker certificate's DNS name (default: %(default)s)"
    )


def secured(args: argparse.Namespace) -> tuple[Path, tuple[Path, Path], tuple[str, ...]]:
    """For --tls: the CA (the boards' tls.ca), the broker's certificate and key, and the mosquitto.conf lines for
    the passwords and the ACL."""
    users = {}
    for entry in args.user:
        name, sep, password = entry.partition(":")
        if not (name and sep and password):
            raise BrokerError(f"--user {entry}: give NAME:PASSWORD")
        users[name] = password
    if not users:
        raise BrokerError("--tls needs at least one --user NAME:PASSWORD (a board's client id, or recorder)")
    tls_dir = args.dir / "tls"
    ca = CertificateAuthority(tls_dir, "host-bridge broker CA")
    cert = ca.issue("broker", args.tls_name, dns=args.tls_name, start=stamp(-1), end=stamp(365))
    passwords = write_password_file(args.dir / "passwords", users)
    acl = args.dir / "acl"
    acl.write_text(ACL)
    return ca.ca, cert, (f"password_file {passwords}", f"acl_file {acl}")


def run(args: argparse.Namespace) -> int:
    if args.user and not args.tls:
        raise BrokerError("--user goes with --tls (without it the broker takes anonymous clients)")
    ca, cert, options = secured(args) if args.tls else (None, None, ())
    broker = Mosquitto(
        args.dir, args.port, persistence=True, tls=cert, options=options, allow_anonymous=not args.tls, host=args.host
    )
    sigterm_as_ctrl_c()
    broker.start()
    try:
        print(f"broker: listening on {args.host}:{broker.port}{' (TLS)' if args.tls else ''}", flush=True)
        print(f"broker: config, log and persistence in {args.dir}", flush=True)
        if ca is not None:
            print(f"broker: the boards' CA is {ca}", flush=True)
        print("broker: Ctrl-C stops it", flush=True)
        assert broker.process is not None
        code = broker.process.wait()
        raise BrokerError(f"mosquitto exited ({code}); see {broker.log_path}")
    except KeyboardInterrupt:
        return 0
    finally:
        broker.stop()
