"""The zip archives datasets ship as, read in place: nothing joined on disk, nothing prompted.

Three shapes occur on the Hub: a complete zip (`video.zip`, a new-style `video_chunk_07.zip`);
byte slices of one zip (`<prefix>_chunk_1.zip`, `_2`, ...: only their concatenation is a zip);
an Info-ZIP split set (`x.z01`, ..., `x.zip`; member offsets relative to their part; Python's
`zipfile` refuses such sets when ZIP64). `find_archives(root)` groups the files and tells the
shapes apart by each file's end record; every shape is read through one view of its parts in
order (`Concatenation`) by a small central-directory reader (ZIP64 included).

Extraction (`plan`, `refuse_conflicts`, `check_space`, `extract`) writes each member where the
benchmark's `target_of` says, whole and CRC-checked or not at all, and never replaces a file in
place whose content differs: such an archive is refused before anything of it is written.
"""

from __future__ import annotations

import errno
import io
import re
import shutil
import struct
import zlib
from bisect import bisect_right
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Callable, Mapping

from lmms_video_reasoning.utils.core.roots import DataError
from lmms_video_reasoning.utils.core.files import atomic_target, size_text
from lmms_video_reasoning.utils.data.media_index import files_by_name, leaves_root


class ArchiveError(DataError):
    """An archive cannot be extracted safely; the message names it and says what to do."""


EOCD, EOCD64, LOCATOR64 = b"PK\x05\x06", b"PK\x06\x06", b"PK\x06\x07"
CENTRAL, LOCAL = b"PK\x01\x02", b"PK\x03\x04"
BLOCK = 1 << 20

CHUNK_NAME = re.compile(r"^(?P<prefix>.+)_chunk_(?P<number>\d+)\.zip$")
SPLIT_PART = re.compile(r"^(?P<stem>.+)\.z(?P<number>\d{2,})$")


def is_archive_name(name: str) -> bool:
    base = name.rsplit("/", 1)[-1]
    return base.lower().endswith(".zip") or SPLIT_PART.match(base) is not None


class Concatenation:
    """A read-only view of several files one after another, read by offset."""

    def __init__(self, paths: list[Path]):
        self.paths = [Path(p) for p in paths]
        self.starts = [0]
        for path in self.paths:
            self.starts.append(self.starts[-1] + path.stat().st_size)
        self.size = self.starts[-1]
        self._handles: dict[int, io.BufferedReader] = {}

    def read_at(self, offset: int, length: int) -> bytes:
        chunks, end = [], min(offset + length, self.size)
        while offset < end:
            index = bisect_right(self.starts, offset) - 1
            if index not in self._handles:
                self._handles[index] = self.paths[index].open("rb")
            handle = self._handles[index]
            handle.seek(offset - self.starts[index])
            data = handle.read(min(end, self.starts[index + 1]) - offset)
            if not data:
                break
            chunks.append(data)
            offset += len(data)
        return b"".join(chunks)

    def close(self) -> None:
        for handle in self._handles.values():
            handle.close()
        self._handles.clear()


@dataclass
class Member:
    name: str
    method: int
    flags: int
    crc: int
    compressed: int
    size: int
    disk: int
    offset: int  # from the start of part `disk`, once `Archive.members` returns: of the whole archive


def _end_record(view: Concatenation, start: int) -> tuple | None:
    """(position of the EOCD from `start`, parts of the archive, entries, directory's disk, size and
    offset, (disk, offset) of the ZIP64 end record or None), or None when there is no end record."""
    tail_start = max(start, view.size - (1 << 16) - 22)
    tail = view.read_at(tail_start, view.size - tail_start)
    index = tail.rfind(EOCD)
    while index >= 0 and len(tail) - index < 22:
        index = tail.rfind(EOCD, 0, index)
    if index < 0:
        return None
    _sig, disk, cd_disk, _here, entries, cd_size, cd_offset, _comment = struct.unpack("<4s4H2LH", tail[index:index + 22])
    zip64_at, disks = None, disk + 1
    if index >= 20 and tail[index - 20:index - 16] == LOCATOR64:
        _sig, z_disk, z_offset, disks = struct.unpack("<4sLQL", tail[index - 20:index])
        zip64_at = (z_disk, z_offset)
    return tail_start + index - start, disks, entries, cd_disk, cd_size, cd_offset, zip64_at


