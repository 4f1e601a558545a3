"""Parse helpers for judge replies: pure functions returning the parsed value or raising `ParseError`,
which makes `Judge.ask` ask again (bounded), then records a failed judgment. Judges wrap answers in
prose and code fences, leave trailing commas and use single quotes: accepted, but no value is guessed."""

from __future__ import annotations

import itertools
import json
import re
from typing import Any, Sequence

from lmms_video_reasoning.utils.core.ask import ParseError

__all__ = ["ParseError", "extract_json", "normalize_label", "extract_tag", "extract_digit"]


_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_-]*)[ \t]*\r?\n?(.*?)```", re.DOTALL)
# An opening fence: at the start of its line, or naming a language, and ending its line.
_OPENER = re.compile(r"[ \t]*([A-Za-z0-9_-]*)[ \t]*\r?\n")


def extract_json(text: str, expect: type | None = None) -> Any:
    """The JSON value in a judge reply: from its fenced blocks first, then the first balanced
    ``[...]`` or ``{...}`` in the prose. With ``expect`` (``list`` or ``dict``) candidates of another
    type are skipped, so a citation like ``[1]`` in prose does not shadow the real answer."""
    if not isinstance(text, str):
        raise ParseError(f"expected reply text, got {type(text).__name__}")
    candidates = _fenced_blocks(text) or [body for _lang, body in _FENCE.findall(text)]
    for candidate in itertools.chain(candidates, _balanced_spans(text)):
        try:
            value = _lenient_loads(candidate)
        except (ValueError, RecursionError):  # RecursionError: JSON nested too deeply to read
            continue
        if not isinstance(value, (list, dict)):
            continue
        if expect is not None and not isinstance(value, expect):
            continue
        return value
    wanted = {list: "array", dict: "object"}.get(expect, "array or object")
    raise ParseError(f"no JSON {wanted} found in reply: {_preview(text)}")


def _fenced_blocks(text: str) -> list[str]:
    """Bodies of the fenced blocks, fences paired as Markdown does (`_OPENER`; the next fence closes it):
    a stray fence in the prose ("use ``` fences") is skipped, so it cannot shift every later pairing."""
    blocks, index = [], 0
    while True:
        start = text.find("```", index)
        if start == -1:
            return blocks
        opener = _OPENER.match(text, start + 3)
        line_start = text.rfind("\n", 0, start) + 1
        if opener is None or not (opener.group(1) or not text[line_start:start].strip()):
            index = start + 3  # a stray fence: not an opening one
            continue
        end = text.find("```", opener.end())
        if end == -1:
            return blocks
        blocks.append(text[opener.end() : end])
        index = end + 3


def _balanced_spans(text: str):
    """Each bracketed ``[...]`` / ``{...}`` substring, by start position (strings inside respected), found in
    one pass, so a huge or deeply nested reply costs linear time."""
    spans: list[tuple[int, int]] = []
    stack: list[tuple[int, str]] = []
    index = 0
    while index < len(text):
        char = text[index]
        if stack and char in "\"'":
            # A quote only opens a string inside the brackets (prose apostrophes are outside).
            index = _string_end(text, index, char)
        elif char in "[{":
            stack.append((index, "]" if char == "[" else "}"))
        elif char in "]}":
            if stack and stack[-1][1] == char:
                spans.append((stack.pop()[0], index))
            else:
                stack.clear()  # a mismatched bracket: no span is open across it
        index += 1
    for start, end in sorted(spans):
        yield text[start : end + 1]


def _lenient_loads(candidate: str) -> Any:
    """``json.loads``, else after dropping trailing commas and turning 'x' strings into "x"."""
    try:
        return json.loads(candidate)
    except ValueError:
        return json.loads(_normalise_json_like(candidate))


def _normalise_json_like(candidate: str) -> str:
    """Trailing commas dropped and single-quoted strings made JSON, outside double-quoted strings."""
    out: list[str] = []
    index = 0
    while index < len(candidate):
        char = candidate[index]
        if char == '"':
            end = _string_end(candidate, index, '"')
            out.append(candidate[index : end + 1])
            index = end + 1
        elif char == "'":
            end = _string_end(candidate, index, "'")
            inner = candidate[index + 1 : end].replace("\\'", "'")
            out.append(json.dumps(inner, ensure_ascii=False))
            index = end + 1
        elif char == ",":
            rest = candidate[index + 1 :].lstrip()
            if not rest or rest[0] not in "]}":
                out.append(char)
            index += 1
        else:
            out.append(char)
            index += 1
    return "".join(out)


def _string_end(text: str, start: int, quote: str) -> int:
    """Index of the quote closing the string opened at ``start`` (end of text if unclosed)."""
    escaped = False
    for index in range(start + 1, len(text)):
        char = text[index]
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == quote:
            return index
    return len(text) - 1


def _label_key(label: str) -> str:
    """Case-, space- and decoration-insensitive form of a label ("**Matched.**" -> "matched")."""
    stripped = label.strip().strip("*_`'\"“”‘’.:;,!()[]{}<> \t\r\n")
    return " ".join(stripped.lower().split())


def normalize_label(label: str, allowed: Sequence[str], aliases: dict[str, str] | None = None) -> str:
    """A judge's label as the one of ``allowed`` it names (`_label_key` alike); ``aliases`` maps other
    spellings onto allowed labels (e.g. ``{"Match": "Matched"}``, one official prompt's two spellings)."""
    if not isinstance(label, str):
        raise ParseError(f"label must be text, got {type(label).__name__}: {label!r}")
    key = _label_key(label)
    canonical = {_label_key(item): item for item in allowed}
    if key in canonical:
        return canonical[key]
    for alias, target in (aliases or {}).items():
        if key == _label_key(alias):
            if target not in allowed:
                raise ValueError(f"alias {alias!r} points to {target!r}, which is not in allowed {list(allowed)}")
            return target
    raise ParseError(f"label {label!r} is not one of {list(allowed)}")


def extract_tag(text: str, name: str) -> str | None:
    """Content of the last ``<name>...</name>`` in the reply (stripped), or None: judges that echo
    the requested format before answering put the real value at the end."""
    pattern = re.compile(rf"<\s*{re.escape(name)}\s*>(.*?)<\s*/\s*{re.escape(name)}\s*>", re.DOTALL | re.IGNORECASE)
    matches = pattern.findall(text or "")
    return matches[-1].strip() if matches else None


def extract_digit(text: str, allowed: str = "01") -> int:
    """First standalone digit of ``allowed`` in the reply ("Score: 1" -> 1; "2024" is skipped)."""
    match = re.search(rf"(?<![\d.])[{re.escape(allowed)}](?![\d]|\.\d)", text or "")
    if match is None:
        raise ParseError(f"no digit in {sorted(allowed)} found in reply: {_preview(text)}")
    return int(match.group(0))


def _preview(text: Any, limit: int = 120) -> str:
    """Short single-line excerpt of a reply for error messages."""
    flat = " ".join(str(text).split())
    return repr(flat if len(flat) <= limit else flat[:limit] + "...")
