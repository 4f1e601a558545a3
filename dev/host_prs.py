"""Host pull requests: small changes to lmms-eval itself, each useful to every task.

They replace what the plugin patches into lmms-eval at import time today (`utils/lmms/plugin.py`,
`autoload.py`, `judge_usage.py`) with the change lmms-eval would carry itself, (08) bring the
idea of the plugin's fast inputs (`utils/lmms/model_video.py`) into the `qwen2_vl` model itself,
and (09) let lmms-eval's evaluator run on filelock 4.3 (the plugin bounds filelock below it
until then). Each PR is a set of anchored edits to files of the clean tree (the anchor must
occur exactly once: a tree it does not fit is an error, never a silent skip) and new files
(`host_pr_files/<slug>/`, mirroring the tree; tests where lmms-eval's repository keeps them,
`test/eval/` and `test/models/`), with its description below in the form of lmms-eval's PR
template. Each has a user: a gap or bug of lmms-eval itself its test shows. The aggregation
standard errors (05) and the launcher's judge server kept up until aggregation (07) left the
series: no task of it needs them (docs/upstream.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent / "host_pr_files"


@dataclass(frozen=True)
class Edit:
    path: str
    old: str
    new: str


@dataclass(frozen=True)
class HostPR:
    number: int
    slug: str
    title: str
    edits: tuple[Edit, ...]
    tests: tuple[str, ...]  # its test files, and the tree's own tests of what it changes (run where the tree has them)
    description: str
    numbers: str = ""  # measured outside the validation (a benchmark of this repository, with its command)


# The "Type of Change" boxes of lmms-eval's PR template (.github/pull_request_template.md), in its order.
CHANGE_TYPES = ("Bug fix (non-breaking change)", "New feature", "New benchmark/task", "New model integration", "Breaking change",
                "Documentation update", "Refactoring (no functional changes)")


def type_of_change(*ticked: str) -> str:
    """The template's last section with the boxes `ticked`."""
    unknown = set(ticked) - set(CHANGE_TYPES)
    if unknown:
        raise ValueError(f"not a type of change of the PR template: {sorted(unknown)}")
    return "## Type of Change\n" + "".join(f"- [{'x' if kind in ticked else ' '}] {kind}\n" for kind in CHANGE_TYPES)


def _apply(tree: Path, edits: tuple[Edit, ...]) -> dict[str, bytes]:
    from upstream import UpstreamError

    texts: dict[str, str] = {}
    for edit in edits:
        text = texts.get(edit.path)
        if text is None:
            source = tree / edit.path
            if not source.is_file():
                raise UpstreamError(f"{edit.path} is not in {tree}: this host PR is written for lmms-eval 0.7.3")
            text = source.read_text(encoding="utf-8")
        if text.count(edit.old) != 1:
            raise UpstreamError(f"{edit.path}: the text this PR changes occurs {text.count(edit.old)} times (expected once): "
                                f"{edit.old.strip().splitlines()[0][:80]!r}; this host PR is written for lmms-eval 0.7.3")
        texts[edit.path] = text.replace(edit.old, edit.new)
    return {path: text.encode("utf-8") for path, text in texts.items()}


def _new_files(slug: str) -> dict[str, bytes]:
    base = HERE / slug
    return {path.relative_to(base).as_posix(): path.read_bytes() for path in sorted(base.rglob("*"))
            if path.is_file() and "__pycache__" not in path.parts}


def pull_requests(tree: Path) -> list:
    """The host PRs as `upstream.PullRequest`s against `tree`."""
    from upstream import PullRequest, UpstreamError

    prs = []
    for pr in HOST_PRS:
        new = _new_files(pr.slug)
        if not new:
            raise UpstreamError(f"host PR {pr.slug}: no files under {HERE / pr.slug} (its tests at least)")
        edited = _apply(Path(tree), pr.edits)
        base = {path: (Path(tree) / path).read_bytes() for path in edited}
        spec = {"tasks": {}, "numbers": pr.numbers}
        prs.append(PullRequest(pr.number, pr.slug, pr.title, "host", {**new, **edited}, pr.description, spec, list(pr.tests), base))
    return prs


