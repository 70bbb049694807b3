"""Throwaway TLS certificates for tests that run Mosquitto with a TLS listener."""

from __future__ import annotations

import subprocess
from pathlib import Path


def make_certificates(directory: Path) -> tuple[Path, Path, Path]:
    """A throwaway CA and a broker certificate for 127.0.0.1, made with openssl."""

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=test CA")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "broker.key", "-out", "broker.csr", "-subj", "/CN=127.0.0.1")
    (directory / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", "broker.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", "broker.pem", "-days", "2", "-extfile", "san.ext")
    return directory / "ca.pem", directory / "broker.pem", directory / "broker.key"


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
        self._openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "3", "-subj", f"/CN={name}")
        self.ca = directory / "ca.pem"

    def _openssl(self, *args: str) -> None:
        subprocess.run(["openssl", *args], cwd=self.dir, check=True, capture_output=True)

    def issue(self, name: str, common_name: str, dns: str | None = None, start: str | None = None, end: str | None = None) -> tuple[Path, Path]:
        """(certificate, key) for `common_name` (a server's, with subjectAltNames DNS:`dns` and IP:127.0.0.1,
        when `dns`); dates as YYMMDDHHMMSSZ (default: from yesterday, for two days)."""
        ext = self.dir / f"{name}.ext"
        ext.write_text(f"subjectAltName=DNS:{dns},IP:127.0.0.1\n" if dns else "basicConstraints=CA:FALSE\n")
        self._openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={common_name}")
        dates = ["-startdate", start or _stamp(-1), "-enddate", end or _stamp(2)]
        self._openssl("ca", "-batch", "-config", "ca.cnf", "-in", f"{name}.csr", "-out", f"{name}.pem", "-notext", "-extfile", str(ext), *dates)
        return self.dir / f"{name}.pem", self.dir / f"{name}.key"


def _stamp(days: float) -> str:
    import datetime

    when = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=days)
    return when.strftime("%y%m%d%H%M%SZ")
