"""Host pull requests: small changes to lmms-eval itself, each useful to every task.

They replace what the plugin patches into lmms-eval at import time today (`utils/lmms/plugin.py`,
`autoload.py`, `judge_usage.py`) with the change lmms-eval would carry itself, (08) bring the
idea of the plugin's fast inputs (`utils/lmms/model_video.py`) into the `qwen2_vl` model itself,
and (09) let lmms-eval's evaluator run on filelock 4.3 (the plugin bounds filelock below it
until then). Each PR is a set of anchored edits to files of the clean tree (the anchor must
occur exactly once: a tree it does not fit is an error, never a silent skip) and new files
(`host_pr_files/<slug>/`, mirroring the tree), with its description below.
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
    tests: tuple[str, ...]
    description: str
    numbers: str = ""  # measured outside the validation (a benchmark of this repository, with its command)


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


# ------------------------------------------------------------------------------ 04: judge cache and failure accounting

JUDGE_CACHE = HostPR(
    4, "llm-judge-cache", "llm_judge: a judge-reply cache (LMMS_EVAL_JUDGE_CACHE) and counted judge failures",
    (
        Edit("lmms_eval/llm_judge/__init__.py", "from .base import ServerInterface\n",
             "import os\n\nfrom .base import ServerInterface\nfrom .cache import AccountedServer, cache_from_env, judge_stats\n"),
        Edit("lmms_eval/llm_judge/__init__.py", '''        An instance of ServerInterface.
    """
    return ProviderFactory.create_provider(api_type=server_name, config=config)
''', '''        An instance of ServerInterface: the provider, its calls and failures counted
        (``judge_stats()``) and, with ``LMMS_EVAL_JUDGE_CACHE`` set, its replies cached.
    """
    api_type = (server_name or os.getenv("API_TYPE", "openai")).lower()
    return AccountedServer(ProviderFactory.create_provider(api_type=api_type, config=config), api_type, cache_from_env())
'''),
        Edit("lmms_eval/llm_judge/__init__.py", '''    "get_server",
]''', '''    "get_server",
    "judge_stats",
]'''),
    ),
    ("test/llm_judge",),
    """## Summary

Tasks that judge with `lmms_eval.llm_judge` (30 of them, `get_server(API_TYPE, ServerConfig(...))`)
pay for every judge call again on every rerun, and a judge call that fails is handled (or not) by
each task on its own, with nothing telling the user how many failed.

- `LMMS_EVAL_JUDGE_CACHE=<file>` (or `1`: `~/.cache/lmms_eval/judge_cache.sqlite`): a server from
  `get_server` answers a request it has answered before (same provider, model, messages, images,
  temperature, max_tokens, top_p, response format, system prompt) from a SQLite file. A rerun, a
  resumed run or a second model evaluated against the same references pays for no call twice.
  Only successful, non-empty replies are stored. Off by default: nothing changes unless it is set.
- Every server from `get_server` counts its calls, cache hits and failures by reason
  (`lmms_eval.llm_judge.judge_stats()`); when calls failed, one line on stderr at exit says how many
  and why.

The plugin this comes from (lmms-video-reasoning) keeps its own judge engine with such a cache;
this PR gives every lmms-eval task the same, in the host's judge layer.

## Files

{files}

Size: {size}

## Validation

{validation}

## Numbers

{numbers}

## Risk

`get_server` returns the provider wrapped (`AccountedServer`, a `ServerInterface` delegating
every other attribute to the provider), so `evaluate_binary` & co. and provider attributes work
as before. The cache covers `evaluate` (the synchronous path every task uses); async providers'
`evaluate_async` is unchanged.
""")

# ------------------------------------------------------------------------------ 05: standard errors for custom aggregations

AGGREGATION_STDERR = HostPR(
    5, "aggregation-stderr", "metrics: standard errors for a task's own aggregation functions",
    (
        Edit("lmms_eval/api/metrics.py", '''def stderr_for_metric(metric, bootstrap_iters: int):
    if bootstrap_iters <= 0:
        # return no function (don't compute stderr) if bootstrap iters = 0
        return None
''', '''def bootstrappable(aggregation):
    """Mark a task's aggregation function: its standard error is bootstrapped like the built-in ones'
    (it must be a pure function of the per-sample items, picklable: a module-level function)."""
    aggregation.bootstrappable = True
    return aggregation


def stderr_for_metric(metric, bootstrap_iters: int):
    if bootstrap_iters <= 0:
        # return no function (don't compute stderr) if bootstrap iters = 0
        return None

    # A task's own aggregation can declare its standard error: `aggregation.stderr_for(bootstrap_iters)`
    # returns the function (items -> stderr, or None), or `@bootstrappable` asks for the bootstrap.
    declared = getattr(metric, "stderr_for", None)
    if callable(declared):
        return declared(bootstrap_iters)
    if getattr(metric, "bootstrappable", False):
        return lambda x: bootstrap_stderr(metric, x, iters=bootstrap_iters)
'''),
    ),
    ("test/api",),
    """## Summary