def patched_copy(slug: str, package: Path, target: Path) -> Path:
    """A copy of the lmms_eval package folder `package` (e.g. the installed one) with host PR `slug`'s
    changes to `lmms_eval/` applied; returns the folder to put first on `sys.path` / PYTHONPATH."""
    import shutil

    tree = Path(target) / "tree"
    shutil.copytree(package, tree / "lmms_eval", ignore=shutil.ignore_patterns("__pycache__"))
    [pr] = [pr for pr in HOST_PRS if pr.slug == slug]
    for path, content in _apply(tree, pr.edits).items():
        (tree / path).write_bytes(content)
    for path, content in _new_files(slug).items():
        if path.startswith("lmms_eval/"):
            (tree / path).parent.mkdir(parents=True, exist_ok=True)
            (tree / path).write_bytes(content)
    return tree


# ------------------------------------------------------------------------------ 04: judge cache and counted judge requests

JUDGE_CACHE = HostPR(
    4, "llm-judge-cache", "llm_judge: a judge-reply cache (LMMS_EVAL_JUDGE_CACHE) and every judge request counted in results[\"usage\"]",
    (
        Edit("lmms_eval/llm_judge/__init__.py", "from .base import ServerInterface\n",
             "from .base import ServerInterface\nfrom .cache import accounted, cache_from_env\n"),
        Edit("lmms_eval/llm_judge/__init__.py", '''        An instance of ServerInterface.
    """
    return ProviderFactory.create_provider(api_type=server_name, config=config)
''', '''        An instance of ServerInterface, its requests counted in the run's usage and, with
        ``LMMS_EVAL_JUDGE_CACHE`` set, answered from that cache when they can be.
    """
    return accounted(ProviderFactory.create_provider(api_type=server_name, config=config), cache_from_env())
'''),
        Edit("lmms_eval/models/model_utils/usage_metrics.py", "import threading\n", "import threading\nfrom collections import Counter\n"),
        Edit("lmms_eval/models/model_utils/usage_metrics.py", '''_CURRENT_TASK_CONTEXT: Optional[str] = None
''', '''_CURRENT_TASK_CONTEXT: Optional[str] = None

# LLM-judge requests by (task, outcome): "answered" by the provider, "cached" (LMMS_EVAL_JUDGE_CACHE),
# "failed: <exception type>" or "failed: unsuccessful response". Their tokens are in _USAGE_HISTORY.
_JUDGE_REQUESTS: Counter = Counter()
'''),
        Edit("lmms_eval/models/model_utils/usage_metrics.py", '''    with _USAGE_LOCK:
        _USAGE_HISTORY.clear()
''', '''    with _USAGE_LOCK:
        _USAGE_HISTORY.clear()
        _JUDGE_REQUESTS.clear()
'''),
        Edit("lmms_eval/models/model_utils/usage_metrics.py", '''def is_budget_exceeded() -> bool:''', '''def log_judge_request(outcome: str, task_name: Optional[str] = None) -> None:
    """Count one LLM-judge request by its outcome (see ``_JUDGE_REQUESTS``); the task falls back to
    ``_CURRENT_TASK_CONTEXT`` as in ``log_usage``."""
    with _USAGE_LOCK:
        _JUDGE_REQUESTS[(task_name or _CURRENT_TASK_CONTEXT or "_unknown", outcome)] += 1


def summarize_judge_requests() -> Dict[str, Any]:
    """The judge requests' outcomes, in total and by task ({} when there were none). Failed ones are
    logged as a warning too: a score computed without some of its judgments must not pass unnoticed."""
    with _USAGE_LOCK:
        counts = dict(_JUDGE_REQUESTS)
    total: Counter = Counter()
    by_task: Dict[str, Counter] = {}
    for (task, outcome), n in counts.items():
        total[outcome] += n
        by_task.setdefault(task, Counter())[outcome] += n
    failed = {outcome: n for outcome, n in total.items() if outcome.startswith("failed")}
    if failed:
        eval_logger.warning("LLM judge: {} of {} requests failed: {}", sum(failed.values()), sum(total.values()), failed)
    return {"total": dict(total), "by_task": {task: dict(outcomes) for task, outcomes in by_task.items()}} if counts else {}


def is_budget_exceeded() -> bool:'''),
        Edit("lmms_eval/models/model_utils/usage_metrics.py", '''    with _USAGE_LOCK:
        history = list(_USAGE_HISTORY)

    if not history:
        return {}
''', '''    with _USAGE_LOCK:
        history = list(_USAGE_HISTORY)
    judge_requests = summarize_judge_requests()

    if not history:
        return {"judge_requests": judge_requests} if judge_requests else {}
'''),
        Edit("lmms_eval/models/model_utils/usage_metrics.py", '''        "budget_exceeded": _BUDGET_EXCEEDED,
        "budget_total_tokens": _BUDGET,
    }
''', '''        "budget_exceeded": _BUDGET_EXCEEDED,
        "budget_total_tokens": _BUDGET,
        **({"judge_requests": judge_requests} if judge_requests else {}),
    }
'''),
    ),
    ("test/eval/test_llm_judge_cache.py",),
    """## Summary
- `LMMS_EVAL_JUDGE_CACHE=<file>` (or `1`: `~/.cache/lmms_eval/judge_cache.sqlite`): a judge server from `get_server` answers a request it has answered before from a SQLite file, so a rerun, a resumed run or a second model judged against the same references pays for no judge call twice. Off by default.
- Every judge request is counted by outcome (answered, cached, failed and why), in total and by task, in `results["usage"]["judge_requests"]`, beside the judge tokens `usage_metrics` already records; failed requests are also logged as one warning at the end of the run.
- Both cover every way a task reaches the judge: `evaluate`, `evaluate_async`, `evaluate_batch` and the `evaluate_binary`/`comparative`/`rubric` helpers, sync and async.

## In scope
- `lmms_eval/llm_judge/cache.py` (new): the SQLite cache (key: provider class, model, messages, images, temperature, max_tokens, top_p, response format, system prompt; only successful, non-empty replies are stored) and `accounted(server, cache)`, which wraps the provider's own `evaluate` and `evaluate_async` on the instance: every other method calls one of them, and an async provider's synchronous `evaluate` goes through `evaluate_async` (counted once).
- `get_server` returns the provider so wrapped (same class, same attributes). Who uses it: the 19 task folders that call `get_server` (`emma`, `holisafe`, `internal_eval`, `k12`, `llava-in-the-wild`, `llava_wilder`, `mathverse`, `mathvista`, `mme_cot`, `mmrefine`, `mmvet`, `mmvetv2`, `multilingual-llava-bench-in-the-wild`, `olympiadbench`, `omnispatial`, `spatialtreebench`, `stare`, `voicebench`, `wenet_speech`) and `lmms_eval.verifiers`' `openai` verifier.
- `usage_metrics`: `log_judge_request`, `summarize_judge_requests`; `reset_usage_metrics` clears them with the rest.
- Size: {size}

## Out of scope
- Which reply a task makes of a failed judgment (each task decides, as before); retries (the providers' own).
- Caching the evaluated model's own API calls (`ResponseCache` does that).

## Validation
{validation_bullets}

## Risk / Compatibility
- Nothing changes without `LMMS_EVAL_JUDGE_CACHE`, except the new `judge_requests` key in `results["usage"]` (absent when nothing was judged). With it, an identical request returns the stored reply: a judge run at temperature > 0 then stops sampling anew, which is the point of the cache and why it is opt-in.
- The wrapping replaces `evaluate`/`evaluate_async` on the provider instance; a provider overriding a helper (`evaluate_binary`...) without calling them would bypass it (none in this repository does).

""" + type_of_change("New feature"))

