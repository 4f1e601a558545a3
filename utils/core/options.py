"""A task's options: the values that change its inputs or its scores, each declared once (`Option(...)`,
at module level) where it is used; its name is its key in the task's `lmms_eval_specific_kwargs` and in
the options its records carry."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only (strings at run time)
    from typing import Any, Mapping, Sequence

KINDS = ("bool", "int", "float", "choice", "text")


class OptionError(ValueError):
    """A value an option does not accept."""


class Option:
    """One task option: its name (`option`), kind, default, meaning and accepted values. Set once:
    its value in effect is always the task's choice (`value(chosen)`), nothing outside the task's."""

    __slots__ = ("option", "kind", "default", "help", "choices", "minimum", "maximum")

    def __init__(self, option: str, kind: str, default: Any, help: str, choices: Sequence[str] = (),
                 minimum: float | None = None, maximum: float | None = None) -> None:
        if kind not in KINDS:
            raise ValueError(f"option {option}: unknown kind {kind!r}")
        self.option, self.kind, self.default, self.help = option, kind, default, help
        self.choices, self.minimum, self.maximum = tuple(choices), minimum, maximum

    def __setattr__(self, name: str, value: Any) -> None:
        if hasattr(self, name):  # each field is set once, when declared: nothing outside the task changes an option
            raise AttributeError(f"option {self.option}: {name} is set once, when it is declared")
        object.__setattr__(self, name, value)

    def value(self, chosen: Mapping[str, Any] | None = None) -> Any:
        """The value in effect: the task's `chosen` value, else the default."""
        return (chosen or {}).get(self.option, self.default)


def values(options: Sequence[Option], chosen: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The options in effect, {option: value} (`Option.value`)."""
    return {option.option: option.value(chosen) for option in options}