The `Stderr` column is N/A for every metric whose aggregation is a task's own function:
`stderr_for_metric` knows lmms-eval's built-in aggregations and, by name, two tasks' functions
(`amber_g`, `coco_cap_chair`). Tasks with metrics such as an F1 of averaged precision and recall,
a per-question join, or a judged accuracy cannot give theirs.

A task's aggregation can now declare it:

- `@bootstrappable` (new, in `lmms_eval.api.metrics`): bootstrap it like the built-in ones;
- `aggregation.stderr_for = lambda bootstrap_iters: fn`: its own standard error function
  (e.g. a bootstrap over videos rather than questions, or an analytic formula).

Undeclared aggregations behave as before (None, the column shows N/A); `--bootstrap_iters 0`
still turns every standard error off.

## Files

{files}

Size: {size}

## Validation

{validation}

## Numbers

{numbers}

## Risk

Only aggregations carrying the new attributes are affected.
""")

# ------------------------------------------------------------------------------ 06: tasks of installed packages

TASK_ENTRY_POINTS = HostPR(
    6, "task-entry-points", "tasks: index the task folders of installed packages (entry point group `lmms_eval.tasks`)",
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
    folder path (a string, a list of them, or a callable returning either). One that fails to
    load is logged and skipped; lmms-eval's own tasks win a name clash (they are indexed first)."""
    from importlib.metadata import entry_points

    paths = []
    for entry_point in entry_points(group=TASKS_ENTRY_POINT_GROUP):
        try:
            value = entry_point.load()
            value = value() if callable(value) else value
            paths.extend([value] if isinstance(value, (str, os.PathLike)) else list(value))
        except Exception as error:
            eval_logger.warning(f"Task entry point {entry_point.name!r} ({entry_point.value}) could not be loaded: {error}")
    return [str(path) for path in paths]


class TaskManager:'''),
    ),
    ("test/tasks",),
    """## Summary

lmms-eval has an entry point group for models (`lmms_eval.models`) but none for tasks, so a
package of tasks is found only with `--include_path <its folder>` on every command, or by
patching `TaskManager` at import time (what plugins do today). This adds the group
`lmms_eval.tasks`: an installed package declares

```toml
[project.entry-points."lmms_eval.tasks"]
my_tasks = "my_package:TASKS_DIR"   # a folder path, a list of them, or a callable returning either
```

and every `TaskManager` that indexes the default tasks also indexes those folders, so
`lmms-eval tasks list`, `--tasks`, `lmms-eval serve` and the wizard see them with no flag.
An entry point that fails to load is logged and skipped; lmms-eval's own tasks win a name clash.

## Files

{files}

Size: {size}

## Validation

{validation}

## Numbers

{numbers}

## Risk

One `importlib.metadata` scan per `TaskManager` (milliseconds); no entry point, no change.
""")

# ------------------------------------------------------------------------------ 07: the launcher's judge server

LAUNCHER = HostPR(
    7, "launcher-after-aggregation", "evaluator: keep the launcher's judge server up until the tasks have aggregated",
    (
        Edit("lmms_eval/evaluator.py", '''    if RANK == 0:
        if eval_server_launcher is not None:
            eval_server_launcher.clean()
        ### Aggregate results over all datapoints ###
        # aggregate results ; run bootstrap CIs
        for task_output in eval_tasks:
            task_output.calculate_aggregate_metric(bootstrap_iters=bootstrap_iters)
            task_output.calculate_clt_aggregate_metric()
            task_output.calculate_stability_metrics()
''', '''    if RANK == 0:
        ### Aggregate results over all datapoints ###
        # aggregate results ; run bootstrap CIs
        # The judge server of `--launcher_args` stays up until then: aggregations may judge (one batch per task).
        try:
            for task_output in eval_tasks:
                task_output.calculate_aggregate_metric(bootstrap_iters=bootstrap_iters)
                task_output.calculate_clt_aggregate_metric()
                task_output.calculate_stability_metrics()
        finally:
            if eval_server_launcher is not None:
                eval_server_launcher.clean()
