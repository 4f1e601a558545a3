"""`lmms-vr prepare BENCH --root DIR`: fetch a benchmark's data and check every media file.

Steps: download the annotation files and the media archives from the benchmark's Hugging
Face dataset with `huggingface_hub.snapshot_download` (resumable; only the files named by
the benchmark's `HUB_ANNOTATIONS` / `HUB_MEDIA_PATTERNS`), join split zips
(`x.z01 .. x.zip`, with Info-ZIP's `zip -s 0`) and extract every archive once (a stamp file
records it), then verify: each media file the annotations need is present and decodable.
The counts of present / missing / unreadable files are printed, and the exit status is 0
only when nothing is missing or unreadable.
"""

from __future__ import annotations

import importlib
import os
import re
import shutil
import subprocess
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from lmms_video_reasoning.utils.data import SOURCES, DataError, DataSource, video_problem
from lmms_video_reasoning.utils.files import atomic_target

BENCH_ALIASES = {"vr_bench": "vrbench"}


def benchmark_module(name: str):
    """The benchmark's `data` module (HUB_ANNOTATIONS, HUB_MEDIA_PATTERNS, media_files, ...)."""
    name = BENCH_ALIASES.get(name, name)
    return importlib.import_module(f"lmms_video_reasoning.{name}.data")


# --- download -------------------------------------------------------------------------

def download(source: DataSource, patterns: list[str], root: Path) -> None:
    """Fetch the files matching `patterns` from the dataset into `root` (resumable)."""
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError
    except ImportError:  # pragma: no cover - a dependency of the package
        raise DataError("huggingface_hub is not installed: pip install huggingface_hub") from None
    try:
        snapshot_download(source.hub_repo, repo_type="dataset", local_dir=str(root), allow_patterns=patterns)
    except GatedRepoError:
        raise DataError(
            f"{source.hub_repo} is gated: accept its terms on its Hugging Face page, then `huggingface-cli login` "
            "(or set HF_TOKEN) and rerun"
        ) from None
    except RepositoryNotFoundError:
        raise DataError(f"{source.hub_repo} not found or not visible with your token: check `huggingface-cli whoami`") from None
    except Exception as exc:
        first_line = str(exc).splitlines()[0] if str(exc) else ""
        raise DataError(
            f"download from {source.hub_repo} failed ({type(exc).__name__}: {first_line}). Rerun to resume; without "
            f"internet, copy the dataset by other means and run `lmms-vr prepare {source.benchmark} --root DIR --verify-only`"
        ) from None


# --- archives -------------------------------------------------------------------------

def _split_parts(archive: Path) -> list[Path]:
    """The `.z01, .z02, ...` parts of a split zip, in order (empty for a plain zip)."""
    parts = sorted(archive.parent.glob(archive.stem + ".z[0-9][0-9]*"), key=lambda p: int(p.suffix[2:]))
    return [p for p in parts if p.suffix[2:].isdigit()]


def join_split_zip(archive: Path) -> Path:
    """Join a split zip into one archive next to it (needs Info-ZIP `zip`)."""
    joined = archive.with_name(archive.stem + ".joined.zip")
    if joined.is_file():
        return joined
    if shutil.which("zip") is None:
        raise DataError(f"{archive} is a split zip; joining it needs Info-ZIP `zip` (apt-get install zip)")
    with atomic_target(joined) as tmp:
        proc = subprocess.run(["zip", "-s", "0", str(archive), "--out", str(tmp)], capture_output=True, text=True)
        if proc.returncode != 0:
            raise DataError(f"could not join split zip {archive} (zip exit {proc.returncode}: {proc.stderr.strip()[:300]}); "
                            "a part is missing or truncated: rerun the download")
    return joined


CHUNK = re.compile(r"^(?P<prefix>.+)_chunk_(?P<number>\d+)\.zip$")


def chunk_groups(root: Path) -> dict[Path, list[Path]]:
    """Zips cut into byte chunks (`video_chunk_1.zip, video_chunk_2.zip, ...`, CG-Bench's
    layout), by the archive they form, chunks in numeric order (the official unzip script
    merges them in directory order, which is not guaranteed to be numeric)."""
    groups: dict[Path, list[tuple[int, Path]]] = {}
    for path in root.rglob("*_chunk_*.zip"):
        match = CHUNK.match(path.name)
        if match:
            groups.setdefault(path.with_name(match["prefix"] + ".zip"), []).append((int(match["number"]), path))
    return {target: [p for _n, p in sorted(chunks)] for target, chunks in groups.items()}


