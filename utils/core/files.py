"""Writing a file so that no reader ever sees a partial one."""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from pathlib import Path
from typing import Iterator


@contextlib.contextmanager
def atomic_target(target: Path) -> Iterator[Path]:
    """A temporary path beside `target` to write to: it replaces `target` in one step when the block
    succeeds, is removed when it fails. Unique per process and thread (concurrent writers never mix
    their bytes: the last complete file wins); it keeps the target's suffix (PyAV goes by it)."""
    target = Path(target)
    tmp = target.with_name(f".{target.stem}.{os.getpid()}.{threading.get_ident()}.tmp{target.suffix}")
    try:
        yield tmp
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_durably(target: Path, data: bytes) -> None:
    """`data` as `target`, whole or not at all, and on the disk when this returns: atomic, fsynced,
    the rename made durable (where folders can be opened)."""
    target = Path(target)
    with atomic_target(target) as partial, partial.open("wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    with contextlib.suppress(OSError):
        descriptor = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def free_bytes(folder: Path) -> int | None:
    """Bytes an unprivileged writer can still write in `folder`'s file system (`os.statvfs`), None if unknown."""
    try:
        stat = os.statvfs(folder)
    except (OSError, AttributeError):
        return None
    return stat.f_bavail * stat.f_frsize


def size_text(size: float | None) -> str:
    """`1.5 MiB`, `300 B`, `2.1 TiB` (`unknown` for None): the suite's one byte formatter (binary units)."""
    if size is None:
        return "unknown"
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024


def free_space_text(folder: Path) -> str:
    return f"{size_text(free_bytes(folder))} free in {folder}"
