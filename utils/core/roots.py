"""Where each benchmark's data lives: `$<BENCH>_ROOT` when set (`lmms-vr prepare` fills it), else a
default folder under the user cache. Annotations missing from the default folder are fetched from
the Hub on first use; media (hundreds of GB) never are: a missing video is an error naming the
file, the variable and the command that fetches it.
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from lmms_video_reasoning.utils.core.data_errors import DataError  # noqa: F401 - also this module's interface (`roots.DataError`)

# The installed huggingface_hub's CLI (`hf`; `huggingface-cli` is its deprecated name).
HF_LOGIN = "hf auth login"
HF_WHOAMI = "hf auth whoami"


class MediaError(DataError):
    """A video / subtitle / clip file is missing, empty or unreadable."""


@dataclass(frozen=True)
class DataSource:  # each benchmark's `data.SOURCE`
    benchmark: str  # the benchmark's registry name: the `lmms-vr prepare` argument
    hub_repo: str  # Hugging Face dataset id
    root_env: str  # environment variable naming a local copy

    @property
    def prepare_command(self) -> str:
        return f"lmms-vr prepare {self.benchmark} --root DIR && export {self.root_env}=DIR"


# A root holding part of a release on purpose (the generated sample writes it): `lmms-vr prepare`
# prints its record counts instead of checking them against the release (as `--subset` does).
SUBSET_MARKER = ".lmms_vr_subset.json"


def cache_home() -> Path:
    user_cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(os.environ.get("LMMS_VR_CACHE") or os.path.join(user_cache, "lmms_video_reasoning"))


def root_problem(source: DataSource) -> str | None:
    """Why `$<BENCH>_ROOT` cannot be the benchmark's root (set, but not a folder), or None."""
    value = os.environ.get(source.root_env, "").strip()
    if value and not Path(value).expanduser().is_dir():
        return f"{source.root_env}={value} is not a directory; point it at a copy made by `{source.prepare_command}`"
    return None


def data_root(source: DataSource) -> Path:
    problem = root_problem(source)
    if problem:
        raise DataError(problem)
    value = os.environ.get(source.root_env, "").strip()
    return Path(value).expanduser() if value else cache_home() / "data" / source.benchmark


