"""`lmms-vr prepare BENCH --root DIR`: fetch a benchmark's data, extract it, and check it as the tasks will.

1. Download (unless `--verify-only` / `--skip-download`) the files the benchmark names
   (`HUB_ANNOTATIONS`, `HUB_MEDIA_PATTERNS`) with `huggingface_hub.snapshot_download` (resumable),
   after printing what is still to fetch and to unpack and checking it against the free disk.
2. Extract every archive under the root (`archives.py`), each member to the place the benchmark's
   `extraction_target` gives, within the `--max-ratio` and `--keep-free` limits. An archive is
   stamped done (`<root>/.lmms_vr_prepare/`) only once its members are in place with their sizes and
   CRCs; a stamp is void when the archive's files changed (size or mtime) or an extracted file went
   missing. `--delete-archives` removes a stamped archive (later runs do not download it again).
3. Verify with the benchmark's `media_kinds`, the very resolvers the tasks use: a table per media
   kind (present / missing / unusable, and what the tasks do about each), then the `export` line.
   Exit status 0 only when no required file is missing or unusable and every archive was extracted.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path

from lmms_video_reasoning.utils.data import archives
from lmms_video_reasoning.utils.data import media_index
from lmms_video_reasoning.utils.core import registry
from lmms_video_reasoning.utils.core.files import size_text
from lmms_video_reasoning.utils.data.media_index import KindReport, verify
from lmms_video_reasoning.utils.core.roots import SUBSET_MARKER, DataError, DataSource, hub_error

STAMP_DIR = ".lmms_vr_prepare"
HF_METADATA = Path(".cache") / "huggingface" / "download"  # huggingface_hub's local_dir bookkeeping


# --- stamps ---------------------------------------------------------------------------

def _stamp_path(root: Path, label: str) -> Path:
    return root / STAMP_DIR / (label.replace("/", "__").replace("*", "#") + ".json")


def _identity(root: Path, archive: archives.Archive) -> list:
    return [[p.relative_to(root).as_posix(), p.stat().st_size, p.stat().st_mtime_ns] for p in archive.parts]


def _read_stamp(path: Path) -> dict | None:
    try:
        stamp = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return stamp if isinstance(stamp, dict) and isinstance(stamp.get("targets"), dict) else None


def _targets_in_place(root: Path, stamp: dict) -> bool:
    return all((root / rel).is_file() and (root / rel).stat().st_size == size for rel, size in stamp["targets"].items())


def stamp_state(root: Path, archive: archives.Archive) -> str:
    """'done', 'new' (never extracted), 'changed' (archive files differ) or 'incomplete' (a file went missing)."""
    stamp = _read_stamp(_stamp_path(root, archive.label))
    if stamp is None:
        return "new"
    if stamp.get("parts") != _identity(root, archive):
        return "changed"
    return "done" if _targets_in_place(root, stamp) else "incomplete"


def extracted_parts(root: Path, deleted_only: bool = False) -> list[str]:
    """Archive files (root-relative) extracted earlier whose files are all in place (`deleted_only`:
    those deleted since, which the download skips)."""
    return [part[0] for stamp in _stamps(root) if (stamp.get("deleted") or not deleted_only) and _targets_in_place(root, stamp)
            for part in stamp.get("parts", [])]


def _stamps(root: Path) -> list[dict]:
    return [stamp for path in sorted((root / STAMP_DIR).glob("*.json")) if (stamp := _read_stamp(path)) is not None]


def _write_stamp(root: Path, label: str, stamp: dict) -> None:
    path = _stamp_path(root, label)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(stamp, indent=1) + "\n", encoding="utf-8")


# --- download -------------------------------------------------------------------------

def download(source: DataSource, files: list[str], root: Path) -> None:
    from huggingface_hub import snapshot_download

    try:
        snapshot_download(source.hub_repo, repo_type="dataset", local_dir=str(root), allow_patterns=files)
    except Exception as exc:
        raise hub_error(source, exc) from None


def fetch(source: DataSource, module, root: Path, limits: archives.Limits) -> None:
    from huggingface_hub import HfApi
    from huggingface_hub.utils import filter_repo_objects

    try:
        info = HfApi().dataset_info(source.hub_repo, files_metadata=True)
    except Exception as exc:  # network, gating, auth: each gets its own advice
        raise hub_error(source, exc) from None
    sizes = {s.rfilename: int(s.size or 0) for s in info.siblings or []}
    patterns = [*module.HUB_ANNOTATIONS, *module.HUB_MEDIA_PATTERNS]
    skip = extracted_parts(root, deleted_only=True)  # {path: size} of the files to have, but those extracted and deleted
    files = {name: sizes[name] for name in filter_repo_objects(sorted(sizes), allow_patterns=patterns, ignore_patterns=skip or None)}
    known = [*files, *skip]
    for pattern in module.HUB_ANNOTATIONS:
        if not any(fnmatch(name, pattern) for name in known):
            print(f"note: {pattern} is not in {source.hub_repo} on the Hub")
    if not any(fnmatch(name, pattern) for name in known for pattern in module.HUB_MEDIA_PATTERNS):
        print(f"note: no media archive in {source.hub_repo} matches {', '.join(module.HUB_MEDIA_PATTERNS)}")
    to_fetch = {name: size for name, size in files.items()
                if not ((root / name).is_file() and (root / name).stat().st_size == size)}
    done = set(extracted_parts(root))
    media = sum(size for name, size in files.items() if archives.is_archive_name(name) and name not in done)
    free = shutil.disk_usage(root).free
    print(f"{source.hub_repo}: {len(files)} file(s), {size_text(sum(files.values()))}; to download "
          f"{len(to_fetch)} ({size_text(sum(to_fetch.values()))}); unpacking the archives not yet extracted "
          f"needs about {size_text(media)} more; {size_text(free)} free")
    # every archive is downloaded before any is extracted (and deleted, with --delete-archives): the
    # disk must hold the download and the extraction together (hundreds of GB of archives, as much again unpacked)
    download_bytes = sum(to_fetch.values())
    if download_bytes + media + limits.keep_free > free:
        raise DataError(f"not enough free disk under {root}: the download needs {size_text(download_bytes)}, "
                        f"extracting the archives about {size_text(media)} more ({size_text(download_bytes + media)} "
                        f"in all), {size_text(limits.keep_free)} must stay free (--keep-free) and "
                        f"{size_text(free)} is free; free space or choose another --root, then rerun (nothing was downloaded)")
    if to_fetch:
        download(source, sorted(files), root)


# --- extraction -----------------------------------------------------------------------

@dataclass
class ExtractionReport:
    extracted: list[str] = field(default_factory=list)
    up_to_date: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # one message each


def _delete_archive(root: Path, archive: archives.Archive) -> None:
    """Delete an extracted archive (and huggingface_hub's notes on it); its stamp says so."""
    for part in archive.parts:
        rel = part.relative_to(root).as_posix()
        for extra in (root / HF_METADATA / f"{rel}.metadata", root / HF_METADATA / f"{rel}.lock"):
            extra.unlink(missing_ok=True)
        part.unlink(missing_ok=True)
    stamp = _read_stamp(_stamp_path(root, archive.label))
    if stamp is not None:
        _write_stamp(root, archive.label, {**stamp, "deleted": True})
        print(f"deleted {archive.label} (extracted and verified)")


def extract_all(root: Path, module, limits: archives.Limits, delete_archives: bool = False) -> ExtractionReport:
    report = ExtractionReport()
    for archive in archives.find_archives(root):
        state = stamp_state(root, archive) if not archive.problems else "new"
        if state == "done":
            report.up_to_date.append(archive.label)
        else:
            try:
                _extract(root, archive, module, limits, state)
            except archives.ArchiveError as exc:
                report.failed.append(str(exc))
                print(f"error: {exc}")
                continue
            report.extracted.append(archive.label)
            print(f"extracted {archive.label}")
        if delete_archives:
            _delete_archive(root, archive)
    media_index.forget(root)
    return report


def _extract(root: Path, archive: archives.Archive, module, limits: archives.Limits, state: str) -> None:
    """Extract one archive (its files whose content changed, when `state` is "changed") and stamp it done."""
    plan = archives.plan(archive, module.extraction_target)
    # {target: CRC} of the files the other archives' finished extractions wrote (their stamps)
    plan.verified = {t: c for stamp in _stamps(root) if stamp.get("archive") != archive.label
                     for t, c in (stamp.get("crcs") or {}).items() if isinstance(c, int)}
    if state == "changed":  # files whose content the new copy changes (by its CRCs) are written again
        crcs = (_read_stamp(_stamp_path(root, archive.label)) or {}).get("crcs", {})
        plan.rewrite = frozenset(t for m, t in plan.entries if crcs.get(t) != m.crc)
        print(f"{archive.label} changed since it was extracted: extracting it again ({len(plan.rewrite)} file(s) differ)")
    archives.refuse_conflicts(plan, root)  # before the space check: its fix comes first
    need = archives.check_space(plan, root, limits)
    print(f"extracting {archive.label} ({archive.kind}, {len(plan.entries)} file(s), {size_text(plan.declared)}; "
          f"{size_text(need)} still to write, {size_text(shutil.disk_usage(root).free)} free)")
    sizes = archives.extract(plan, root)
    _write_stamp(root, archive.label, {"archive": archive.label, "parts": _identity(root, archive), "targets": sizes,
                                       "crcs": {target: member.crc for member, target in plan.entries}})


# --- verification ---------------------------------------------------------------------

def declared_subset(root: Path) -> str:
    """Why `root` holds part of a release on purpose (its `SUBSET_MARKER`), or ""."""
    try:
        marker = json.loads((root / SUBSET_MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""
    return str(marker.get("subset") or "a declared subset") if isinstance(marker, dict) else "a declared subset"


def release_check(module, root: Path, records: list[dict], split: str, subset: bool = False) -> tuple[str, bool]:
    """(a line on the root's record counts against the release's, True when they agree or a subset is
    declared: `--subset`, or `SUBSET_MARKER`). A file cut at a record boundary parses: only counts show it."""
    release = getattr(module, "RELEASE", {})
    expected = release.get(split) or release.get("all")
    if expected is None or not hasattr(module, "release_counts"):
        return "", True
    questions, videos = module.release_counts(records)
    name = f"{module.SOURCE.benchmark}" + (f" {split}" if split in release else "")
    have = f"{questions:,} questions on {videos:,} videos"
    if (questions, videos) == tuple(expected):
        return f"records: {have}, as the {name} release", True
    reason = "--subset" if subset else declared_subset(root)
    if reason:
        return f"records: {have} (the {name} release has {expected[0]:,} on {expected[1]:,}; a subset: {reason})", True
    return (f"error: records: {have}, but the {name} release has {expected[0]:,} questions on {expected[1]:,} videos: "
            f"the annotation file looks cut or is another version. Fetch it again with `lmms-vr prepare "
            f"{module.SOURCE.benchmark} --root {root}`, or pass --subset if this root holds part of the release on purpose"), False


def _actions(kind: media_index.MediaKind) -> str:
    if kind.when_missing == kind.when_unreadable:
        return kind.when_missing
    return f"missing -> {kind.when_missing}; unusable -> {kind.when_unreadable}"


def table(reports: list[KindReport]) -> str:
    """The per-kind table and up to 10 examples of each gap (absent optional files only counted,
    unless `MediaKind.list_missing`)."""
    head = ("media", "required", "needed", "present", "missing", "unusable", "what the tasks do about a missing / unusable file")
    rows = [head] + [(r.kind.name, "yes" if r.kind.required else "no", str(len(r.kind.items)), str(r.present),
                      str(len(r.missing)), str(len(r.unusable)), _actions(r.kind))
                     for r in reports]
    widths = [max(len(row[i]) for row in rows) for i in range(len(head) - 1)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[-1] for row in rows]
    for r in reports:
        for label, items in ((("missing", r.missing),) if r.kind.required or r.kind.list_missing else ()) + (("unusable", r.unusable),):
            for item in items[:10]:
                lines.append(f"  {r.kind.name} {label}: {item}")
            if len(items) > 10:
                lines.append(f"  ... and {len(items) - 10} more {r.kind.name} {label}")
    return "\n".join(lines)


# --- command --------------------------------------------------------------------------

def main(args) -> int:
    module = registry.get(args.benchmark).data()
    source = module.SOURCE
    if args.benchmark != source.benchmark:  # an alias (e.g. a task-style name): say the canonical name once
        print(f"note: {args.benchmark} is another name of {source.benchmark}: `lmms-vr prepare {source.benchmark}`")
    root = Path(args.root).expanduser().resolve()
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DataError(f"cannot use --root {root}: {exc.strerror or exc}") from None
    try:
        limits = archives.Limits(max_ratio=args.max_ratio, keep_free=archives.parse_size(args.keep_free))
    except ValueError as exc:
        raise DataError(f"--keep-free: {exc}") from None
    extraction = ExtractionReport()
    try:
        if not args.verify_only:
            if not args.skip_download:
                fetch(source, module, root, limits)
            extraction = extract_all(root, module, limits, args.delete_archives)
        else:
            pending = [a.label for a in archives.find_archives(root) if stamp_state(root, a) != "done"]
            if pending:
                print(f"note: {len(pending)} archive(s) not extracted yet ({', '.join(pending[:3])}): "
                      f"run `lmms-vr prepare {source.benchmark} --root {root} --skip-download`")
        records = module.records_at(root, split=args.split)
        reports = verify(module.media_kinds(root, records))
    except OSError as exc:  # permissions, a vanished file: a message, not a traceback
        raise DataError(f"{getattr(exc, 'filename', None) or root}: {exc.strerror or exc}") from None
    print(table(reports))
    for report in reports:  # an optional file a question loses (e.g. its subtitles): every one, in a file
        if report.kind.list_missing and report.missing:
            listing = root / STAMP_DIR / f"missing_{report.kind.name.replace(' ', '_')}.txt"
            listing.parent.mkdir(parents=True, exist_ok=True)
            listing.write_text("".join(f"{item}\n" for item in report.missing), encoding="utf-8")
            print(f"{len(report.missing)} {report.kind.name} missing ({report.kind.when_missing}): all listed in {listing}")
    counts, counts_ok = release_check(module, root, records, args.split, args.subset)
    if counts:
        print(counts)
    ok = not extraction.failed and not any(r.fails for r in reports) and counts_ok
    if ok:
        print(f"export {source.root_env}={root}")
    else:
        print(f"{source.root_env} root {root} is incomplete (see above); once fixed: export {source.root_env}={root}")
    return 0 if ok else 1