# ------------------------------------------------------------------------------ 06: tasks of installed packages

TASK_ENTRY_POINTS = HostPR(
    6, "task-entry-points", "tasks: task folders of installed packages (entry point group `lmms_eval.tasks`), and LMMS_EVAL_PLUGINS' task folders in every TaskManager",
    (
        Edit("lmms_eval/tasks/__init__.py", '''        if include_defaults:
            all_paths = [os.path.dirname(os.path.abspath(__file__)) + "/"]
        else:
            all_paths = []
''', '''        if include_defaults:
            all_paths = [os.path.dirname(os.path.abspath(__file__)) + "/", *installed_task_paths()]
        else:
            all_paths = []
'''),
        Edit("lmms_eval/tasks/__init__.py", '''class TaskManager:''', '''TASKS_ENTRY_POINT_GROUP = "lmms_eval.tasks"


def installed_task_paths() -> List[str]:
    """Task folders of installed packages: each entry point of the group `lmms_eval.tasks` names a
    folder (a string, a list of them, or a callable returning either), and each package of
    `LMMS_EVAL_PLUGINS` that has a `tasks` subpackage gives that folder. One that fails to load is
    logged and skipped; lmms-eval's own tasks win a name clash (they are indexed first)."""
    from importlib.metadata import entry_points
    from importlib.util import find_spec

    paths = []
    for entry_point in entry_points(group=TASKS_ENTRY_POINT_GROUP):
        try:
            value = entry_point.load()
            value = value() if callable(value) else value
            paths.extend([value] if isinstance(value, (str, os.PathLike)) else list(value))
        except Exception as error:
            eval_logger.warning(f"Task entry point {entry_point.name!r} ({entry_point.value}) could not be loaded: {error}")
    for plugin in filter(None, os.environ.get("LMMS_EVAL_PLUGINS", "").split(",")):
        try:
            spec = find_spec(f"{plugin}.tasks")
        except ImportError as error:
            eval_logger.warning(f"LMMS_EVAL_PLUGINS: {plugin!r} could not be imported: {error}")
            continue
        if spec is not None and spec.submodule_search_locations:  # a plugin of models only has none
            paths.append(spec.submodule_search_locations[0])
    return [str(path) for path in paths]


class TaskManager:'''),
        Edit("lmms_eval/__main__.py", "import datetime\nimport importlib\nimport json\n", "import datetime\nimport json\n"),
        Edit("lmms_eval/__main__.py", '''    if os.environ.get("LMMS_EVAL_PLUGINS", None):
        args.include_path = [args.include_path] if args.include_path else []
        for plugin in os.environ["LMMS_EVAL_PLUGINS"].split(","):
            package_tasks_location = importlib.util.find_spec(f"{plugin}.tasks").submodule_search_locations[0]
            args.include_path.append(package_tasks_location)

''', ""),
    ),
    ("test/eval/test_task_entry_points.py",),
    """## Summary
- lmms-eval finds the tasks of an installed package through a new entry point group, `lmms_eval.tasks`, the counterpart of the models' `lmms_eval.models`: every `TaskManager` that indexes the default tasks also indexes those folders, so `lmms-eval tasks list`, `--tasks`, `lmms-eval serve` and the wizard see them with no flag.
- Fixes `LMMS_EVAL_PLUGINS` for tasks. Its `<plugin>.tasks` folder was appended to `args.include_path` in `cli_evaluate_single` *after* the `TaskManager` had been built, so it never reached any command: with lmms-eval 0.7.3, `LMMS_EVAL_PLUGINS=demo_plugin lmms-eval --model dummy --tasks demo_plugin_task` ends in `ValueError: Tasks not found: demo_plugin_task` although `demo_plugin/tasks/` holds it (found with `--include_path`). The same folders now come from the `TaskManager` itself, beside the entry points, and the dead block goes.

## In scope
- `lmms_eval/tasks/__init__.py`: `installed_task_paths()` (entry points of `lmms_eval.tasks`, then `LMMS_EVAL_PLUGINS`' `tasks` folders), indexed after lmms-eval's own folder when `include_defaults` is set.
- `lmms_eval/__main__.py`: the block that appended `LMMS_EVAL_PLUGINS`' folders too late, and its `import importlib`, removed.
- A package declares its folder as

  ```toml
  [project.entry-points."lmms_eval.tasks"]
  my_tasks = "my_package:TASKS_DIR"   # a folder path, a list of them, or a callable returning either
  ```
- Size: {size}

## Out of scope
- `LMMS_EVAL_PLUGINS` for models (`_merge_legacy_plugin_models`, deprecated there in favour of `lmms_eval.models`): unchanged. For tasks it keeps working, now everywhere; the entry point group is the way that needs no environment variable.
- `--include_path`: unchanged, and still indexed after these folders.

## Validation
{validation_bullets}

## Risk / Compatibility
- One `importlib.metadata` scan per `TaskManager` (milliseconds); no entry point and no `LMMS_EVAL_PLUGINS`, no change. An entry point or plugin that fails to load is logged and skipped, so a broken package does not stop lmms-eval; lmms-eval's own tasks win a name clash.
- With `LMMS_EVAL_PLUGINS` set, its task folders now also reach `tasks list`, `serve` and the wizard, where they were missing.

""" + type_of_change("Bug fix (non-breaking change)", "New feature"))