'''),
    ),
    ("test/evaluator",),
    """## Summary

`--launcher_args name=sglang,...` starts a judge server on the GPU node after generation and
stops it before the aggregation runs. A task that judges in its aggregation (one concurrent batch
for the whole task, instead of one call at a time in `process_results`) then finds no server.
The server now stays up until every task has aggregated (and is stopped even when an
aggregation raises).

## Files

{files}

Size: {size}

## Validation

{validation}

## Numbers

{numbers}

## Risk

The judge server's GPU memory is held a little longer (the aggregation's duration); generation
is over by then.
""")

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
             "from lmms_eval.models.model_utils.qwen_kept_frames import kept_positions, video_inputs_of_kept_frames\n"),
        Edit("lmms_eval/models/simple/qwen2_vl.py", "        reasoning_prompt: Optional[str] = None,\n        **kwargs,\n",
             "        reasoning_prompt: Optional[str] = None,\n        decode_kept_frames: bool = True,\n        **kwargs,\n"),
        Edit("lmms_eval/models/simple/qwen2_vl.py", "        self.max_num_frames = max_num_frames\n",
             "        self.max_num_frames = max_num_frames\n        self.decode_kept_frames = decode_kept_frames\n"),
        Edit("lmms_eval/models/simple/qwen2_vl.py", "    def generate_until(self, requests: List[Instance]) -> List[str]:\n", QWEN2_VL_METHOD),
        Edit("lmms_eval/models/simple/qwen2_vl.py", QWEN2_VL_SELECTION, "            image_inputs, video_inputs = self._vision_inputs(batched_messages)\n"),
    ),
    ("test/models",),
    """## Summary

`qwen2_vl` hands a video path to `qwen_vl_utils.process_vision_info`, which decodes it at 2 fps
(up to 768 frames) and resizes every frame; `generate_until` then keeps at most
`max_num_frames` (32) of them. On long videos almost all of that time and memory is thrown away
(see Numbers).

This computes the same choice before decoding (`lmms_eval/models/model_utils/qwen_kept_frames.py`):
qwen_vl_utils' frame indices from the file's frame count and rate (its own `smart_nframes`),
the positions the model keeps among them (`kept_positions`, now the one definition both paths
use), and `fetch_video`'s resize target for the number of frames it *would* have decoded. Only
the kept frames are decoded, with the same reader (decord), and resized with the same call, so
the processor receives the same tensor: equal element for element, same shape and dtype.

- On by default; `--model_args ...,decode_kept_frames=False` restores the previous path.
- Where the result could differ, the model takes its previous path: qwen_vl_utils reading with
  another backend (torchcodec installed, `FORCE_QWENVL_VIDEO_READER`), more than one video in a
  batch (the model selects frames in the first one only), a video element with other keys, a file
  decord cannot read.
- `generate_until_multi_round` is unchanged (its selection keeps repeated frames).

## Files

{files}

Size: {size}

## Validation

{validation}

## Numbers

{numbers}

## Risk

A file decord decodes only in part: before, a failure on a frame the model then dropped sent
qwen_vl_utils to its torchvision reader for every frame; now the kept frames come from decord
when it reads those. The tests compare with the previous path on clips of 2 s to 60 s, NTSC and
7 fps rates, B-frames, long keyframe intervals, a size that is no multiple of the patch, a token
budget that shrinks the frames by the decoded count, and an image beside the video.
""",
    numbers=NUMBERS_QWEN2_VL)

# ------------------------------------------------------------------------------ 09: filelock's public API only

NUMBERS_FILELOCK = """Measured with lmms-video-reasoning's `python benchmarks/filelock_public_api.py` (the repository this series comes from:
this PR's test, `pytest test/evaluator/test_filelock_public_api.py`, run against a copy of the installed lmms-eval 0.7.3
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
    ("test/evaluator",),
    """## Summary

`simple_evaluate` starts with `_enable_reentrant_filelocks()`, which patches filelock's lock
metaclass so that `filelock.FileLock` and `datasets.utils._filelock.FileLock` share one lock
object per path. It reaches the metaclass through `import filelock._api`, a private module:
filelock 4.3 reorganised its internals (`filelock._core._singleton.FileLockMeta`), and with
filelock 4.3.x installed every evaluation fails before its first document:

```
ModuleNotFoundError: No module named 'filelock._api'
```

The same patch, through filelock's public API only:

- the metaclass is `type(filelock.BaseFileLock)` (the annotation `filelock.BaseFileLock`);
- the "mode not passed" value is the `mode` default of the metaclass's `__call__` signature
  instead of the private `_UNSET_FILE_MODE`. Where that constant exists it is that default (-1);
  in filelock 4.2.12 it is the public `UNSET_FILE_MODE`, so the lookup found nothing there and
  only a missing `mode` counted as unset.

Behaviour is otherwise unchanged: one instance per lock path across both classes,
`is_singleton=True` by default, and datasets' lock mode from the current umask. The new test
(`test/evaluator/test_filelock_public_api.py`) checks those in a child process, and that the
evaluator imports no private `filelock._*` module; it passes with filelock 3.16.1, 4.2.12 and
4.3.1 (see Numbers).

The plugin this comes from (lmms-video-reasoning) bounds `filelock<4.3` for this alone; the
bound goes once this is merged.

## Files

{files}

Size: {size}

## Validation

{validation}

## Numbers

{numbers}

## Risk

A datasets lock created with an explicit `mode` equal to filelock's default (-1, "unset", in
filelock 4; 0o644 in 3.16) now gets the umask mode, like one created without `mode`; before, it
kept the value passed. datasets itself never passes `mode`.
""",
    numbers=NUMBERS_FILELOCK)

HOST_PRS = (JUDGE_CACHE, AGGREGATION_STDERR, TASK_ENTRY_POINTS, LAUNCHER, QWEN2_VL, FILELOCK)