def join_chunks(target: Path, chunks: list[Path]) -> Path:
    """Concatenate byte chunks into one zip next to them (written atomically)."""
    joined = target.with_name(target.stem + ".joined.zip")
    if not joined.is_file():
        with atomic_target(joined) as tmp, tmp.open("wb") as out:
            for chunk in chunks:
                with chunk.open("rb") as part:
                    shutil.copyfileobj(part, out, 16 << 20)
    return joined


def extract_archives(root: Path) -> list[Path]:
    """Extract every zip under `root` once (split zips and byte chunks joined first);
    return the archives extracted now."""
    done = []
    chunked = chunk_groups(root)
    chunk_files = {chunk for chunks in chunked.values() for chunk in chunks}
    plain = [p for p in root.rglob("*.zip") if p not in chunk_files]
    for archive in sorted(set(plain) | set(chunked)):
        if archive.name.endswith((".joined.zip", ".tmp.zip")):  # our own joins, finished or being written
            continue
        stamp = archive.with_name(archive.name + ".extracted")
        if stamp.exists():
            continue
        if archive in chunked:
            source = join_chunks(archive, chunked[archive])
        elif _split_parts(archive):
            source = join_split_zip(archive)
        else:
            source = archive
        try:
            with zipfile.ZipFile(source) as zf:
                zf.extractall(archive.parent)
        except zipfile.BadZipFile:
            raise DataError(f"{source} is not a valid zip (truncated download?): delete it and rerun prepare") from None
        if source != archive:
            source.unlink()  # the joined copy is as large as the parts: keep only what was extracted
        stamp.write_text("ok\n")
        done.append(archive)
    return done


# --- verification ---------------------------------------------------------------------

@dataclass
class MediaReport:
    present: int = 0
    missing: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.missing and not self.unreadable

    def summary(self) -> str:
        lines = [f"media: {self.present} present, {len(self.missing)} missing, {len(self.unreadable)} unreadable"]
        for label, items in (("missing", self.missing), ("unreadable", self.unreadable)):
            for item in items[:10]:
                lines.append(f"  {label}: {item}")
            if len(items) > 10:
                lines.append(f"  ... and {len(items) - 10} more {label}")
        return "\n".join(lines)


def index_by_name(root: Path) -> dict[str, Path]:
    """Every file under root by base name (archives were repacked: nesting varies)."""
    index: dict[str, Path] = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            index.setdefault(name, Path(dirpath) / name)
    return index


def readable(path: Path) -> bool:
    """A media file is usable: a decodable video, or (subtitles) any non-empty text."""
    if path.suffix.lower() == ".srt":
        return path.stat().st_size > 0  # bad bytes in subtitles are skipped when parsed
    return video_problem(path) is None


def verify_media(root: Path, relpaths: Iterable[str]) -> MediaReport:
    """Check each expected media file under root (found at its path or by its name)."""
    report = MediaReport()
    index = None
    for rel in sorted(set(relpaths)):
        path = root / rel
        if not path.is_file():
            index = index if index is not None else index_by_name(root)
            path = index.get(Path(rel).name)
        if path is None:
            report.missing.append(rel)
        elif not readable(path):
            report.unreadable.append(str(path))
        else:
            report.present += 1
    return report


def main(args) -> int:
    name = BENCH_ALIASES.get(args.benchmark, args.benchmark)
    source = SOURCES[name]
    module = benchmark_module(name)
    root = Path(args.root).expanduser().resolve()
    root.mkdir(parents=True, exist_ok=True)
    split = getattr(args, "split", "mini")
    if not args.verify_only:
        patterns = [*module.HUB_ANNOTATIONS, *module.HUB_MEDIA_PATTERNS]
        print(f"downloading {source.hub_repo} ({', '.join(patterns)}) into {root}")
        download(source, patterns, root)
        for archive in extract_archives(root):
            print(f"extracted {archive.relative_to(root)}")
    records = module.records_at(root, split=split)
    report = verify_media(root, module.media_files(records))
    print(report.summary())
    if hasattr(module, "optional_media_files"):  # e.g. CG-Bench clue clips and subtitles
        optional = verify_media(root, module.optional_media_files(records))
        print(f"optional media (used when present): {optional.present} present, {len(optional.missing)} absent, "
              f"{len(optional.unreadable)} unreadable")
    print(f"export {source.root_env}={root}" if report.ok else f"{source.root_env} root {root} is incomplete")
    return 0 if report.ok else 1
