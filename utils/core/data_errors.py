"""Bad annotations: the error the benchmarks raise and the checks they share (standard library only).
A record that fails a check refuses the whole annotation file (when it is downloaded, before
generation), so no document is silently left out or scored against a bad value."""

from __future__ import annotations

import math
from typing import Any, Iterable, Sequence


class DataError(ValueError):
    """Annotations or media are missing or malformed; the message says how to fix it."""


# What to do about a bad value in a dataset's own annotation file (it came damaged or edited).
RECORD_FIX = "correct that record in the annotation file, or delete the file and download a fresh copy"


def require_fields(record: Any, fields: Iterable[str], where: str) -> None:
    """Raise DataError naming the record when it is not a dict with every field."""
    if not isinstance(record, dict):
        raise DataError(f"{where}: expected a JSON object, got {type(record).__name__}")
    missing = [name for name in fields if name not in record]
    if missing:
        raise DataError(f"{where}: missing field(s) {', '.join(missing)}")


def finite_number(value: Any, name: str, where: str, positive: bool = False, unit: str = "seconds") -> float:
    """`value` as a float when it is a finite number >= 0 (> 0 with `positive`); else DataError
    naming the field and the value (NaN would compare False everywhere and land in a wrong bucket)."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not (number and math.isfinite(value) and (value > 0 if positive else value >= 0)):
        bound = "> 0" if positive else ">= 0"
        raise DataError(f"{where}: {name} must be a finite number of {unit} {bound}, got {value!r}; {RECORD_FIX}")
    return float(value)


def option_letter(value: Any, letters: Sequence[str], name: str, where: str) -> str:
    """`value` when it is one of the question's option `letters`; else DataError naming the field,
    the value and the letters (a gold answer no option has would score every reply wrong)."""
    if not letters:
        raise DataError(f"{where}: {name} {value!r}: the question has no options to choose from; {RECORD_FIX}")
    if not isinstance(value, str) or value not in letters:
        raise DataError(f"{where}: {name} {value!r} is not one of the option letters {', '.join(letters)}; {RECORD_FIX}")
    return value


def letters(count: int) -> list[str]:
    """The first `count` option letters: A, B, C, ..."""
    return [chr(ord("A") + index) for index in range(count)]
