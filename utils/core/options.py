"""A task's options: the values that change its inputs or its scores, each declared once where it is used.

`Option(...)`, at module level, names the option (its key in the task's `lmms_eval_specific_kwargs`
and in the options its records carry), its kind, default and meaning. `value(chosen)` is its value
in effect: the task's chosen value, else the default.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only (strings at run time)
    from typing import Any, Mapping, Sequence

KINDS = ("bool", "int", "float", "choice", "text")


class OptionError(ValueError):
    """A value an option does not accept."""


class Option:
    """One task option: its name (`option`), kind, default, meaning and accepted values. `override`:
    None, or a source outside the task (with `name`, `is_set()` and `read()`) whose value wins when set."""

    __slots__ = ("option", "kind", "default", "help", "choices", "minimum", "maximum", "override")

    def __init__(self, option: str, kind: str, default: Any, help: str, choices: Sequence[str] = (),
                 minimum: float | None = None, maximum: float | None = None) -> None:
        if kind not in KINDS:
            raise ValueError(f"option {option}: unknown kind {kind!r}")
        self.option, self.kind, self.default, self.help = option, kind, default, help
        self.choices, self.minimum, self.maximum, self.override = tuple(choices), minimum, maximum, None

    def value(self, chosen: Mapping[str, Any] | None = None) -> Any:
        """The value in effect: the override's when set, else the task's `chosen` value, else the default."""
        if self.override is not None and self.override.is_set():
            return self.override.read()
        return (chosen or {}).get(self.option, self.default)

    def sources(self) -> str:
        """What sets it, for messages: the option, and the override when one is bound."""
        return self.option if self.override is None else f"{self.option} or {self.override.name}"


def values(options: Sequence[Option], chosen: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The options in effect, {option: value} (`Option.value`)."""
    return {option.option: option.value(chosen) for option in options}
