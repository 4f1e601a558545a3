"""A task's options: the typed values that change its inputs or its scores, checked by one set of rules.

An option is declared once, where it is used (`Option(...)`, at module level), with its kind,
default and meaning. Its value in effect is `value(chosen)`: the task's chosen value (its
`lmms_eval_specific_kwargs`, or the options its records carry), else the default. A text value
is read by the same rules everywhere:

- booleans: 1, true, yes, on / 0, false, no, off (any case); empty = the default;
- numbers: finite, within the declared bounds;
- choices: one of the declared values (any case);
- anything else is an `OptionError` naming the option, the value and what is accepted, never a
  silent default (a typo in a scoring switch must not read as "off").
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only (strings at run time)
    from typing import Any, Mapping, Sequence

TRUE = ("1", "true", "yes", "on")
FALSE = ("0", "false", "no", "off")
KINDS = ("bool", "int", "float", "choice", "text")


class OptionError(ValueError):
    """A value an option does not accept."""


class Option:
    """One task option: its name (`option`), kind, default, meaning and accepted values. `override`:
    None, or a source outside the task (with `is_set()` and `read()`) whose value wins when it is set."""

    __slots__ = ("option", "kind", "default", "help", "choices", "minimum", "maximum", "override")

    def __init__(self, option: str, kind: str, default: Any, help: str, choices: Sequence[str] = (),
                 minimum: float | None = None, maximum: float | None = None) -> None:
        if kind not in KINDS:
            raise ValueError(f"option {option}: unknown kind {kind!r}")
        self.option, self.kind, self.default, self.help = option, kind, default, help
        self.choices, self.minimum, self.maximum, self.override = tuple(choices), minimum, maximum, None

    @property
    def label(self) -> str:
        """What an error calls the value's source."""
        return self.option

    def value(self, chosen: Mapping[str, Any] | None = None) -> Any:
        """The value in effect: the override's when set, else the task's `chosen` value, else the default."""
        if self.override is not None and self.override.is_set():
            return self.override.read()
        return (chosen or {}).get(self.option, self.default)

    def sources(self) -> str:
        """What sets it, for messages: the option, and the override when one is bound."""
        return self.option if self.override is None else f"{self.option} or {self.override.label}"

    def parse(self, raw: str | None) -> Any:
        text = (raw or "").strip()
        if not text:
            return self.default
        if self.kind == "bool":
            if text.lower() in TRUE + FALSE:
                return text.lower() in TRUE
            return self._reject(text, "one of " + ", ".join(TRUE + FALSE))
        if self.kind == "choice":
            if text.lower() in self.choices:
                return text.lower()
            return self._reject(text, "one of " + ", ".join(self.choices))
        if self.kind in ("int", "float"):
            return self._number(text)
        return text

    def _number(self, text: str) -> int | float:
        try:
            value: int | float = int(text) if self.kind == "int" else float(text)
        except ValueError:
            return self._reject(text, f"a{'n integer' if self.kind == 'int' else ' number'}{self._bounds()}")
        if not math.isfinite(value) or (self.minimum is not None and value < self.minimum) or (
                self.maximum is not None and value > self.maximum):
            return self._reject(text, f"a finite number{self._bounds()}")
        return value

    def _bounds(self) -> str:
        if self.minimum is not None and self.maximum is not None:
            return f" from {self.minimum:g} to {self.maximum:g}"
        if self.minimum is not None:
            return f" of at least {self.minimum:g}"
        return ""

    def _reject(self, text: str, accepted: str) -> Any:
        raise OptionError(f"{self.label}={text!r} is not accepted: use {accepted} ({self.help}; "
                          f"unset it for the default, {self.default!r})")


def values(options: Sequence[Option], chosen: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The options in effect, {option: value} (`Option.value`)."""
    return {option.option: option.value(chosen) for option in options}