def _parse_central(data: bytes, expected: int, where: str) -> list[Member]:
    members, pos = [], 0
    while pos + 46 <= len(data) and data[pos:pos + 4] == CENTRAL:
        (_sig, _made, _need, flags, method, _time, _date, crc, csize, usize, name_len, extra_len, comment_len,
         disk, _iattr, _eattr, offset) = struct.unpack("<4s6H3L5H2L", data[pos:pos + 46])
        raw_name = data[pos + 46:pos + 46 + name_len]
        extra = data[pos + 46 + name_len:pos + 46 + name_len + extra_len]
        name = raw_name.decode("utf-8" if flags & 0x800 else "cp437", errors="replace")
        fields = {"usize": usize, "csize": csize, "offset": offset, "disk": disk}
        at = 0
        while at + 4 <= len(extra):
            tag, length = struct.unpack("<2H", extra[at:at + 4])
            if tag == 1:  # ZIP64: 8-byte values for the fields whose 32-bit slot is saturated
                body, cursor = extra[at + 4:at + 4 + length], 0
                for key, limit, width in (("usize", 0xFFFFFFFF, 8), ("csize", 0xFFFFFFFF, 8),
                                          ("offset", 0xFFFFFFFF, 8), ("disk", 0xFFFF, 4)):
                    if fields[key] == limit and cursor + width <= len(body):
                        fields[key] = int.from_bytes(body[cursor:cursor + width], "little")
                        cursor += width
            at += 4 + length
        members.append(Member(name, method, flags, crc, fields["csize"], fields["usize"], fields["disk"],
                              fields["offset"]))
        pos += 46 + name_len + extra_len + comment_len
    if len(members) != expected:
        raise ArchiveError(f"{where}: its central directory lists {len(members)} of {expected} entries "
                           "(truncated or corrupt download)")
    return members


@dataclass
class Archive:
    """One logical zip: `kind` "zip" (one file), "slices" (byte chunks) or "split" (Info-ZIP parts)."""

    label: str  # root-relative name used in messages and stamps
    kind: str
    parts: list[Path]
    problems: list[str] = field(default_factory=list)  # found while grouping: extraction refuses

    def members(self) -> list[Member]:
        """The central directory (ArchiveError naming what is wrong and the fix)."""
        if self.problems:
            raise ArchiveError(f"{self.label}: " + "; ".join(self.problems))
        with closing(Concatenation(self.parts)) as view:
            last_start = view.starts[-2] if self.kind == "split" else 0  # a split set's end record is in its last part
            end = _end_record(view, last_start)
            if end is None:
                missing = " (the last chunk holds it: is one missing?)" if self.kind == "slices" else ""
                raise ArchiveError(f"{self.label} has no zip end record: it is truncated, corrupt or incomplete{missing} "
                                   f"({self._fix()})")
            position, disks, entries, cd_disk, cd_size, cd_offset, zip64_at = end
            starts = view.starts[:-1] if self.kind == "split" else [0]  # where each part (disk) begins
            if len(starts) != disks:
                raise ArchiveError(f"{self.label} says it has {disks} part(s) but {len(starts)} are here ({self._fix()})")

            def start_of(disk: int, what: str) -> int:
                if disk >= len(starts):
                    raise ArchiveError(f"{self.label}: {what} in part {disk + 1} of {len(starts)} ({self._fix()})")
                return starts[disk]

            eocd_abs, zip64_len = last_start + position, 0
            if zip64_at is not None:
                z_abs = start_of(zip64_at[0], "its ZIP64 record lies") + zip64_at[1]
                record = view.read_at(z_abs, 56)
                if len(record) < 56 or record[:4] != EOCD64:
                    raise ArchiveError(f"{self.label}: its ZIP64 end record is missing or damaged ({self._fix()})")
                _sig, _sz, _made, _need, _d, cd_disk, _here, entries, cd_size, cd_offset = struct.unpack("<4sQ2H2L4Q", record)
                zip64_len = eocd_abs - z_abs
            cd_abs = start_of(cd_disk, "its directory starts") + cd_offset
            if cd_abs + cd_size + zip64_len != eocd_abs:
                hint = ("it is a slice of a larger zip, or was cut short" if self.kind == "zip"
                        else "a part is missing, truncated or from another copy")
                raise ArchiveError(f"{self.label}: its directory is not where its end record says ({hint}; {self._fix()})")
            members = _parse_central(view.read_at(cd_abs, cd_size), entries, self.label)
            for member in members:
                member.offset += start_of(member.disk, f"member {member.name} lies")
            return members

    def _fix(self) -> str:
        return f"delete {self.label if self.kind == 'zip' else 'its parts'} and rerun `lmms-vr prepare` to download again"


