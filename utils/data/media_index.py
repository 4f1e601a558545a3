"""Finding a benchmark's media files by name under a data root, wherever an archive put them.

Datasets on the Hub were repacked over time, so a file may sit at the path a record names, in a
canonical folder, or under whatever nesting an archive carried. A benchmark's resolver (its
`data.py`) states its canonical places and the folders a kind of file may live in; `locate` tries
those first, else the files of that name under the root (one walk per root and process), ranked by
the trailing folders they share with the record's path.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

from lmms_video_reasoning.utils.core.roots import MediaError

Accept = Callable[[Sequence[str]], bool]  # relative path parts (folders + name) -> may this file be used?


def leaves_root(path: str) -> bool:
    """A relative path that would leave its folder: absolute, a drive (`C:/`), or with `..`
    (backslashes count as separators: records and archives made on Windows)."""
    text = path.replace("\\", "/")
    return text.startswith("/") or (len(text) > 1 and text[1] == ":") or ".." in text.split("/")


def inside_root(value: str, where: str) -> str:
    """`value` as a relative POSIX path under the root (empty and `.` parts dropped); MediaError otherwise."""
    text = str(value).replace("\\", "/").strip()
    parts = [part for part in text.split("/") if part not in ("", ".")]
    if not text or leaves_root(text):
        raise MediaError(f"{where}: media path {value!r} leaves the data root (absolute or with '..'); "
                         "only paths inside the root are read. Fix the record or the annotation file")
    if not parts:
        raise MediaError(f"{where}: media path {value!r} names no file")
    return "/".join(parts)


def files_by_name(root: Path) -> dict[str, list[str]]:
    """Every (non-hidden) file under `root` by base name -> relative paths (POSIX, sorted)."""
    by_name: dict[str, list[str]] = {}
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
                by_name.setdefault(entry.name, []).append(rel)
    for paths in by_name.values():
        paths.sort()
    return by_name


_lock = threading.Lock()
_indexes: dict[str, dict[str, list[str]]] = {}  # one per real folder


def index_for(root: Path) -> dict[str, list[str]]:
    """`files_by_name(root)`, built on first use and kept for the process (see `forget`)."""
    key = os.path.realpath(root)
    with _lock:
        if key not in _indexes:
            _indexes[key] = files_by_name(Path(key))
        return _indexes[key]


def forget(root: Path | None = None) -> None:
    with _lock:
        if root is None:
            _indexes.clear()
        else:
            _indexes.pop(os.path.realpath(root), None)


def _shared_tail(a: Sequence[str], b: Sequence[str]) -> int:
    return next((n for n, (x, y) in enumerate(zip(reversed(a), reversed(b))) if x != y), min(len(a), len(b)))


def locate(root: Path, relpath: str, canonical: Iterable[str] = (), accept: Accept | None = None,
           what: str = "media file") -> Path | None:
    """The file `relpath` (from `inside_root`) stands for under `root`, or None: the first of
    `canonical` that exists, else the indexed file of that name `accept` allows sharing the longest
    tail of folders with `relpath` (MediaError when different files tie)."""
    base = str(root)
    for candidate in canonical:
        path = os.path.join(base, candidate)
        if os.path.isfile(path):
            return Path(path)
    wanted = str(relpath).split("/")
    scored = []
    for rel in index_for(root).get(wanted[-1], []):
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
    """One kind of media a benchmark's documents use, as `lmms-vr prepare` and the preflight check it.

    `items`: label -> the tasks' own resolver (the path or None; a MediaError counts as missing with
    its reason). `problem(path)`: why a present file is unusable. `when_missing` / `when_unreadable`:
    what the tasks do about such a file. A required kind fails when one is missing or unusable;
    `unusable_fails` makes an unusable optional file fail too.
    """

    name: str
    required: bool
    items: dict[str, Callable[[], Path | None]]
    problem: Callable[[Path], str | None]
    when_missing: str
    when_unreadable: str
    unusable_fails: bool = False
    list_missing: bool = False  # an optional kind whose absent files `prepare` lists (e.g. subtitles a question loses)


@dataclass
class KindReport:
    kind: MediaKind
    present: int = 0
    missing: list[str] = field(default_factory=list)  # "label (reason)"
    unusable: list[str] = field(default_factory=list)

    @property
    def fails(self) -> bool:
        unusable_fails = self.kind.required or self.kind.unusable_fails
        return bool((self.kind.required and self.missing) or (unusable_fails and self.unusable))


def verify(kinds: list[MediaKind]) -> list[KindReport]:
    """Resolve and check every item of every kind, as the tasks will; the checks (decoding a first
    frame, which releases the GIL) run on 8 threads."""
    from concurrent.futures import ThreadPoolExecutor

    reports = []
    with ThreadPoolExecutor(max_workers=8) as pool:
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
