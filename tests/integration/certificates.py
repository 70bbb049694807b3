"""Throwaway TLS certificates for tests that run Mosquitto with a TLS listener (host_bridge.broker.pki does the
work)."""

from __future__ import annotations

from pathlib import Path

from host_bridge.broker.pki import CertificateAuthority


def make_certificates(directory: Path) -> tuple[Path, Path, Path]:
    """A throwaway CA and a broker certificate for 127.0.0.1 (and localhost): (CA, certificate, key)."""
    ca = CertificateAuthority(directory)
    cert, key = ca.issue("broker", "127.0.0.1", dns="localhost")
    return ca.ca, cert, key