def _classify(path: Path) -> str:
    """"zip" when `path` is a complete zip of its own, else "piece" (a byte slice of one)."""
    try:
        Archive(path.name, "zip", [path]).members()
    except ArchiveError:
        return "piece"
    with path.open("rb") as file:
        return "zip" if file.read(4) in (LOCAL, EOCD) else "piece"


def find_archives(root: Path) -> list[Archive]:
    """Every archive under `root` (hidden folders skipped), grouped and classified."""
    zips: list[Path] = []
    split_parts: dict[Path, list[tuple[int, Path]]] = {}
    for path in sorted(root / rel for rels in files_by_name(root).values() for rel in rels):
        match = SPLIT_PART.match(path.name)
        if match:
            split_parts.setdefault(path.with_name(match["stem"] + ".zip"), []).append((int(match["number"]), path))
        elif path.name.lower().endswith(".zip") and not path.name.endswith(".joined.zip"):  # joined: earlier versions' copies
            zips.append(path)
    rel = lambda p: p.relative_to(root).as_posix()  # noqa: E731
    archives: list[Archive] = []
    chunks: dict[tuple[Path, str], list[tuple[int, Path]]] = {}
    for path in zips:
        match = CHUNK_NAME.match(path.name)
        if path in split_parts:
            numbered = sorted(split_parts.pop(path))
            archives.append(Archive(rel(path), "split", [p for _n, p in numbered] + [path],
                                    _gaps(numbered, "split part(s)", lambda n: f"{path.stem}.z{n:02d}")))
        elif match:
            chunks.setdefault((path.parent, match["prefix"]), []).append((int(match["number"]), path))
        else:
            archives.append(Archive(rel(path), "zip", [path]))
    for last, numbered in split_parts.items():  # parts without their final .zip
        archives.append(Archive(rel(last), "split", [p for _n, p in sorted(numbered)], [
            f"the last part {last.name} (it holds the directory) is missing: rerun `lmms-vr prepare` to download it "
            "(nothing was joined or extracted)"]))
    for (folder, prefix), numbered in sorted(chunks.items()):
        numbered.sort()
        kinds = {path: _classify(path) for _n, path in numbered}
        if "zip" in kinds.values():  # the repacked layout (each chunk a zip of its own); any other chunk is a damaged copy
            archives.extend(Archive(rel(path), "zip", [path], [] if kind == "zip" else [
                "not a complete zip while its sibling chunks are: a truncated or corrupt download; delete it "
                "and rerun `lmms-vr prepare` to download it again"]) for path, kind in kinds.items())
            continue
        width = len(numbered[0][1].name.rsplit("_", 1)[-1]) - 4  # the numbers' digits, as the names write them
        archives.append(Archive(rel(folder / f"{prefix}_chunk_*.zip"), "slices", [p for _n, p in numbered],
                                _gaps(numbered, "byte chunk(s)", lambda n: f"{prefix}_chunk_{n:0{width}d}.zip")))
    return sorted(archives, key=lambda a: a.label)


def _gaps(numbered: list[tuple[int, Path]], what: str, name: Callable[[int], str]) -> list[str]:
    """The problem of a numbered set missing some of 1 .. its highest number (none: [])."""
    present = {n for n, _p in numbered}
    absent = [name(n) for n in range(1, max(present) + 1) if n not in present]
    return [f"{what} {', '.join(absent)} missing: rerun `lmms-vr prepare` to download them "
            "(nothing was joined or extracted)"] if absent else []


@dataclass(frozen=True)
class Limits:
    """Declared expansion at most `max_ratio` times the archive (plus 1 MiB); `keep_free` bytes left free."""

    max_ratio: float = 100.0
    keep_free: int = 1 << 30


