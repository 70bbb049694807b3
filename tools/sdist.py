"""One file out of a package's source distribution on PyPI, checked against the SHA-256 the benchmark pins: the
MicroPython code the benchmarks compare with or measure by (umqtt.simple, pystone) is fetched at bench time, not
kept in this repository."""

from __future__ import annotations

import hashlib
import io
import tarfile
import urllib.request
from pathlib import Path


def fetch_member(url: str, sha256: str, suffix: str, target: Path) -> Path:
    """Write the member of the sdist at `url` whose name ends with `suffix` to `target`."""
    with urllib.request.urlopen(url, timeout=60) as response:
        data = response.read()
    digest = hashlib.sha256(data).hexdigest()
    if digest != sha256:
        raise SystemExit(f"{url}: SHA-256 {digest}, expected {sha256}")
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        member = next(m for m in archive.getmembers() if m.name.endswith(suffix))
        source = archive.extractfile(member)
        assert source is not None
        target.write_bytes(source.read())
    return target