# ------------------------------------------------------------------------------ 08: qwen2_vl decodes only the frames it keeps

# generate_until's frame selection in lmms-eval 0.7.3, which moves into Qwen2_VL._vision_inputs.
QWEN2_VL_SELECTION = '''            # TODO: Consider moving video frame sampling logic into process_vision_info or a helper.
            image_inputs, video_inputs = process_vision_info(batched_messages)
            if video_inputs is not None and len(video_inputs) > 0 and video_inputs[0] is not None:
                # Assuming video_inputs is a list where the first element holds the tensor
                video_tensor = video_inputs[0]
                if isinstance(video_tensor, torch.Tensor) and video_tensor.ndim > 0 and video_tensor.shape[0] > 0:
                    total_frames = video_tensor.shape[0]
                    indices = np.linspace(
                        0,
                        total_frames - 1,
                        self.max_num_frames,
                        dtype=int,
                        endpoint=True,
                    )  # Ensure endpoint=True
                    # Ensure unique indices if linspace produces duplicates for few frames
                    indices = np.unique(indices)
                    # Append the last frame index if not already included and needed
                    # if total_frames > 0 and total_frames - 1 not in indices:
                    #     indices = np.append(indices, total_frames - 1)
                    #     indices = np.unique(indices) # Ensure uniqueness again

                    # Limit to max_num_frames if appending last frame exceeded it
                    if len(indices) > self.max_num_frames:
                        # This might happen if linspace already picked close indices including the end
                        # Or if max_num_frames is very small. Prioritize evenly spaced.
                        indices = np.linspace(
                            0,
                            total_frames - 1,
                            self.max_num_frames,
                            dtype=int,
                            endpoint=True,
                        )
                        indices = np.unique(indices)

                    video_inputs[0] = video_tensor[indices]
                else:
                    eval_logger.warning(f"Unexpected video_inputs format or empty tensor: {type(video_tensor)}")
'''