def parse_size(text: str) -> int:
    """'10G', '500M', '1.5T', '0' or a plain number of bytes -> bytes (ValueError otherwise)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgGtTpP]?)i?[bB]?\s*", text)
    if not match:
        raise ValueError(f"not a size: {text!r} (use e.g. 500M, 10G)")
    power = " KMGTP".index(match[2].upper() or " ")
    return int(float(match[1]) * 1024 ** power)


@dataclass
class Plan:
    archive: Archive
    entries: list[tuple[Member, str]]  # member, root-relative target
    # CRC of each file the extraction of another archive verified and recorded (`prepare`'s stamps)
    verified: Mapping[str, int] = field(default_factory=dict)
    rewrite: frozenset[str] = frozenset()  # targets to write again even when in place (a changed archive)

    @property
    def declared(self) -> int:
        return sum(member.size for member, _t in self.entries)

    def pending(self, root: Path) -> list[tuple[Member, str]]:
        """Entries to write: those in `rewrite`, and those whose content is not at their target."""
        return [(member, target) for member, target in self.entries
                if target in self.rewrite or not in_place(root / target, member, self.verified.get(target))]


def in_place(path: Path, member: Member, verified_crc: int | None = None) -> bool:
    """The member's content is at `path`: a file of its size (and its CRC, when an extraction recorded
    it). Files reach their names only whole and CRC-checked, so a resumed extraction reads nothing back."""
    return (path.is_file() and path.stat().st_size == member.size
            and (verified_crc is None or verified_crc == member.crc))


def _file_in_the_way(root: Path, target: str) -> Path | None:
    """A file where `target` needs a folder (one of its parent folders), or None."""
    for folder in reversed(PurePosixPath(target).parents[:-1]):  # from the root down
        path = root / folder
        if path.exists() and not path.is_dir():
            return path
    return None


def refuse_conflicts(plan_: Plan, root: Path) -> None:
    """ArchiveError, before anything is written, when an entry would replace a different file, or its
    place is taken by a file where a folder is needed or by a folder (`rewrite`: replacing is meant)."""
    found = []
    for member, target in plan_.entries:
        path, blocking = root / target, _file_in_the_way(root, target)
        if blocking is not None:
            found.append(f"member {member.name!r} goes to {path}, under {blocking}, which is a file, not a folder")
        elif path.is_dir():
            found.append(f"member {member.name!r} goes to {path}, which is a folder")
        elif path.exists() and target not in plan_.rewrite and not in_place(path, member, plan_.verified.get(target)):
            found.append(f"member {member.name!r} would replace {path}, whose content differs "
                         f"({path.stat().st_size} bytes there, {member.size} bytes with CRC {member.crc:08x} in the archive)")
    if found:
        more = f" (and {len(found) - 1} more member(s) like it)" if len(found) > 1 else ""
        raise ArchiveError(
            f"{plan_.archive.label}: {found[0]}{more}; refusing to extract this archive (nothing of it was written, "
            f"the file in place is kept). If the file in place is wrong, delete it; if {plan_.archive.label} is not "
            "a genuine copy (two archives disagree about that file), delete the archive; then rerun `lmms-vr prepare`")


def plan(archive: Archive, target_of: Callable[[str, str], str | None]) -> Plan:
    """The members to extract and where (ArchiveError for hostile names and clashing targets)."""
    seen: dict[str, Member] = {}  # target -> the first member written there
    for member in archive.members():
        if member.name.endswith("/"):
            continue
        if leaves_root(member.name):
            raise ArchiveError(f"{archive.label}: member {member.name!r} would be written outside the data root; "
                               "refusing to extract this archive (nothing was written). It is not a genuine copy: "
                               "delete it and download it again")
        if member.flags & 0x1:
            raise ArchiveError(f"{archive.label}: member {member.name!r} is encrypted; this is not the dataset's archive")
        target = target_of(archive.label, member.name.replace("\\", "/"))
        if target is None:  # a member the benchmark does not use (e.g. a README)
            continue
        if leaves_root(target):  # a benchmark mapping must keep to the root as well
            raise ArchiveError(f"{archive.label}: member {member.name!r} maps outside the root ({target})")
        if target in seen and (seen[target].size, seen[target].crc) != (member.size, member.crc):
            raise ArchiveError(f"{archive.label}: members {seen[target].name!r} and {member.name!r} both map to "
                               f"{target} with different contents")
        seen.setdefault(target, member)
    folders = {str(folder): target for target in seen for folder in PurePosixPath(target).parents}
    for target, member in seen.items():
        if target in folders:  # one member would be a file where another needs a folder
            raise ArchiveError(f"{archive.label}: member {member.name!r} would be the file {target}, where member "
                               f"{seen[folders[target]].name!r} needs a folder; this is not the dataset's archive: "
                               "delete it and download it again")
    return Plan(archive, [(member, target) for target, member in seen.items()])


def check_space(plan_: Plan, root: Path, limits: Limits) -> int:
    """Bytes still to write; ArchiveError when the expansion looks like a bomb or the disk is too full."""
    archive_bytes = sum(p.stat().st_size for p in plan_.archive.parts if p.exists())
    if plan_.declared > limits.max_ratio * archive_bytes + (1 << 20):
        raise ArchiveError(
            f"{plan_.archive.label} declares {size_text(plan_.declared)} of content from {size_text(archive_bytes)} of archive "
            f"(more than {limits.max_ratio:g} times): refusing to extract a possible zip bomb. If this archive is "
            "genuine, raise the limit with --max-ratio")
    need = sum(member.size for member, _t in plan_.pending(root))
    free = shutil.disk_usage(root).free
    if need + limits.keep_free > free:
        raise ArchiveError(
            f"{plan_.archive.label} needs {size_text(need)} of free disk to extract, {size_text(free)} is free and "
            f"{size_text(limits.keep_free)} must stay free (--keep-free): free some space (or point --root at a larger "
            "disk) and rerun; nothing was written")
    return need


def _copy_member(view: Concatenation, member: Member, out, label: str) -> None:
    """Stream one member's data into `out`, bounded by its declared size, CRC-checked."""
    header = view.read_at(member.offset, 30)
    if len(header) < 30 or header[:4] != LOCAL:
        raise ArchiveError(f"{label}: member {member.name!r} has no local header where the directory says "
                           "(a part or chunk is corrupt or from another copy): delete the archive and rerun `lmms-vr prepare`")
    name_len, extra_len = struct.unpack("<2H", header[26:30])
    at = member.offset + 30 + name_len + extra_len
    if member.method not in (0, 8):  # stored, deflated
        raise ArchiveError(f"{label}: member {member.name!r} uses compression method {member.method}, which this tool "
                           "cannot read; extract it with another tool into the root, then run with --verify-only")
    decompressor = zlib.decompressobj(-15) if member.method == 8 else None
    left, written, crc = member.compressed, 0, 0

    def emit(chunk: bytes) -> None:
        nonlocal written, crc
        written += len(chunk)
        if written > member.size:
            raise ArchiveError(f"{label}: member {member.name!r} expands beyond its declared "
                               f"{size_text(member.size)} (corrupt or hostile archive); nothing of it was kept")
        crc = zlib.crc32(chunk, crc)
        out.write(chunk)

    while left > 0:
        data = view.read_at(at, min(BLOCK, left))
        if not data:
            raise ArchiveError(f"{label}: member {member.name!r} is cut short (truncated download): delete the "
                               "archive and rerun `lmms-vr prepare`")
        at += len(data)
        left -= len(data)
        if decompressor is None:
            emit(data)
            continue
        while data:
            try:
                chunk = decompressor.decompress(data, member.size - written + 1)
            except zlib.error as exc:
                raise ArchiveError(f"{label}: member {member.name!r} does not decompress ({exc}; corrupt download): "
                                   "delete the archive and rerun `lmms-vr prepare`") from None
            data = decompressor.unconsumed_tail
            emit(chunk)
            if not chunk:
                break
    if decompressor is not None:
        emit(decompressor.flush())
    if written != member.size or crc != member.crc:
        raise ArchiveError(f"{label}: member {member.name!r} fails its {'size' if written != member.size else 'CRC'} "
                           "check (corrupt download): delete the archive and rerun `lmms-vr prepare`")


def extract(plan_: Plan, root: Path) -> dict[str, int]:
    """Write every pending member of `plan_` under `root`, once `refuse_conflicts`
    and `check_space` let it, printing every tenth of a long one; {target: size} of all its targets."""
    pending = plan_.pending(root)
    with closing(Concatenation(plan_.archive.parts)) as view:
        for done, (member, target) in enumerate(pending, 1):
            path = root / target
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                with atomic_target(path) as tmp, tmp.open("wb") as out:
                    _copy_member(view, member, out, plan_.archive.label)
            except OSError as exc:
                if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                    raise ArchiveError(f"the disk filled up while extracting {target} from {plan_.archive.label}: free "
                                       "some space and rerun (finished files are kept, the partial one was removed)") from None
                raise ArchiveError(f"cannot write {path} ({exc.strerror or exc}) while extracting {plan_.archive.label}") from None
            if len(pending) >= 20 and done % max(1, len(pending) // 10) == 0 and done < len(pending):
                print(f"  {done}/{len(pending)} files")
    return {target: member.size for member, target in plan_.entries}
