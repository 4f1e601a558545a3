"""Judge configuration: which endpoint, model and key each benchmark uses, read from the environment.

``LMMS_VR_JUDGE_BASE_URL`` / ``_API_KEY`` / ``_MODEL`` override everything; otherwise the host's
judge (`register_host_judge`), else the defaults of the benchmark's official evaluation code
(``Benchmark.judge``, a ``JudgeDefaults``) plus lmms-eval's conventions (``OPENAI_API_URL``,
``MODEL_VERSION``). Benchmark code passes its ``JudgeDefaults``; shared code names the benchmark.
"""

from __future__ import annotations

import functools
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping
from urllib.parse import urlsplit, urlunsplit

from lmms_video_reasoning.utils.core import settings
from lmms_video_reasoning.utils.core.registry import JudgeDefaults

OVERRIDE_BASE_URL = "LMMS_VR_JUDGE_BASE_URL"
OVERRIDE_API_KEY = "LMMS_VR_JUDGE_API_KEY"
OVERRIDE_MODEL = "LMMS_VR_JUDGE_MODEL"

CONCURRENCY = settings.declare("LMMS_VR_JUDGE_CONCURRENCY", "int", 32, "in-flight judge requests per process", minimum=1)
MAX_CALLS = settings.declare("LMMS_VR_JUDGE_MAX_CALLS", "int", None, "the judge budget: at most this many HTTP requests "
                             "per process, retries and re-asks included (unset: no limit)", minimum=0)
TIMEOUT = settings.declare("LMMS_VR_JUDGE_TIMEOUT", "float", 120.0, "seconds for a whole judge HTTP request, body included",
                           minimum=0.1)
# A judge reply is a few KB; a larger body is a broken or hostile endpoint, refused before it fills memory.
MAX_REPLY_BYTES = settings.declare("LMMS_VR_JUDGE_MAX_REPLY_BYTES", "int", 4 * 1024 * 1024,
                                   "largest judge reply body accepted, in bytes", minimum=1024)
CACHE = settings.declare("LMMS_VR_JUDGE_CACHE", "text", "", "the judge cache file (default: in the user cache folder; "
                         "off: no cache)")
PRICES = settings.declare("LMMS_VR_JUDGE_PRICES", "text", "", "judge prices, USD per 1M tokens, as JSON: "
                          '{"model": {"input": 2.5, "output": 10}} (optional: "batch_input", "batch_output")')
OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"
# Sent when a local server needs no key: the openai client refuses an empty one.
DUMMY_API_KEY = "no-key-needed"

# USD per 1M tokens, list prices when written; override with LMMS_VR_JUDGE_PRICES.
DEFAULT_PRICES: dict[str, dict[str, float]] = {
    "gpt-4o-2024-08-06": {"input": 2.50, "output": 10.00},
    "gpt-4o": {"input": 2.50, "output": 10.00},
    "gpt-4o-mini": {"input": 0.15, "output": 0.60},
    "deepseek-chat": {"input": 0.27, "output": 1.10},
}
BATCH_DISCOUNT = 0.5  # the OpenAI Batch API bills half the synchronous price


def usd(price: dict[str, float] | None, input_tokens: float, output_tokens: float) -> float | None:
    """The cost at `price` (USD per million input and output tokens; None: unknown)."""
    return None if price is None else (input_tokens * price["input"] + output_tokens * price["output"]) / 1e6


def batch_price(model: str, price: dict[str, float] | None, env: Mapping[str, str] | None = None) -> dict[str, float] | None:
    """USD per 1M tokens through a batch API: LMMS_VR_JUDGE_PRICES's `batch_input`/`batch_output`
    for the model, else `BATCH_DISCOUNT` x ``price`` for OpenAI models (None: no batch price known)."""
    entry = _price_table(env).get(model, {})
    if "batch_input" in entry and "batch_output" in entry:
        return {"input": entry["batch_input"], "output": entry["batch_output"]}
    from lmms_video_reasoning.judges.tokens import encoding_name

    if price is None or encoding_name(model) is None:
        return None
    return {"input": price["input"] * BATCH_DISCOUNT, "output": price["output"] * BATCH_DISCOUNT}


class JudgeConfigError(RuntimeError):
    """The judge cannot run as configured (bad variable, rejected key, unknown model); raised instead
    of retrying. The message names the environment variable to fix and never contains the key."""