QWEN2_VL_METHOD = '''    def _vision_inputs(self, batched_messages):
        """The processor's images and videos for a batch: a video as the frames the model keeps, at
        most `max_num_frames` evenly spaced among those qwen_vl_utils decodes (`kept_positions`).
        With `decode_kept_frames`, only those frames are decoded (the same tensor: see qwen_kept_frames)."""
        if self.decode_kept_frames:
            inputs = video_inputs_of_kept_frames(batched_messages, self.max_num_frames)
            if inputs is not None:
                return inputs
        image_inputs, video_inputs = process_vision_info(batched_messages)
        if video_inputs is not None and len(video_inputs) > 0 and video_inputs[0] is not None:
            # Assuming video_inputs is a list where the first element holds the tensor
            video_tensor = video_inputs[0]
            if isinstance(video_tensor, torch.Tensor) and video_tensor.ndim > 0 and video_tensor.shape[0] > 0:
                video_inputs[0] = video_tensor[kept_positions(video_tensor.shape[0], self.max_num_frames)]
            else:
                eval_logger.warning(f"Unexpected video_inputs format or empty tensor: {type(video_tensor)}")
        return image_inputs, video_inputs

    def generate_until(self, requests: List[Instance]) -> List[str]:
'''

NUMBERS_QWEN2_VL = """Measured with lmms-video-reasoning's `python benchmarks/qwen2_vl_kept_frames.py --json` (the repository this series comes from:
`Qwen2_VL._vision_inputs` with the model's defaults on one video message, each case in a fresh
process, peak = growth of the resident high-water mark during the call; 2 shared CPU cores,
lmms-eval 0.7.3, qwen-vl-utils 0.0.14, decord 0.6.0):

| video | before | after | tensors |
|---|---|---|---|
| 20 min, 1280x720, 30 fps, keyframe every 250 | 58.8 s, 16.2 GB | 3.7 s, 0.73 GB | equal (32 x 3 x 336 x 644) |
| 5 min, 1280x720, 30 fps, B-frames, textured | 39.5 s, 13.6 GB | 8.4 s, 0.83 GB | equal (32 x 3 x 392 x 728) |
| 15.5 s, 480x270, 23.976 fps | 0.32 s, 155 MB | 0.29 s, 155 MB | equal (30 frames: all decoded frames kept) |
| 5 s, 1280x720, 29.97 fps, B-frames | 0.43 s, 310 MB | 0.51 s, 312 MB | equal (10 frames: all kept) |

Clips with no more decoded frames than the budget gain nothing (every decoded frame is kept);
the gain grows with the video's length, up to 768 decoded frames for 32 kept."""

