"""Writing a file so that no reader ever sees a partial one."""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path
from typing import Iterator


@contextlib.contextmanager
def atomic_target(target: Path) -> Iterator[Path]:
    """Yield a temporary path beside `target` to write to; when the block succeeds it replaces
    `target` in one step (`os.replace`), when it fails it is removed.

    The temporary name is unique per process and thread, so concurrent writers of the same
    target never mix their bytes (the last complete file wins), and it keeps the target's
    suffix (tools such as `zip --out` and PyAV go by it).
    """
    target = Path(target)
    tmp = target.with_name(f".{target.stem}.{os.getpid()}.{threading.get_ident()}.tmp{target.suffix}")
    try:
        yield tmp
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()