@dataclass(frozen=True)
class HostJudge:
    """A judge endpoint the host harness configures (lmms-eval: `API_TYPE=local`, or the server its
    `--launcher_args` starts), used when no LMMS_VR_JUDGE_* variable is set. ``model`` None: the one
    the endpoint lists; ``source``: named in errors instead of a variable."""

    base_url: str
    model: str | None
    api_key: str | None = field(default=None, repr=False)
    source: str = "the host harness"
    started: bool = True  # False while the host has yet to start the server
    model_variable: str = OVERRIDE_MODEL  # what names the model when the endpoint lists several


# Set by the host seam (`utils/lmms`), which knows the harness's conventions: env -> HostJudge | None.
_host_judge: "Callable[[Mapping[str, str]], HostJudge | None] | None" = None


def register_host_judge(resolver: "Callable[[Mapping[str, str]], HostJudge | None] | None") -> None:
    global _host_judge
    _host_judge = resolver


def host_judge(env: Mapping[str, str] | None = None) -> HostJudge | None:
    """The host's judge for ``env``: None when an LMMS_VR_JUDGE_* variable is set (they win) or the host names none."""
    env = os.environ if env is None else env
    if _host_judge is None or any(_get(env, name) for name in (OVERRIDE_BASE_URL, OVERRIDE_API_KEY, OVERRIDE_MODEL)):
        return None
    return _host_judge(env)


def benchmark_defaults(benchmark: "str | JudgeDefaults") -> JudgeDefaults:
    """The declaration itself, or what the registered benchmark of that name declares (ValueError if none)."""
    if isinstance(benchmark, JudgeDefaults):
        return benchmark
    from lmms_video_reasoning.utils.core import registry

    try:
        return registry.judge_defaults(benchmark)
    except (ValueError, ImportError) as error:  # unknown; or a copy without the registry's benchmarks
        raise ValueError(f"no judge declared for {benchmark!r} ({error})") from None


def judge_name(benchmark: "str | JudgeDefaults") -> str:
    return benchmark.benchmark if isinstance(benchmark, JudgeDefaults) else benchmark


