"""Finding a benchmark's media files by name under a data root, wherever an archive put them.

Datasets on the Hub were repacked over time, so the same file may sit at the path a record
names, in a canonical folder, or under whatever nesting an archive carried. A benchmark's
resolver (in its own `data.py`) states its canonical places and which folders a kind of file
may live in; this module supplies what every resolver needs:

- `inside_root(value, where)`: a record's relative path (normalised), refused (MediaError naming the
  record) when it is absolute or climbs out with `..`: nothing outside the root is ever read.
- `FileIndex` / `index_for(root)`: every file under a root by base name, built once per root
  and process (one `os.scandir` walk; hidden files and folders such as `.cache` are skipped).
- `locate(root, relpath, canonical, accept)`: the canonical candidates first (one `stat`
  each, no walk), else the indexed files of that name that `accept` allows, ranked by how
  many trailing path parts they share with `relpath`; a tie between different files is an
  error naming them rather than a guess.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

from lmms_video_reasoning.utils.core.roots import MediaError

Accept = Callable[[Sequence[str]], bool]  # relative path parts (folders + name) -> may this file be used?


def inside_root(value: str, where: str) -> str:
    """`value` as a relative POSIX path (str) that stays under the root; MediaError otherwise.

    Backslashes count as separators (records written on Windows); empty and `.` parts are dropped.
    """
    text = str(value).replace("\\", "/").strip()
    parts = [part for part in text.split("/") if part not in ("", ".")]
    drive = len(text) > 1 and text[1] == ":"  # C:/... is absolute on Windows
    if not text or text.startswith("/") or drive or ".." in parts:
        raise MediaError(f"{where}: media path {value!r} leaves the data root (absolute or with '..'); "
                         "only paths inside the root are read. Fix the record or the annotation file")
    if not parts:
        raise MediaError(f"{where}: media path {value!r} names no file")
    return "/".join(parts)


@dataclass
class FileIndex:
    """Every (non-hidden) file under `root` by base name -> relative paths (POSIX, sorted)."""

    root: Path
    by_name: dict[str, list[str]] = field(default_factory=dict)
    files: int = 0

    @classmethod
    def build(cls, root: Path) -> "FileIndex":
        index = cls(Path(root))
        stack = [(str(root), "")]
        while stack:
            folder, prefix = stack.pop()
            try:
                entries = list(os.scandir(folder))
            except OSError:  # unreadable folder: its files are simply not found (and reported missing)
                continue
            for entry in entries:
                if entry.name.startswith("."):
                    continue
                rel = prefix + entry.name
                if entry.is_dir(follow_symlinks=False):
                    stack.append((entry.path, rel + "/"))
                elif entry.is_file():
                    index.by_name.setdefault(entry.name, []).append(rel)
                    index.files += 1
        for paths in index.by_name.values():
            paths.sort()
        return index

    def named(self, name: str) -> list[str]:
        return self.by_name.get(name, [])


_lock = threading.Lock()
_indexes: dict[str, FileIndex] = {}
_keys: dict[str, str] = {}  # root as given -> its real path (one index per real folder)


def index_for(root: Path) -> FileIndex:
    """The index of `root`, built on first use and kept for the process (see `forget`)."""
    given = str(root)
    with _lock:
        key = _keys.get(given)
        if key is None:
            key = _keys[given] = os.path.realpath(given)
        if key not in _indexes:
            _indexes[key] = FileIndex.build(Path(key))
        return _indexes[key]


def forget(root: Path | None = None) -> None:
    """Drop the index of `root` (or every index) after files were added or moved."""
    with _lock:
        if root is None:
            _indexes.clear()
        else:
            _indexes.pop(os.path.realpath(root), None)
        _keys.clear()


def _shared_tail(a: Sequence[str], b: Sequence[str]) -> int:
    count = 0
    for x, y in zip(reversed(a), reversed(b)):
        if x != y:
            break
        count += 1
    return count


def locate(root: Path, relpath: str, canonical: Iterable[str] = (), accept: Accept | None = None,
           what: str = "media file") -> Path | None:
    """The file `relpath` (from `inside_root`) stands for under `root`, or None when there is none.

    `canonical`: relative paths tried first, in order (the record's own path belongs here).
    Otherwise the files named like `relpath` anywhere under the root that `accept` allows,
    the one sharing the longest tail of folders with `relpath` winning; several different
    files tying for best is a MediaError naming them (the record cannot tell which it means).
    """
    base = str(root)
    for candidate in canonical:
        path = os.path.join(base, candidate)
        if os.path.isfile(path):
            return Path(path)
    wanted = str(relpath).split("/")
    scored = []
    for rel in index_for(root).named(wanted[-1]):
        parts = rel.split("/")
        if accept is None or accept(parts):
            scored.append((_shared_tail(parts, wanted), rel))
    if not scored:
        return None
    best = max(score for score, _rel in scored)
    winners = [rel for score, rel in scored if score == best]
    if len(winners) > 1 and best < len(wanted):
        sizes = {os.path.getsize(os.path.join(base, rel)) for rel in winners}
        if len(sizes) > 1:  # copies of one file are harmless; different files are not
            raise MediaError(f"{what} {relpath} is ambiguous under {root}: {', '.join(winners[:5])} all match it. "
                             "Remove the stray copies (or move the right one to its canonical place)")
    return Path(base) / winners[0]


@dataclass
class MediaKind:
    """One kind of media a benchmark's documents use, as `lmms-vr prepare` checks it.

    `items`: label (the canonical relative path) -> the tasks' own resolver for it (returns the
    path or None; a MediaError, e.g. a path leaving the root, counts as missing with its reason).
    `problem(path)`: why a present file is unusable (None when fine). `when_missing` /
    `when_unreadable`: what the tasks do about such a file (shown in `prepare`'s table).
    A required kind makes `prepare` fail when one is missing or unusable; `unusable_fails`
    (default: `required`) makes an unusable optional file fail it too (the tasks would stop).
    """

    name: str
    required: bool
    items: dict[str, Callable[[], Path | None]]
    problem: Callable[[Path], str | None]
    when_missing: str
    when_unreadable: str
    unusable_fails: bool | None = None
    list_missing: bool = False  # an optional kind whose absent files `prepare` lists (e.g. subtitles a question loses)

    @property
    def unusable_is_error(self) -> bool:
        return self.required if self.unusable_fails is None else self.unusable_fails


# --- verification: what `lmms-vr prepare --verify-only` and the run's preflight check ----------


@dataclass
class KindReport:
    kind: MediaKind
    present: int = 0
    missing: list[str] = field(default_factory=list)  # "label (reason)"
    unusable: list[str] = field(default_factory=list)

    @property
    def fails(self) -> bool:
        return bool((self.kind.required and self.missing) or (self.kind.unusable_is_error and self.unusable))


def verify(kinds: list[MediaKind], workers: int = 8) -> list[KindReport]:
    """Resolve and check every item of every kind, exactly as the tasks will. Resolving is an
    index look-up; the checks (decoding a first frame, which releases the GIL) run on `workers`
    threads, so a root of a thousand videos is checked in seconds."""
    from concurrent.futures import ThreadPoolExecutor

    reports = []
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for kind in kinds:
            report = KindReport(kind)
            found = []
            for label, resolve in kind.items.items():
                try:
                    path = resolve()
                except MediaError as exc:
                    report.missing.append(f"{label} ({exc})")
                    continue
                if path is None:
                    report.missing.append(label)
                else:
                    found.append(path)
            for path, problem in zip(found, pool.map(kind.problem, found)):
                if problem:
                    report.unusable.append(f"{path} ({problem})")
                else:
                    report.present += 1
            reports.append(report)
    return reports