QWEN2_VL = HostPR(
    8, "qwen2-vl-kept-frames", "qwen2_vl: decode only the video frames the model keeps (the same frames, exactly)",
    (
        Edit("lmms_eval/models/simple/qwen2_vl.py", "from lmms_eval.models.model_utils.media_encoder import encode_image_to_data_url\n",
             "from lmms_eval.models.model_utils.media_encoder import encode_image_to_data_url\n"
             "from lmms_eval.models.model_utils.qwen_kept_frames import (\n    kept_positions,\n    video_inputs_of_kept_frames,\n)\n"),
        Edit("lmms_eval/models/simple/qwen2_vl.py", "        reasoning_prompt: Optional[str] = None,\n        **kwargs,\n",
             "        reasoning_prompt: Optional[str] = None,\n        decode_kept_frames: bool = True,\n        **kwargs,\n"),
        Edit("lmms_eval/models/simple/qwen2_vl.py", "        self.max_num_frames = max_num_frames\n",
             "        self.max_num_frames = max_num_frames\n        self.decode_kept_frames = decode_kept_frames\n"),
        Edit("lmms_eval/models/simple/qwen2_vl.py", "    def generate_until(self, requests: List[Instance]) -> List[str]:\n", QWEN2_VL_METHOD),
        Edit("lmms_eval/models/simple/qwen2_vl.py", QWEN2_VL_SELECTION, "            image_inputs, video_inputs = self._vision_inputs(batched_messages)\n"),
    ),
    ("test/models/test_qwen2_vl_kept_frames.py",),
    """## Summary
- `qwen2_vl` hands a video path to `qwen_vl_utils.process_vision_info`, which decodes it at 2 fps (up to 768 frames) and resizes every frame; `generate_until` then keeps at most `max_num_frames` (32). On long videos almost all that time and memory is thrown away: 58.8 s and 16.2 GB for one 20-minute 720p video's inputs, 3.7 s and 0.73 GB with this change (Numbers below).
- The model now computes the same choice before decoding (`lmms_eval/models/model_utils/qwen_kept_frames.py`) and decodes and resizes only the frames it keeps: the processor receives the same tensor, element for element, same shape and dtype.
- Guarded: only with the qwen-vl-utils releases it was checked against (0.0.13, 0.0.14; lmms-eval pins no upper bound), and any failure of it, a renamed qwen-vl-utils internal included, sends the model to its previous path (logged once), never to an error.

## In scope
- `qwen_kept_frames.py` (new): qwen_vl_utils' frame indices from the file's frame count and rate (its own `smart_nframes`), the positions the model keeps among them (`kept_positions`, now the one definition both paths use), and `fetch_video`'s resize target for the number of frames it *would* have decoded; the kept frames decoded with the same reader (decord) and resized with the same call.
- `qwen2_vl.py`: the frame selection moves from `generate_until` into `_vision_inputs`; `decode_kept_frames=True` by default, `--model_args ...,decode_kept_frames=False` restores the previous path.
- Where the result could differ, the previous path runs: another qwen-vl-utils release, qwen_vl_utils reading with another backend (torchcodec installed, `FORCE_QWENVL_VIDEO_READER`), more than one video in a batch (the model selects frames in the first one only), a video element with other keys, a file decord cannot read.
- Size: {size}

## Out of scope
- `generate_until_multi_round` (its selection keeps repeated frames) and the other Qwen models (`qwen2_5_vl`, `qwen3_vl`, the chat classes): unchanged; each can take the same change once this is in.

## Validation
{validation_bullets}

{numbers}

## Risk / Compatibility
- A file decord decodes only in part: before, a failure on a frame the model then dropped sent qwen_vl_utils to its torchvision reader for every frame; now the kept frames come from decord when it reads those.
- The tests compare with the previous path on clips of 2 s to 60 s (NTSC and 7 fps, B-frames, long keyframe intervals, a size that is no multiple of the patch, a token budget that shrinks the frames by the decoded count, an image beside the video), and show the previous path taken with an unchecked qwen-vl-utils release and with a renamed internal.

""" + type_of_change("New feature"),
    numbers=NUMBERS_QWEN2_VL)

# ------------------------------------------------------------------------------ 09: filelock's public API only

