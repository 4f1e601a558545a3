"""lmms-eval's own judge settings for this suite's judges, and lmms-eval's judge server kept alive for them.

With no LMMS_VR_JUDGE_* variable set, the suite's judges follow lmms-eval's (`lmms_judge`):

- `--launcher_args name=sglang,model=M,host=H,port=P[,api_key=K]`: the server lmms-eval starts on
  rank 0 after generation judges every benchmark with model M at http://H:P/v1;
- else `API_TYPE=local`: `LLM_JUDGE_URL` (default http://localhost:8000/v1/chat/completions; the
  route is stripped) with model `MODEL_VERSION` (else the one the server lists), no key;
- else `API_TYPE=openai` (the default): VCR-Bench and CG-Bench already read `OPENAI_API_KEY`,
  `OPENAI_API_URL` and `MODEL_VERSION` (VRBench keeps its DeepSeek judge);
- `API_TYPE=azure|async_azure|bedrock|dummy`: not an endpoint our judges can call; one WARNING
  names LMMS_VR_JUDGE_*, and the benchmarks' own defaults apply.

lmms-eval calls the launcher's `clean()` (killing the server) right before aggregation, which is
when this suite judges: the launcher is wrapped so that `clean()` waits until every task's
aggregation has run (`consolidate_results`), or the process exits (touchpoint `judge-server`).
"""

from __future__ import annotations

import atexit
import functools
import logging
import threading
from typing import Any, Mapping

from lmms_video_reasoning.judges import config as judge_config
from lmms_video_reasoning.judges.config import HostJudge
from lmms_video_reasoning.utils.lmms import host

log = logging.getLogger("lmms_video_reasoning")

DEFAULT_LOCAL_URL = "http://localhost:8000/v1/chat/completions"  # lmms_eval.llm_judge.providers.local
UNSUPPORTED_API_TYPES = ("azure", "async_azure", "bedrock", "dummy")

_lock = threading.Lock()
_launchers: list["KeptAliveLauncher"] = []  # built by lmms-eval in this process, newest last


class KeptAliveLauncher:
    """lmms-eval's launcher, whose `clean()` waits until this suite's judging is done (every other
    attribute is the launcher's)."""

    def __init__(self, launcher: Any, name: str) -> None:
        self.launcher, self.name = launcher, name
        self.launched = self.clean_requested = self.cleaned = False

    def __getattr__(self, attribute: str):
        return getattr(self.launcher, attribute)

    @property
    def base_url(self) -> str:
        return f"http://{self.launcher.host}:{self.launcher.port}/v1"

    def launch(self, *args: Any, **kwargs: Any) -> Any:
        result = self.launcher.launch(*args, **kwargs)
        self.launched = True
        atexit.register(self.finish)  # if lmms-eval never reaches consolidate_results
        log.info("lmms-eval's judge server (--launcher_args name=%s, model %s) is up at %s; this suite's judges use it "
                 "and it is stopped once they are done", self.name, self.launcher.model, self.base_url)
        return result

    def clean(self, *args: Any, **kwargs: Any) -> None:  # held back until `finish` (after aggregation)
        self.clean_requested = True

    def finish(self) -> None:
        with _lock:
            if self.cleaned or not self.launched:
                return
            self.cleaned = True
        try:
            self.launcher.clean()
        except Exception as error:  # noqa: BLE001 - never mask the run's own outcome
            log.warning("stopping lmms-eval's judge server (%s) failed: %s: %s", self.name, type(error).__name__, error)


def lmms_judge(env: Mapping[str, str]) -> HostJudge | None:
    """The judge lmms-eval's settings name, or None (the benchmarks' own defaults)."""
    with _lock:
        launcher = _launchers[-1] if _launchers else None
    if launcher is not None and not launcher.cleaned:
        server = launcher.launcher
        return HostJudge(base_url=launcher.base_url, model=str(server.model), api_key=getattr(server, "api_key", None),
                         source=f"lmms-eval --launcher_args name={launcher.name}", started=launcher.launched,
                         model_variable="--launcher_args model=...")
    api_type = (env.get("API_TYPE") or "").strip().lower()
    if api_type == "local":
        url = (env.get("LLM_JUDGE_URL") or "").strip() or DEFAULT_LOCAL_URL
        base = url.rstrip("/").removesuffix("/chat/completions")
        model = (env.get("MODEL_VERSION") or "").strip() or None
        return HostJudge(base_url=base, model=model, source="lmms-eval API_TYPE=local (LLM_JUDGE_URL)", model_variable="MODEL_VERSION")
    if api_type in UNSUPPORTED_API_TYPES:
        _warn_unsupported(api_type)
    return None


@functools.cache  # once per process and API type
def _warn_unsupported(api_type: str) -> None:
    log.warning("API_TYPE=%s (lmms-eval's %s judge provider) is not an OpenAI-compatible endpoint this suite's judges "
                "can call; they use their own defaults. Set LMMS_VR_JUDGE_BASE_URL, LMMS_VR_JUDGE_API_KEY and "
                "LMMS_VR_JUDGE_MODEL (e.g. Azure's <endpoint>/openai/v1) to judge with it.", api_type, api_type)


def register_judge_settings() -> None:
    judge_config.register_host_judge(lmms_judge)


def install() -> bool:
    """Register lmms-eval's judge settings, and wrap its launcher and `consolidate_results`
    (touchpoint `judge-server`); True when the wrapping is on."""
    register_judge_settings()

    def check_and_wrap() -> None:
        import lmms_eval.evaluator as evaluator

        host.require(callable(getattr(evaluator, "get_launcher", None)), "lmms_eval.evaluator.get_launcher is gone")
        host.require(callable(getattr(evaluator, "consolidate_results", None)), "lmms_eval.evaluator.consolidate_results is gone")
        host.wrap(evaluator, "get_launcher", _wrapped_get_launcher)
        host.wrap(evaluator, "consolidate_results", _wrapped_consolidate)

    return host.JUDGE_SERVER.install(check_and_wrap)


def _wrapped_get_launcher(get_launcher):
    def wrapped(*args: Any, **kwargs: Any):
        launcher_class = get_launcher(*args, **kwargs)
        name = str(args[0] if args else kwargs.get("name", "?"))

        def build(*build_args: Any, **build_kwargs: Any):
            launcher = launcher_class(*build_args, **build_kwargs)
            missing = [a for a in ("host", "port", "model", "launch", "clean") if not hasattr(launcher, a)]
            if missing:
                host.JUDGE_SERVER.switch_off(f"the {name} launcher has no {', '.join(missing)}")
                return launcher
            host.JUDGE_SERVER.worked()
            kept = KeptAliveLauncher(launcher, name)
            with _lock:
                _launchers.append(kept)
            return kept

        return build

    return wrapped


def _wrapped_consolidate(consolidate):
    def wrapped(*args: Any, **kwargs: Any):
        # every task's aggregation (this suite's judging) has run: lmms-eval's requested clean() now
        with _lock:
            requested = [launcher for launcher in _launchers if launcher.clean_requested]
        for launcher in requested:
            launcher.finish()
        return consolidate(*args, **kwargs)

    return wrapped