@dataclass(frozen=True)
class JudgeConfig:
    """Everything a ``Judge`` needs (``JudgeConfig.from_env``)."""

    model: str = "gpt-4o-2024-08-06"
    base_url: str | None = None  # None: the openai client's default (api.openai.com)
    api_key: str | None = field(default=None, repr=False)
    benchmark: str = "custom"
    key_env: str = OVERRIDE_API_KEY  # variable the key came from (named in errors)
    base_url_env: str = OVERRIDE_BASE_URL
    model_env: str = OVERRIDE_MODEL
    concurrency: int = CONCURRENCY.default
    cache_path: Path | None = None  # None: no persistent cache
    max_calls: int | None = None  # budget of HTTP requests; None: unlimited
    timeout: float = TIMEOUT.default
    max_reply_bytes: int = MAX_REPLY_BYTES.default
    max_attempts: int = 6  # per request, including the first
    backoff_base: float = 1.0  # seconds; doubled per attempt, jittered
    backoff_max: float = 30.0
    retry_after_cap: float = 60.0  # never sleep longer than this for a Retry-After header
    prices: tuple[tuple[str, float, float], ...] = ()  # (model, input, output) overrides, USD / 1M tokens

    def __repr__(self) -> str:
        # The dataclass repr would show credentials embedded in the base URL (user info, query).
        shown = ", ".join(f"{name}={value!r}" for name, value in self.public_dict().items())
        return f"JudgeConfig({shown})"

    @property
    def endpoint(self) -> str:
        """The endpoint as recorded with cached replies and in the accounting (no credentials)."""
        return redact_url(self.base_url) if self.base_url else OPENAI_DEFAULT_BASE_URL

    def price(self) -> dict[str, float] | None:
        """USD per 1M input/output tokens, or None when unknown."""
        for model, input_price, output_price in self.prices:
            if model == self.model:
                return {"input": input_price, "output": output_price}
        return DEFAULT_PRICES.get(self.model)

    def public_dict(self) -> dict:
        """Configuration safe to log or write: no key, no credentials in the URL."""
        return {
            "benchmark": self.benchmark,
            "model": self.model,
            "base_url": self.endpoint if self.base_url else f"{OPENAI_DEFAULT_BASE_URL} (openai default)",
            "model_from": self.model_env,
            "api_key_variable": self.key_env if self.api_key and self.api_key != DUMMY_API_KEY else None,
            "concurrency": self.concurrency,
            "cache_path": str(self.cache_path) if self.cache_path else None,
            "max_calls": self.max_calls,
            "timeout_s": self.timeout,
            "max_reply_bytes": self.max_reply_bytes,
            "max_attempts": self.max_attempts,
            "price_usd_per_1m_tokens": self.price(),
        }

    @classmethod
    def from_env(cls, benchmark: "str | JudgeDefaults", env: Mapping[str, str] | None = None,
                 host_settings: bool = True) -> "JudgeConfig | None":
        """The judge of ``benchmark`` (its name, or its ``JudgeDefaults``) the environment configures
        (see the module doc; ``host_settings=False``: not the host's judge), None if none is."""
        defaults = benchmark_defaults(benchmark)
        env = os.environ if env is None else env

        override_url = _get(env, OVERRIDE_BASE_URL)
        host = host_judge(env) if host_settings else None
        if host is not None:
            base_url, base_url_env = _check_url(host.base_url, host.source), host.source
            api_key, key_env = host.api_key or DUMMY_API_KEY, host.source
        elif override_url:
            # The override endpoint only ever receives the override key, so a provider key
            # (OPENAI_API_KEY, DEEPSEEK_API_KEY) is never sent to a local or third-party server.
            base_url, base_url_env = _check_url(override_url, OVERRIDE_BASE_URL), OVERRIDE_BASE_URL
            api_key, key_env = _get(env, OVERRIDE_API_KEY) or DUMMY_API_KEY, OVERRIDE_API_KEY
        else:
            api_key, key_env = _first(env, (OVERRIDE_API_KEY, defaults.key_env))
            if not api_key:
                return None
            url, base_url_env = _first(env, defaults.base_url_envs)
            # lmms-eval's older tasks put the full ``.../chat/completions`` endpoint in OPENAI_API_URL
            base_url = _check_url(re.sub(r"/chat/completions/?$", "", url.rstrip("/")), base_url_env) if url else defaults.base_url
            base_url_env = base_url_env or "(built-in default)"

        timeout = read_setting(TIMEOUT, env)
        model, model_env = (host.model or None, host.source) if host is not None else named_model(benchmark, env)
        if model is None and (host is not None or override_url):
            # A custom endpoint (or the host's server) serves its own model: never label its replies
            # with the benchmark's default judge (they would be cached and reported as GPT-4o's).
            where, variable = (f"the judge of {host.source} names no model", host.model_variable) if host is not None else (
                f"{OVERRIDE_BASE_URL}={redact_url(base_url)} is set without {OVERRIDE_MODEL}", OVERRIDE_MODEL)
            model = served_model(base_url, api_key, timeout, where, variable)
            model_env = f"GET {redact_url(base_url)}/models"
        elif model is None:
            model, model_env = defaults.model, "(built-in default)"

        return cls(model=model, base_url=base_url, api_key=api_key, benchmark=judge_name(benchmark), key_env=key_env,
                   base_url_env=base_url_env, model_env=model_env, timeout=timeout, cache_path=cache_path_from_env(env),
                   concurrency=read_setting(CONCURRENCY, env), max_calls=read_setting(MAX_CALLS, env),
                   max_reply_bytes=read_setting(MAX_REPLY_BYTES, env), prices=price_overrides(env))


def named_model(benchmark: "str | JudgeDefaults", env: Mapping[str, str] | None = None) -> tuple[str | None, str]:
    """(model, variable) the environment names for ``benchmark``'s judge, or (None, "") when none does."""
    return _first(os.environ if env is None else env, (OVERRIDE_MODEL, benchmark_defaults(benchmark).model_env))


def default_model(benchmark: "str | JudgeDefaults") -> str:
    """The judge model ``benchmark`` uses without a custom endpoint (named, else the built-in default)."""
    return named_model(benchmark)[0] or benchmark_defaults(benchmark).model


def served_model(base_url: str, api_key: str | None, timeout: float, where: str, model_variable: str) -> str:
    """The one model an endpoint lists at ``GET <base_url>/models``; JudgeConfigError saying ``where`` and
    naming ``model_variable`` when it cannot tell (unreachable, no route, several)."""
    try:
        listed = _listed_models(base_url, api_key, timeout)
    except LookupError as cause:
        # The cause first: "connection refused" is the problem to fix, not the missing model name.
        raise JudgeConfigError(f"{where}, and the endpoint's model list (GET /models) could not be read ({cause}): "
                               f"check that the endpoint is up, or set {model_variable} to the model it serves") from None
    if len(listed) != 1:
        raise JudgeConfigError(f"{where}, and the endpoint lists {len(listed)} models "
                               f"({', '.join(listed[:10]) or 'none'}): set {model_variable} to the judge model")
    return listed[0]