@functools.lru_cache(maxsize=8)
def _unreachable(endpoint: str) -> str | None:
    """Why the Hub at `endpoint` cannot be reached (None when a TCP connection opens within 3 s);
    asked once per process (lmms-eval retries task loading)."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(endpoint)
    try:
        with socket.create_connection((parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)), timeout=3):
            return None
    except OSError as exc:
        return f"the Hugging Face Hub ({endpoint}) is unreachable ({exc.strerror or type(exc).__name__})"


def annotation_file(source: DataSource, relpath: str) -> Path:
    """Path of an annotation file, downloaded from the Hub when no local root is set (with no root
    and no Hub, a DataError at once naming the variable and the `prepare` command)."""
    root = data_root(source)
    path = root / relpath
    if path.is_file():
        return path
    if os.environ.get(source.root_env):
        raise DataError(f"annotation file {path} not found under {source.root_env}={root}; fetch it with `{source.prepare_command}`")
    from huggingface_hub import constants

    why = "HF_HUB_OFFLINE=1 is set" if constants.HF_HUB_OFFLINE else _unreachable(constants.ENDPOINT)
    if why:
        # Inside lmms-eval, the task-load wrapper (`utils.lmms.preflight.task_load`) ends the run with
        # this message alone (lmms-eval would retry it for a minute and bury it in a RetryError).
        raise DataError(
            f"{source.benchmark}: no local copy ({source.root_env} is not set and {path} does not exist) and {why}, "
            f"so {source.hub_repo} cannot be fetched. "
            f"Set {source.root_env} to a copy made by `{source.prepare_command}` (run where the Hub is reachable), "
            "then run offline with HF_HUB_OFFLINE=1")
    try:
        from huggingface_hub import hf_hub_download

        return Path(hf_hub_download(source.hub_repo, relpath, repo_type="dataset", local_dir=str(root)))
    except Exception as exc:  # network, gating, auth: each gets its own advice
        raise hub_error(source, exc) from None


def hub_error(source: DataSource, exc: Exception) -> DataError:
    """A failed download from the Hub as an error naming the fix (gated, not visible, anything else)."""
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    if isinstance(exc, GatedRepoError):
        return DataError(f"{source.hub_repo} is gated: accept its terms on its Hugging Face page, then "
                         f"`{HF_LOGIN}` (or set HF_TOKEN) and rerun")
    if isinstance(exc, RepositoryNotFoundError):
        return DataError(f"{source.hub_repo} not found or not visible with your token: check `{HF_WHOAMI}`")
    first_line = str(exc).splitlines()[0] if str(exc) else ""
    return DataError(
        f"download from {source.hub_repo} failed ({type(exc).__name__}: {first_line}). Rerun to resume; without "
        f"internet, copy the dataset by other means and run `lmms-vr prepare {source.benchmark} --root DIR --skip-download`"
        f" (then set {source.root_env}=DIR)")


def read_json(path: Path) -> Any:
    """Parse a JSON file, or JSON Lines (`read_jsonl`) when the name ends in .jsonl; errors name the file."""
    try:
        if str(path).endswith(".jsonl"):
            return read_jsonl(path)
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise DataError(f"cannot read annotation file {path}: {exc.strerror}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"annotation file {path} is not valid JSON (line {exc.lineno}: {exc.msg})") from None


def read_jsonl(path: Path, error: type[DataError] = DataError) -> list[dict]:
    """The JSON objects of a .jsonl file, blank lines skipped (bytes that are not UTF-8 replaced); a
    malformed line raises `error` naming the file and its 1-based line number."""
    rows = []
    # binary lines end at b"\n" only (`str.splitlines` also splits on U+2028, which JSON allows raw in strings)
    with Path(path).open("rb") as handle:
        for line_no, raw in enumerate(handle, 1):
            if not raw.strip():
                continue
            try:
                row = json.loads(raw.decode("utf-8", errors="replace"))
            except json.JSONDecodeError as exc:
                raise error(f"{path}:{line_no}: not valid JSON ({exc.msg})") from None
            if not isinstance(row, dict):
                raise error(f"{path}:{line_no}: expected a JSON object")
            rows.append(row)
    return rows


def require_media(source: DataSource, path: Path | None, described: str) -> Path:
    """`path` when it is a non-empty file; else MediaError naming `described` (e.g. "video
    cg_videos_720p/x.mp4"), the root, the variable and the fix."""
    if path is None or not Path(path).is_file():
        raise MediaError(f"{described} not found under {data_root(source)} (searched where every supported layout "
                         f"puts it). Set {source.root_env} to your copy of {source.hub_repo}, or fetch it with "
                         f"`{source.prepare_command}`")
    if Path(path).stat().st_size == 0:
        raise MediaError(f"media file is empty: {path}. Re-download it with `{source.prepare_command}`")
    return Path(path)


@functools.lru_cache(maxsize=4096)
def _video_problem(path: str, size: int, mtime: float) -> str | None:
    """Why a video file cannot be decoded: it must open, have a video stream and yield a first frame."""
    if size == 0:
        return "the file is empty"
    try:
        import av

        with av.open(path) as container:
            if not container.streams.video:
                return "it has no video stream"
            for _frame in container.decode(video=0):
                return None
            return "no frame could be decoded"
    except Exception as exc:  # av raises many kinds for truncated / corrupt containers
        return f"it cannot be decoded ({type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''})"


def video_problem(path: str | os.PathLike) -> str | None:
    """Why `path` is not a usable video (missing, empty, corrupt, no video stream), or None."""
    try:
        stat = os.stat(path)
    except OSError:
        return "it does not exist"
    return _video_problem(str(path), stat.st_size, stat.st_mtime)


def usable_video(source: DataSource, path: Path) -> Path:
    """`path` if it decodes, else MediaError naming the file and the fix (models that take a path,
    such as lmms-eval's `qwen2_vl`, would swallow the decoder error and answer from the text alone)."""
    problem = video_problem(path)
    if problem:
        raise MediaError(f"video {path} is unusable: {problem}. Re-download it with `{source.prepare_command}` "
                         f"(or `lmms-vr prepare {source.benchmark} --root DIR --verify-only` to list every bad file)")
    return path


def docs_dataset(docs: Sequence[dict]):
    """An Arrow dataset of task documents (the value returned by a `process_docs` hook)."""
    import datasets

    if not docs:
        raise DataError("no documents to evaluate: the annotation file is empty")
    return datasets.Dataset.from_list(list(docs))
