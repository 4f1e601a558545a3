"""Every environment variable of the suite, parsed by one set of rules.

A setting is declared once, where it is used (`declare`, at module level), with its kind,
default and meaning; it is read with `Setting.read()`. The rules are the same everywhere:

- booleans: 1, true, yes, on / 0, false, no, off (any case); unset or empty = the default;
- numbers: finite, within the declared bounds;
- choices: one of the declared values (any case);
- anything else is a `SettingError` naming the variable, the value and what is accepted,
  never a silent default (a typo in a scoring switch must not read as "off").

Settings that change scores (`scoring=True`) are written into each run's judge accounting /
details file (`resolved(scoring_only=True)`), so a score can be reproduced. A variable may override
a task option (`variable(name, option)`; the option names no variable and is exported without it):
the plugin hands the task code the task's values with the variables set in their place
(`chosen_values`), and each record carries its task's options (`task_settings`), saying which came
from the environment (`FROM_ENV`).

`registry.declare_all_settings()` imports every module that declares a setting (this module names
no benchmark), so that the preflight sees them all (`setting_findings`): it rejects every invalid value of the
suite's and the run's benchmarks' settings at the start of an lmms-eval run; `lmms-vr doctor` shows them all.
"""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING

from lmms_video_reasoning.utils.core.options import Option
from lmms_video_reasoning.utils.core.options import values as option_values
from lmms_video_reasoning.utils.core.options import OptionError as SettingError  # one error class for both

if TYPE_CHECKING:  # annotations only (strings at run time)
    from typing import Any, Mapping, Sequence

# No dataclasses/typing imports: autoload reads LMMS_VR_NO_AUTOLOAD through this module at
# every interpreter start (via the installed .pth), so it stays as cheap as `os`.
__all__ = ["Setting", "SettingError"]

TRUE = ("1", "true", "yes", "on")
FALSE = ("0", "false", "no", "off")


class Setting(Option):
    """One environment variable (`name`) of an `Option`'s kind, default, meaning and accepted values.
    `scoring`: it changes scores, so it is recorded with every run's results; `option`: the name
    of the task option it overrides ("" for none; see the module doc)."""

    __slots__ = ("name", "scoring")

    def __init__(self, name: str, kind: str, default: Any, help: str, choices: tuple[str, ...] = (),
                 minimum: float | None = None, maximum: float | None = None, scoring: bool = False, option: str = "") -> None:
        super().__init__(option, kind, default, help, choices, minimum, maximum)
        self.name, self.scoring = name, scoring
        if option and not scoring:
            raise ValueError(f"setting {name}: a task option ({option}) changes scores: declare it with scoring=True")

    def __repr__(self) -> str:
        return f"Setting({self.name}, {self.kind}, default={self.default!r})"

    def read(self, env: Mapping[str, str] | None = None) -> Any:
        return self.parse((os.environ if env is None else env).get(self.name, ""))

    def is_set(self, env: Mapping[str, str] | None = None) -> bool:
        return bool((os.environ if env is None else env).get(self.name, "").strip())

    def parse(self, raw: str | None) -> Any:
        text = (raw or "").strip()
        if not text:
            return self.default
        if self.kind == "bool":
            if text.lower() in TRUE:
                return True
            if text.lower() in FALSE:
                return False
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
        raise SettingError(f"{self.name}={text!r} is not accepted: use {accepted} ({self.help}; "
                           f"unset it for the default, {self.default!r})")


_DECLARED: dict[str, Setting] = {}


def declare(name: str, kind: str, default: Any, help: str, **options: Any) -> Setting:
    """Declare a setting (idempotent for the same declaration; a conflicting one is a bug)."""
    setting = Setting(name, kind, default, help, **options)
    existing = _DECLARED.setdefault(name, setting)
    if any(getattr(existing, field) != getattr(setting, field) for field in Option.__slots__ + Setting.__slots__):
        raise ValueError(f"setting {name} declared twice differently: {existing} / {setting}")
    return existing


def variable(name: str, option: Option) -> Setting:
    """Declare the variable `name` overriding the task option `option`: a score-changing setting of
    the option's kind, default, meaning and values (`chosen_values` applies it)."""
    return declare(name, option.kind, option.default, option.help, choices=option.choices, minimum=option.minimum,
                   maximum=option.maximum, scoring=True, option=option.option)


def declared() -> list[Setting]:
    return sorted(_DECLARED.values(), key=lambda s: s.name)


def resolved(env: Mapping[str, str] | None = None, scoring_only: bool = False) -> dict[str, Any]:
    """{name: value} of the declared settings in effect (defaults included); an invalid value
    is reported as its error text rather than raised (this is a record, not a check)."""
    values: dict[str, Any] = {}
    for setting in declared():
        if setting.scoring or not scoring_only:
            try:
                values[setting.name] = setting.read(env)
            except SettingError as error:
                values[setting.name] = f"invalid: {error}"
    return values


# ---------------------------------------------------------------- a task's options

FROM_ENV = "from_env"  # in a task's settings: {variable: value} of the score-changing variables set in the environment


def chosen_values(variables: Sequence[Setting], chosen: Mapping[str, Any] | None = None,
                  env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The task's `chosen` option values with each of `variables` set in the environment in its option's
    place (SettingError: an invalid value): what the plugin hands its task code as the task's choice."""
    return {**(chosen or {}), **{setting.option: setting.read(env) for setting in variables if setting.is_set(env)}}


def task_settings(options: Sequence[Setting], chosen: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A task's options in effect, {option: value}: its `chosen` value (else the default), overridden
    by the variable when set; under FROM_ENV every score-changing variable set (SettingError: invalid)."""
    values = option_values(options, chosen_values(options, chosen))
    values[FROM_ENV] = {setting.name: setting.read() for setting in declared() if setting.scoring and setting.is_set()}
    return values
