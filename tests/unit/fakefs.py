"""A file system with LittleFS's power-cut semantics, for the file journal's cut-at-every-operation tests on
CPython: what a file holds is what was last committed (flush, close; the rename of a whole file is atomic);
writes since are lost with the power. Each commit, rename and remove is an operation; a power cut armed at the
Nth raises PowerCut there, the operation not done (LittleFS's commit is atomic: before or after, never half)."""

from __future__ import annotations

from typing import Any

from tests.unit.nor import PowerCut


class FakeFS:
    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.ops = 0
        self.cut_at = 0
        # What the cut landed in: ("commit", the first byte written since the file's last commit: a record's
        # type), ("rename", -1), ("remove", -1), ("work", -1).
        self.cut_op: tuple[str, int] | None = None

    def work(self, what: str) -> None:
        """An operation of the application's own (a handler writing its effect): counted, and cut like one."""
        self.tick(what, ("work", -1))

    def tick(self, what: str, op: tuple[str, int]) -> None:
        self.ops += 1
        if self.ops == self.cut_at:
            self.cut_op = op
            raise PowerCut(what)

    def open(self, path: str, mode: str = "rb") -> FakeFile:
        if "r" in mode and path not in self.files:
            raise OSError(2, "ENOENT")
        if "w" in mode:
            self.files[path] = b""
        return FakeFile(self, path)

    def remove(self, path: str) -> None:
        if path not in self.files:
            raise OSError(2, "ENOENT")
        self.tick(f"remove {path}", ("remove", -1))
        del self.files[path]

    def rename(self, old: str, new: str) -> None:
        if old not in self.files:
            raise OSError(2, "ENOENT")
        self.tick(f"rename {old}", ("rename", -1))
        self.files[new] = self.files.pop(old)


class FakeFile:
    def __init__(self, fs: FakeFS, path: str) -> None:
        self.fs, self.path = fs, path
        self.data = bytearray(fs.files[path])
        self.pos = 0
        self.first_written = -1  # the first byte written since the last commit

    def seek(self, pos: int) -> None:
        self.pos = pos

    def read(self, n: int) -> bytes:
        out = bytes(self.data[self.pos : self.pos + n])
        self.pos += len(out)
        return out

    def readinto(self, buf: Any) -> int:
        out = self.read(len(buf))
        buf[: len(out)] = out
        return len(out)

    def write(self, data: Any) -> int:
        data = bytes(data)
        if self.first_written < 0 and data:
            self.first_written = data[0]
        end = self.pos + len(data)
        if end > len(self.data):
            self.data.extend(b"\0" * (end - len(self.data)))
        self.data[self.pos : end] = data
        self.pos = end
        return len(data)

    def flush(self) -> None:
        self.fs.tick(f"commit {self.path}", ("commit", self.first_written))
        self.fs.files[self.path] = bytes(self.data)
        self.first_written = -1

    def close(self) -> None:
        self.flush()

    def __enter__(self) -> FakeFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
