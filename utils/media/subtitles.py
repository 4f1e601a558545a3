"""SRT subtitles: tolerant parsing (`parse_srt`) and the CG-Bench selection of lines for sampled frames
(`lines_for_times`, `subtitle_prompt`: official `get_subtitles` in CG-Bench `run/utils.py`).

A malformed block is skipped and counted, never fatal; BOMs, CR line ends, missing cue numbers, non-UTF-8
bytes and `<i>`-style tags are read.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Cue:
    """One subtitle: ``start``/``end`` in seconds, ``text`` with "\\n" between lines."""

    start: float
    end: float
    text: str


@dataclass(frozen=True)
class SrtParse:
    """Parsed cues in file order and the number of malformed blocks skipped."""

    cues: list[Cue]
    skipped: int


_TIME = r"(?:(\d+):)?(\d{1,2}):(\d{1,2})(?:[,.:](\d{1,3}))?"
_TIMING = re.compile(rf"^\s*{_TIME}\s*-->\s*{_TIME}")
_TAG = re.compile(r"</?(?:i|b|u|s|font)(?:\s[^>]*)?>", re.IGNORECASE)


def _decode(data: bytes) -> str:
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16")
    for encoding in ("utf-8-sig", "cp1252"):
        try:
            return data.decode(encoding)
        except UnicodeDecodeError:
            continue
    return data.decode("utf-8", errors="replace")


def _ms(h: str | None, m: str, s: str, frac: str | None) -> int:
    """Milliseconds of an SRT time; a fraction ``,5`` means 500 ms (digits are decimals)."""
    ms = int((frac or "0").ljust(3, "0"))
    return ((int(h or 0) * 60 + int(m)) * 60 + int(s)) * 1000 + ms


def _parse_block(lines: list[str]) -> Cue | None:
    """A cue from one block (optional number line, timing line, text lines); None if malformed."""
    for i, line in enumerate(lines[:2]):
        match = _TIMING.match(line)
        if match:
            break
    else:
        return None
    if i == 1 and not lines[0].strip().isdigit():
        return None
    g = match.groups()
    start, end = _ms(*g[:4]), _ms(*g[4:])
    if end < start:
        return None
    text = "\n".join(_TAG.sub("", t).strip() for t in lines[i + 1 :]).strip()
    return Cue(start / 1000, end / 1000, text)


def parse_srt(path) -> SrtParse:
    """Parse an SRT file; malformed blocks are skipped and counted."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"subtitle file not found: {path}")
    text = _decode(path.read_bytes()).replace("\r\n", "\n").replace("\r", "\n")
    cues, skipped = [], 0
    for block in re.split(r"\n[ \t]*\n", text):
        if not block.strip():
            continue
        cue = _parse_block(block.strip().split("\n"))
        if cue is None:
            skipped += 1
        else:
            cues.append(cue)
    return SrtParse(cues, skipped)


@functools.lru_cache(maxsize=1024)
def load_cues(path: Path) -> tuple[Cue, ...]:
    """The cues of an SRT file (parsed once per file, for the last 1,024 files of the process)."""
    return tuple(parse_srt(path).cues)


def srt_problem(path) -> str | None:
    """Why an SRT gives a prompt nothing (empty, or no block parses into a subtitle line), or None."""
    try:
        parsed = parse_srt(path)
    except OSError as exc:
        return f"it cannot be read ({exc.strerror or exc})"
    if not parsed.cues:
        return "the file is empty" if Path(path).stat().st_size == 0 else f"no subtitle line could be read from it ({parsed.skipped} malformed block(s))"
    return None


def lines_for_times(cues: Sequence[Cue], times: Iterable[float], *, with_times: bool = True) -> list[str]:
    """Lines of the cues strictly containing each time (seconds), each line once, in order: ``get_subtitles``'
    ``sub.start < t < sub.end`` in integer milliseconds (as pysubs2); ``[start, end] text`` or the text alone."""
    spans = [(round(c.start * 1000), round(c.end * 1000), c) for c in cues]
    lines: list[str] = []
    seen: set[str] = set()
    for t in times:
        t_ms = round(t * 1000)
        for start, end, cue in spans:
            if start < t_ms < end:
                text = cue.text.replace("\n", " ")
                line = f"[{start / 1000}, {end / 1000}] {text}" if with_times else text
                if line.strip() and line not in seen:
                    seen.add(line)
                    lines.append(line)
    return lines


def subtitle_prompt(lines: Sequence[str]) -> str:
    """The official CG-Bench subtitle block for the prompt, or "" when there are no lines."""
    if not lines:
        return ""
    return "The subtitles of the video are as follows:\n\n" + "\n".join(lines) + "\n\n"