NUMBERS_FILELOCK = """Measured with lmms-video-reasoning's `python benchmarks/filelock_public_api.py` (the repository this series comes from:
this PR's test, `pytest test/eval/test_filelock_public_api.py`, run against a copy of the installed lmms-eval 0.7.3
with and without this PR, in a scratch venv holding each filelock release; datasets 5.2.0, CPython 3.11, Linux):

| filelock | without this PR | with this PR |
|---|---|---|
| 3.16.1 | FAIL (it imports ['filelock._api']; its 5 lock checks pass) | pass |
| 4.2.12 | FAIL (it imports ['filelock._api']; its 5 lock checks pass) | pass |
| 4.3.1 | FAIL (ModuleNotFoundError: No module named 'filelock._api') | pass |

Without this PR every `simple_evaluate` on filelock 4.3 stops at its first line; on 3.16 and 4.2
the locks behave the same with and without it (the test fails there only on the private import)."""

FILELOCK = HostPR(
    9, "filelock-public-api", "evaluator: patch filelock's lock metaclass through its public API (filelock 4.3 removed filelock._api)",
    (
        Edit("lmms_eval/evaluator.py", """    import filelock as _fl
    import filelock._api as _fl_api
    from datasets.utils import _filelock as _datasets_filelock
""", """    import inspect

    import filelock as _fl
    from datasets.utils import _filelock as _datasets_filelock
"""),
        Edit("lmms_eval/evaluator.py", """    original_call = _fl_api.FileLockMeta.__call__
    _cross_class_cache: dict[str, _fl_api.BaseFileLock] = {}
""", """    # filelock's public API only: its private modules move between releases (4.3 removed filelock._api).
    lock_meta = type(_fl.BaseFileLock)
    original_call = lock_meta.__call__
    # the value of `mode` meaning "not passed" (filelock 4.x: UNSET_FILE_MODE, -1)
    unset_mode = inspect.signature(original_call).parameters["mode"].default
    _cross_class_cache: dict[str, _fl.BaseFileLock] = {}
"""),
        Edit("lmms_eval/evaluator.py", """                unset_mode = getattr(_fl_api, "_UNSET_FILE_MODE", None)
""", ""),
        Edit("lmms_eval/evaluator.py", """    _fl_api.FileLockMeta.__call__ = _patched_call
""", """    lock_meta.__call__ = _patched_call
"""),
    ),
    ("test/eval/test_filelock_public_api.py", "test/eval/test_filelock_patch.py"),
    """## Summary
- `simple_evaluate` starts with `_enable_reentrant_filelocks()`, which patches filelock's lock metaclass so that `filelock.FileLock` and `datasets.utils._filelock.FileLock` share one lock object per path. It reaches the metaclass through the private `import filelock._api`; filelock 4.3 moved its internals (`filelock._core._singleton.FileLockMeta`), and with filelock 4.3.x every evaluation fails before its first document: `ModuleNotFoundError: No module named 'filelock._api'`.
- The same patch through filelock's public API only: the metaclass is `type(filelock.BaseFileLock)`, and the "mode not passed" value is the `mode` default of its `__call__` signature instead of the private `_UNSET_FILE_MODE` (in filelock 4.2.12 that constant is the public `UNSET_FILE_MODE`, so the old lookup found nothing there and only a missing `mode` counted as unset).

## In scope
- `lmms_eval/evaluator.py`: `_enable_reentrant_filelocks` only. Behaviour is otherwise unchanged: one instance per lock path across both classes, `is_singleton=True` by default, datasets' lock mode from the current umask.
- `test/eval/test_filelock_public_api.py` (new, beside the existing `test/eval/test_filelock_patch.py`, which passes as before): those checks in a child process (the patch is process-wide), and that the evaluator imports no private `filelock._*` module.
- Size: {size}

## Out of scope
- The lock semantics themselves and datasets' own locking.

## Validation
{validation_bullets}

{numbers}

## Risk / Compatibility
- A datasets lock created with an explicit `mode` equal to filelock's default (-1, "unset", in filelock 4; 0o644 in 3.16) now gets the umask mode, like one created without `mode`; before, it kept the value passed. datasets itself never passes `mode`.

""" + type_of_change("Bug fix (non-breaking change)"),
    numbers=NUMBERS_FILELOCK)

HOST_PRS = (JUDGE_CACHE, TASK_ENTRY_POINTS, QWEN2_VL, FILELOCK)
