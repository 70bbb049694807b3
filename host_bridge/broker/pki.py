"""A small certificate authority for brokers on loopback: `make demo` and the tests run Mosquitto with a TLS
listener whose certificate this signs, and boards and host tools verify it against this CA. openssl does the
work (`openssl ca`, which takes explicit validity dates, so tests can also make expired and not-yet-valid
certificates). Not for production keys: they are made unencrypted, in the folder given."""

from __future__ import annotations

import datetime
import subprocess
from pathlib import Path

from host_bridge.errors import HostBridgeError


class PkiError(HostBridgeError):
    """openssl is missing or refused to make a certificate."""


class CertificateAuthority:
    """A throwaway CA that signs broker and client certificates with chosen names and validity dates
    (`openssl ca`, which takes explicit start and end dates)."""

    def __init__(self, directory: Path, name: str = "test CA") -> None:
        self.dir = directory
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "index.txt").write_text("")
        (directory / "serial").write_text("1000\n")
        (directory / "ca.cnf").write_text(
            "[ca]\ndefault_ca = dflt\n[dflt]\n"
            f"dir = {directory}\ndatabase = $dir/index.txt\nserial = $dir/serial\nnew_certs_dir = $dir\n"
            "certificate = $dir/ca.pem\nprivate_key = $dir/ca.key\ndefault_md = sha256\npolicy = anything\n"
            "unique_subject = no\ncopy_extensions = copy\n[anything]\ncommonName = supplied\n"
        )
        self._openssl(
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "3",
            "-subj",
            f"/CN={name}",
        )
        self.ca = directory / "ca.pem"

    def _openssl(self, *args: str) -> None:
        try:
            done = subprocess.run(["openssl", *args], cwd=self.dir, capture_output=True, text=True)
        except FileNotFoundError:
            raise PkiError("openssl is not installed: run `make system-deps` (apt-get install openssl)") from None
        if done.returncode:
            raise PkiError(f"openssl {args[0]} failed: {done.stderr.strip()[-300:]}")

    def issue(
        self, name: str, common_name: str, dns: str | None = None, start: str | None = None, end: str | None = None
    ) -> tuple[Path, Path]:
        """(certificate, key) for `common_name` (a server's, with subjectAltNames DNS:`dns` and IP:127.0.0.1,
        when `dns`); dates as YYMMDDHHMMSSZ (default: from yesterday, for two days)."""
        ext = self.dir / f"{name}.ext"
        ext.write_text(f"subjectAltName=DNS:{dns},IP:127.0.0.1\n" if dns else "basicConstraints=CA:FALSE\n")
        self._openssl(
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            f"{name}.key",
            "-out",
            f"{name}.csr",
            "-subj",
            f"/CN={common_name}",
        )
        dates = ["-startdate", start or stamp(-1), "-enddate", end or stamp(2)]
        self._openssl(
            "ca",
            "-batch",
            "-config",
            "ca.cnf",
            "-in",
            f"{name}.csr",
            "-out",
            f"{name}.pem",
            "-notext",
            "-extfile",
            str(ext),
            *dates,
        )
        return self.dir / f"{name}.pem", self.dir / f"{name}.key"


def stamp(days: float) -> str:
    """A validity date `days` from now, in openssl's YYMMDDHHMMSSZ."""
    when = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=days)
    return when.strftime("%y%m%d%H%M%SZ")