@functools.lru_cache(maxsize=None)
def _listed_models(base_url: str, api_key: str | None, timeout: float) -> tuple[str, ...]:
    """The models ``GET <base_url>/models`` lists, asked once per process; LookupError naming why not."""
    import httpx

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        response = httpx.get(base_url.rstrip("/") + "/models", headers=headers, timeout=min(timeout, 30.0))
        if response.status_code != 200:
            raise LookupError(f"HTTP {response.status_code}")
        return tuple(str(entry["id"]) for entry in response.json()["data"])
    except httpx.ConnectError as error:
        raise LookupError(connect_error_reason(error, redact_url(base_url))) from None
    except httpx.HTTPError as error:
        raise LookupError(type(error).__name__) from None
    except (ValueError, KeyError, TypeError):
        raise LookupError("not an OpenAI-style model list") from None


def connect_error_reason(error: BaseException, endpoint: str) -> str:
    """A short, key-free description of why ``endpoint`` could not be connected to."""
    text = str(error)
    lowered = text.lower()
    if "refused" in lowered:
        what = "connection refused"
    elif any(marker in lowered for marker in ("name or service not known", "nodename nor servname", "name resolution",
                                              "getaddrinfo", "no address associated")):
        what = "the host name does not resolve (DNS)"
    elif any(marker in lowered for marker in ("ssl", "tls", "certificate")):
        what = f"TLS error ({text[:160]})"
    else:
        what = f"cannot connect ({type(error).__name__}: {text[:160]})"
    return f"{what} at {endpoint}"


def not_configured_message(benchmark: "str | JudgeDefaults") -> str:
    """The one line telling a user which variables enable the judge of ``benchmark``."""
    defaults = benchmark_defaults(benchmark)
    return (
        f"{judge_name(benchmark)}: no LLM judge configured, judge-based metrics will be reported as not computed. "
        f"Set {defaults.key_env} (judge {defaults.model}), or {OVERRIDE_BASE_URL} "
        f"[+ {OVERRIDE_API_KEY}, {OVERRIDE_MODEL}] for another OpenAI-compatible endpoint."
    )


def redact_url(url: str) -> str:
    """The URL without user info and query string (Azure-style keys can sit in either)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def _get(env: Mapping[str, str], name: str) -> str | None:
    return (env.get(name) or "").strip() or None


def _first(env: Mapping[str, str], names: tuple[str, ...]) -> tuple[str | None, str]:
    """(value, name) of the first variable set, else (None, "")."""
    for name in names:
        value = _get(env, name) if name else None
        if value:
            return value, name
    return None, ""


def _check_url(url: str, variable: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise JudgeConfigError(f"{variable} must be an http(s) URL such as http://127.0.0.1:8000/v1, got {redact_url(url)!r}")
    return url.rstrip("/")


def read_setting(setting: settings.Setting, env: Mapping[str, str] | None = None) -> Any:
    """The setting's value; a bad one is a JudgeConfigError (naming the variable and what it accepts)."""
    try:
        return setting.read(env)
    except settings.SettingError as error:
        raise JudgeConfigError(str(error)) from None


def cache_path_from_env(env: Mapping[str, str] | None = None) -> Path | None:
    """The judge cache file LMMS_VR_JUDGE_CACHE names (unset: the default path; ``off``: None)."""
    raw = CACHE.read(env)
    if not raw:
        import platformdirs

        return Path(platformdirs.user_cache_dir("lmms_video_reasoning")) / "judge_cache.sqlite"
    if raw.lower() in ("off", "none", "0", "false", "no"):
        return None
    return Path(raw).expanduser()


def price_overrides(env: Mapping[str, str] | None = None) -> tuple[tuple[str, float, float], ...]:
    return tuple(sorted((model, entry["input"], entry["output"]) for model, entry in _price_table(env).items()))


def _price_table(env: Mapping[str, str] | None) -> dict[str, dict[str, float]]:
    raw = PRICES.read(env)
    if not raw:
        return {}
    example = '{"gpt-4o-2024-08-06": {"input": 2.5, "output": 10}}'
    table = {}
    try:
        for model, entry in json.loads(raw).items():
            names = ("input", "output") + tuple(name for name in ("batch_input", "batch_output") if name in entry)
            table[str(model)] = {name: float(entry[name]) for name in names}
    except (ValueError, TypeError, KeyError, AttributeError):
        raise JudgeConfigError(f"LMMS_VR_JUDGE_PRICES must be JSON like {example} (USD per 1M tokens)") from None
    return table
