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
