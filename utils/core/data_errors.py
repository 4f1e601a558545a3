"""Bad annotations: the error the benchmarks raise and the field check they share (standard library only)."""

from __future__ import annotations

from typing import Any, Iterable


class DataError(ValueError):
    """Annotations or media are missing or malformed; the message says how to fix it."""


def require_fields(record: Any, fields: Iterable[str], where: str) -> None:
    """Raise DataError naming the record when it is not a dict with every field."""
    if not isinstance(record, dict):
        raise DataError(f"{where}: expected a JSON object, got {type(record).__name__}")
    missing = [name for name in fields if name not in record]
    if missing:
        raise DataError(f"{where}: missing field(s) {', '.join(missing)}")
