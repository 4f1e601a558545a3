"""Statistics at full size: in-run standard errors and `lmms-vr report` (issue 27).

Not a test. Builds full-size synthetic runs from the sample benchmark (`lmms-vr sample`)
scaled up: CG-Bench full (12,129 questions on 1,219 videos), VCR-Bench (1,034 on 859) and
VRBench at its released size (8,243 on 960). Each question is a copy of a sample question
(its own id, its own video name; the question text carries a copy mark so that judge
requests differ) with a reply from the sample's replay generator, so the replies are as
realistic as the sample's: mostly right, some wrong, some malformed, a few the judge
refuses. The statistics never decode a video, so the roots hold no videos (the replay model
reads none). Then, in one run, side by side:

- ``replay``: `python -m lmms_eval --model vr_replay` on each benchmark (CG-Bench: the four
  multiple-choice and grounding tasks of the full split, 72,774 documents; VCR-Bench
  `vcr_cot` and VRBench `vr_bench`, judged by the sample judge on a local server, its cache
  warmed first so both runs read the same verdicts), with the standard-error hook on and off
  (`LMMS_VR_STDERR=off`; twice each, interleaved, the least time of each side kept):
  ``instderr_overhead_ratio`` = on / off of the lmms-eval process's CPU
  time (user + sys; the worst benchmark), ``instderr_overhead_ratio_wall`` the same in wall time
  (on this shared 2-core machine wall time varies with the other jobs by more than the hook costs);
  ``instderr_s``: the standard errors' own CPU seconds, timed in this process on each run's
  records as lmms-eval's aggregation asks for them (the scoring's outcomes reused);
- ``score``: `lmms-vr score` on each replay's output folder;
- ``report``: `lmms-vr report` on 1, 2 and 4 full CG-Bench runs and VCR-Bench runs, 1 and 2
  VRBench runs, at 1000 resamples and at 0 (runs 3 and 4: other replies, `variant`):
  ``report_ratio_4runs`` (1000 / 0, four CG-Bench runs), ``report_4runs_s``;
- ``same_intervals``: the bootstrap over the per-sample columns and the bootstrap by definition
  (each resample's records re-aggregated by the benchmark's `metrics`) agree to 1e-9 on these runs
  (every task, every metric, paired differences included; 20 resamples at full size, as the
  reference re-aggregates 36,387 records per resample).
- ``reaggregate`` (``--reaggregate``): what the other way to bootstrap costs, every resample
  re-aggregated by the benchmark's `metrics` instead of the sums of its per-sample columns (the
  choice of issue 35): CPU seconds per resample on each replay's tasks (timed in the
  ``same_intervals`` step), the in-run standard errors that gives (x 1000 resamples, against the
  replays' CPU time: ``instderr_overhead_ratio_est``) and the four-run CG-Bench report run that
  way at ``reaggregate_resamples`` resamples, extrapolated from the same report at 0 resamples to
  1000 (``report_4runs_s_est``).

Every step runs as its own process; its peak memory is that process's maximum resident set
and its CPU time that process's user + sys (`os.wait4`). This process stays small (the judge
server and the in-process timings run in child processes), as a child's peak counts the pages
it starts with. `--quick` builds small runs (a smoke
run of a few minutes, most of it lmms-eval starting). Goals: ``instderr_overhead_ratio`` <= 1.10,
``report_ratio_4runs`` <= 2, ``report_4runs_s`` < 60, no step over 1.5 GB.

    .venv/bin/python benchmarks/statistics_at_scale.py [--quick] [--json] [--keep DIR] [--reaggregate]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

COPY_MARK = re.compile(r"⟦c\d+⟧ ")  # a question's copy number, taken out before the sample judge reads a prompt


@dataclass(frozen=True)
class Scale:
    cg_questions: int
    cg_videos: int
    vcr_questions: int
    vcr_videos: int
    vr_questions: int
    vr_videos: int
    resamples: int  # the report's bootstrap (and the in-run standard error's)
    check_resamples: int  # resamples of the same_intervals check
    distinct_runs: bool  # the 4-run reports read 4 different runs (else runs 3 and 4 are runs 1 and 2 again)
    repeats: int  # replays with the hook off and on, interleaved; the least time of each side is kept
    reaggregate_resamples: int  # the four-run report re-aggregating every resample (extrapolated to `resamples`)


FULL = Scale(12_129, 1_219, 1_034, 859, 8_243, 960, 1000, 20, True, 2, 10)
QUICK = Scale(300, 40, 60, 50, 120, 14, 200, 50, False, 1, 5)


def mark(text: str, copy: int) -> str:
    return f"⟦c{copy}⟧ {text}"


# ---------------------------------------------------------------------------------------------
# Full-size roots and replay predictions, scaled up from the sample benchmark
# ---------------------------------------------------------------------------------------------


def write_cg_bench(root: Path, questions: int, videos: int) -> list[dict]:
    """A CG-Bench root whose full split (`cgbench.json`) has `questions` questions on `videos`
    videos, each a copy of a sample question of the same sample video; replies for the four
    multiple-choice and grounding tasks."""
    from lmms_video_reasoning.cg_bench import data, docs, sample

    base = sample.build_questions()
    by_video = {video.uid: [q for q in base if q["video_uid"] == video.uid] for video in sample.VIDEOS}
    meta, rows = {}, []
    for v in range(videos):
        video = sample.VIDEOS[v % len(sample.VIDEOS)]
        meta[f"cgs{v:05d}"] = {"duration": float(video.clip.duration), "max_frame": video.clip.duration * video.clip.fps - 1, "fps": float(video.clip.fps)}
    for i in range(questions):
        v = i % videos
        video = sample.VIDEOS[v % len(sample.VIDEOS)]
        pool = by_video[video.uid]
        q = dict(pool[(i // videos) % len(pool)])
        q.update(qid=100_000 + i, video_uid=f"cgs{v:05d}", question=mark(q["question"], i))
        rows.append(q)
    root.mkdir(parents=True, exist_ok=True)
    (root / docs.META_FILE).write_text(json.dumps(meta))
    (root / data.SPLIT_FILES["full"]).write_text(json.dumps(rows, ensure_ascii=False))
    (root / data.SPLIT_FILES["mini"]).write_text(json.dumps(rows[:100], ensure_ascii=False))
    predictions = []
    for i, q in enumerate(rows):
        qid = str(q["qid"])
        predictions += [
            {"task": "cg_bench_full_long", "id": qid, "response": sample.mcq_reply(q, i)},
            {"task": "cg_bench_full_clue", "id": qid, "response": sample.mcq_reply(q, i + 4)},
            {"task": "cg_bench_full_grounding", "id": qid, "response": sample.grounding_reply(q, i)},
            {"task": "cg_bench_full_mcq", "id": f"{qid}:long", "response": sample.mcq_reply(q, i)},
            {"task": "cg_bench_full_mcq", "id": f"{qid}:clue", "response": sample.mcq_reply(q, i + 4)},
            {"task": "cg_bench_full_mcq", "id": f"{qid}:grounding", "response": sample.grounding_reply(q, i)},
        ]
    return predictions


def write_vcr_bench(root: Path, questions: int, videos: int) -> list[dict]:
    """A VCR-Bench root of `questions` copies of the 21 sample questions on `videos` video
    names; `vcr_cot` replies are the sample's reply to the question copied."""
    from lmms_video_reasoning.vcr_bench import sample
    from lmms_video_reasoning.vcr_bench.docs import ANNOTATION

    base = sample.build_records()
    replies = sample.demo_table(base)["vcr_cot"]
    rows, predictions = [], []
    for i in range(questions):
        record = dict(base[i % len(base)])
        name = Path(record["video_path"]).stem
        record.update(id=i, question=mark(record["question"], i), video_path=f"video/{sample.SOURCE}/{name}_{i % videos:05d}.mp4")
        rows.append(record)
        predictions.append({"task": "vcr_cot", "id": i, "response": replies[base[i % len(base)]["id"]][0]})
    path = root / ANNOTATION
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rows, ensure_ascii=False), encoding="utf-8")
    return predictions


def write_vrbench(root: Path, questions: int, videos: int) -> list[dict]:
    """A VRBench root of `videos` copies of the sample stories holding `questions` questions
    (8 or 9 per video, cycling through the story's seven); `vr_bench` replies from the
    sample's generator, indexed over the whole run."""
    from lmms_video_reasoning.vrbench import sample
    from lmms_video_reasoning.vrbench.docs import ANNOTATIONS, flatten

    lines = []
    for v in range(videos):
        story = sample.STORIES[v % len(sample.STORIES)]
        seven = list(sample.questions(story, v).values())
        count = questions // videos + (v < questions % videos)
        mcq = {}
        for k in range(count):
            qa = dict(seven[k % len(seven)])
            qa["question"] = mark(qa["question"], v * 100 + k)
            mcq[f"qa{k + 1}"] = qa
        lines.append({"video_id": f"{story.video_id}_{v:04d}", "video_path": f"VRBench/videos/v001/{story.video_id}_{v:04d}.mp4",
                      "video_summary": sample.summary(story), "mcq": mcq, "video_read_type": "decord"})
    root.mkdir(parents=True, exist_ok=True)
    (root / ANNOTATIONS).write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    docs = flatten(lines)
    return [{"task": "vr_bench", "id": doc["sample_id"], "response": sample.demo_response(doc, index)} for index, doc in enumerate(docs)]


def write_roots(folder: Path, scale: Scale) -> dict[str, Path]:
    """The three roots and one predictions file per benchmark under `folder`."""
    from lmms_video_reasoning.utils.core.roots import SUBSET_MARKER

    writers = {"cg_bench": (write_cg_bench, scale.cg_questions, scale.cg_videos),
               "vcr_bench": (write_vcr_bench, scale.vcr_questions, scale.vcr_videos),
               "vrbench": (write_vrbench, scale.vr_questions, scale.vr_videos)}
    files = {}
    for name, (write, questions, videos) in writers.items():
        root = folder / name
        predictions = write(root, questions, videos)
        (root / SUBSET_MARKER).write_text(json.dumps({"subset": "synthetic, scaled up from the sample benchmark"}) + "\n")
        files[name] = folder / f"predictions_{name}.jsonl"
        with files[name].open("w", encoding="utf-8") as handle:
            handle.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in predictions)
    return files


def env_for(folder: Path) -> dict[str, str]:
    from lmms_video_reasoning.utils.core import registry

    return {registry.get(name).data().SOURCE.root_env: str(folder / name) for name in ("cg_bench", "vcr_bench", "vrbench")}


def judge_reply(request: dict) -> str:
    """The sample judge, on prompts with the copy marks taken out (the sample's truth is keyed by its own questions)."""
    from lmms_video_reasoning.utils.tools.demo import sample_responder

    def clean(value):
        if isinstance(value, str):
            return COPY_MARK.sub("", value)
        if isinstance(value, list):
            return [clean(v) for v in value]
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        return value

    return sample_responder(clean(request))


def variant(predictions: Path, shift: int, out: Path) -> Path:
    """Another model's replies: each reply of a task moved `shift` places along the task's
    questions, so a share of the answers changes (right, wrong, malformed) at the same sizes."""
    rows = [json.loads(line) for line in predictions.read_text(encoding="utf-8").splitlines() if line.strip()]
    by_task: dict[str, list[int]] = {}
    for index, row in enumerate(rows):
        by_task.setdefault(row["task"], []).append(index)
    moved = [dict(row) for row in rows]
    for indices in by_task.values():
        for k, index in enumerate(indices):
            if k % 3 == 0:  # a third of the answers
                moved[index]["response"] = rows[indices[(k + shift) % len(indices)]]["response"]
    out.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in moved), encoding="utf-8")
    return out


# ---------------------------------------------------------------------------------------------
# Steps, each in its own process: wall time, CPU time and peak memory of that process
# ---------------------------------------------------------------------------------------------


@dataclass
class Step:
    wall_s: float
    cpu_s: float
    peak_mb: float
    output: str

    def figures(self) -> dict:
        return {"wall_s": round(self.wall_s, 2), "cpu_s": round(self.cpu_s, 2), "peak_mb": round(self.peak_mb)}


def run_step(command: list[str], env: dict[str, str], what: str) -> Step:
    """Run one step as a child process; its own resource usage (`os.wait4`), not the sum of all children."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        _pid, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - started
        log.seek(0)
        output = log.read().decode("utf-8", errors="replace")
    if process.returncode != 0 or "Traceback (most recent call last)" in output:
        raise SystemExit(f"{what} failed (exit {process.returncode}):\n{output[-4000:]}")
    return Step(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, output)


def least(steps: list[Step]) -> Step:
    """The repeats of one step: the least wall and CPU time (the runs least disturbed), the largest peak."""
    return Step(min(s.wall_s for s in steps), min(s.cpu_s for s in steps), max(s.peak_mb for s in steps), steps[-1].output)


def hook_seconds(tasks: str, run: Path, env: dict[str, str]) -> float:
    """The standard errors' own cost, in this process as lmms-eval's aggregation pays it: each
    task's records read back from the run, every metric's aggregation called (the scoring, once),
    then every metric's standard error timed (`stderr_for`, as lmms-eval asks for it)."""
    import importlib

    from lmms_video_reasoning.utils.results import samples_io

    os.environ.update(env)  # the judge (its cache is warm: nothing is sent)
    spent = 0.0
    for task in tasks.split(","):
        spec = samples_io.task_spec(task)
        [samples] = sorted(run.rglob(f"*_samples_{task}.jsonl"))
        records = samples_io.read_samples(samples, spec)[0]
        hooks = importlib.import_module(spec.process_docs.rpartition(".")[0])  # the binding module
        aggregations = {metric: getattr(hooks, f"aggregate_{metric}") for metric in spec.metrics}
        items = {metric: list(records) for metric in spec.metrics}  # lmms-eval: one list per metric, the same records
        for metric, aggregate in aggregations.items():
            aggregate(items[metric])
        started = time.process_time()
        for metric, aggregate in aggregations.items():
            stderr = aggregate.stderr_for(100_000)  # lmms-eval's default bootstrap_iters
            if stderr is not None:
                stderr(items[metric])
        spent += time.process_time() - started
    return spent


def lmms_eval_replay(predictions: Path, tasks: str, output_path: Path, env: dict[str, str], stderr: str) -> Step:
    command = [sys.executable, "-m", "lmms_eval", "--model", "vr_replay", "--model_args", f"predictions={predictions}",
               "--tasks", tasks, "--log_samples", "--output_path", str(output_path), "--verbosity", "WARNING"]
    return run_step(command, {**env, "LMMS_VR_STDERR": stderr}, f"lmms-eval replay of {tasks} (standard errors {stderr})")


def lmms_vr(arguments: list[str], env: dict[str, str]) -> Step:
    return run_step([sys.executable, "-m", "lmms_video_reasoning.utils.tools.cli", *arguments], env, f"lmms-vr {' '.join(arguments[:2])}")


# `lmms-vr` with no per-sample arrays: every resample re-aggregated by the benchmark's metric function.
REAGGREGATED = ("import runpy, sys; from lmms_video_reasoning.utils.results import report_bootstrap; "
                "report_bootstrap.Sampled.totals = property(lambda self: None); sys.argv = ['lmms-vr', *sys.argv[1:]]; "
                "runpy.run_module('lmms_video_reasoning.utils.tools.cli', run_name='__main__')")


def lmms_vr_reaggregated(arguments: list[str], env: dict[str, str]) -> Step:
    return run_step([sys.executable, "-c", REAGGREGATED, *arguments], env, f"lmms-vr {' '.join(arguments[:2])} (re-aggregated)")


def results_file(output_path: Path) -> Path:
    found = sorted(output_path.rglob("*_results.json"))
    if len(found) != 1:
        raise SystemExit(f"{output_path}: expected one results file, found {[str(p) for p in found]}")
    return found[0]


def stderr_cells(output_path: Path, metric: str) -> tuple[bool, bool]:
    """(every task with `metric` has a numeric standard error, every one is N/A) in a run's results."""
    results = json.loads(results_file(output_path).read_text())["results"]
    cells = [entry[f"{metric}_stderr,none"] for entry in results.values() if f"{metric}_stderr,none" in entry]
    return bool(cells) and all(isinstance(c, float) for c in cells), bool(cells) and all(c == "N/A" for c in cells)


# ---------------------------------------------------------------------------------------------
# The column bootstrap against the bootstrap by definition on these runs
# ---------------------------------------------------------------------------------------------


def same(a, b) -> bool:
    import numpy as np

    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return a.shape == b.shape and bool(np.all((np.isnan(a) & np.isnan(b)) | (np.abs(a - b) <= 1e-9 * np.maximum(1.0, np.abs(a)))))


def same_intervals(runs: dict[str, list[Path]], tasks: dict[str, list[str]], resamples: int, env: dict[str, str]) -> dict:
    """For each benchmark's first two runs: every task's bootstrap values and their paired
    differences, over the columns and by the reference (each resample's records re-aggregated by
    the benchmark's `metrics`), for one seed: equal to 1e-9, metric by metric."""
    from lmms_video_reasoning.utils.results import report_bootstrap

    os.environ.update(env)  # the judge cache the runs wrote (the reference re-reads nothing: outcomes are loaded once)
    checked, differ = 0, []
    per_resample: dict[str, float] = {}  # task -> CPU seconds of one resample re-aggregated by the metric function
    for benchmark, folders in runs.items():
        for task in tasks[benchmark]:
            sampled = []
            for folder in folders[:2]:
                [samples] = sorted(folder.rglob(f"*_samples_{task}.jsonl"))
                loaded, reason = report_bootstrap.load_sampled(task, samples, results_file(folder))
                if loaded is None:
                    raise SystemExit(f"{samples}: {reason}")
                sampled.append(loaded)
            fast = report_bootstrap.bootstrap_values(sampled[0], resamples, 11)
            started = time.process_time()
            slow = report_bootstrap.bootstrap_values_reference(sampled[0], resamples, 11)
            per_resample[task] = (time.process_time() - started) / resamples
            checked += 1
            if list(fast) != list(slow) or not all(same(fast[m], slow[m]) for m in slow):
                differ.append(f"{task} bootstrap")
            common, observed, values = report_bootstrap.paired_values(sampled[0], sampled[1], resamples, 12)
            slow_observed, slow_values = report_bootstrap.paired_values_reference(sampled[0], sampled[1], common, resamples, 12)
            checked += 1
            if (list(observed) != list(slow_observed) or not all(same(observed[m], slow_observed[m]) for m in slow_observed)
                    or list(values) != list(slow_values) or not all(same(values[m], slow_values[m]) for m in slow_values)):
                differ.append(f"{task} paired")
    return {"same_intervals": not differ, "same_intervals_checked": checked, "same_intervals_differ": differ,
            "same_intervals_resamples": resamples, "reaggregate_s_per_resample": per_resample}


# ---------------------------------------------------------------------------------------------
# The benchmark
# ---------------------------------------------------------------------------------------------

TASKS = {
    "cg_bench": "cg_bench_full_long,cg_bench_full_clue,cg_bench_full_grounding,cg_bench_full_mcq",
    "vcr_bench": "vcr_cot",
    "vrbench": "vr_bench",
}
HEADLINE = {"cg_bench": "long_acc", "vcr_bench": "accuracy", "vrbench": "overall"}
REPORT_RUNS = {"cg_bench": (1, 2, 4), "vcr_bench": (1, 2, 4), "vrbench": (1, 2)}
QUICK_REPORT_RUNS = {"cg_bench": (1, 2, 4), "vcr_bench": (1,), "vrbench": (1,)}
MB_LIMIT = 1536


@contextlib.contextmanager
def judge_server():
    """The sample judge on 127.0.0.1, in a child process: this process stays small, so the steps'
    peak memory is theirs (a child starts with a copy of its parent's resident pages)."""
    parent, child = multiprocessing.Pipe()
    process = FORK.Process(target=_serve_judge, args=(child,), daemon=True)
    process.start()
    try:
        yield parent.recv()
    finally:
        process.terminate()
        process.join(10)


def _serve_judge(connection) -> None:
    from lmms_video_reasoning.judges import LocalJudgeServer

    with LocalJudgeServer(responder=judge_reply, model="sample-oracle") as server:
        connection.send(server.base_url)
        threading.Event().wait()


def in_child(function, *args):
    """`function(*args)` in a child process (what it loads does not stay in this one)."""
    parent, child = multiprocessing.Pipe()
    process = FORK.Process(target=_call, args=(child, function, args))
    process.start()
    ok, value = parent.recv()
    process.join()
    if not ok:
        raise SystemExit(f"{function.__name__} failed:\n{value}")
    return value


def _call(connection, function, args) -> None:
    import traceback

    try:
        connection.send((True, function(*args)))
    except BaseException:  # noqa: BLE001 - reported by the parent
        connection.send((False, traceback.format_exc()))


FORK = multiprocessing.get_context("fork")


def measure(folder: Path, scale: Scale, reaggregate: bool = False) -> dict:
    started = time.perf_counter()
    load_before = os.getloadavg()
    predictions = in_child(write_roots, folder, scale)
    env = {**os.environ, **env_for(folder), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "TQDM_DISABLE": "1", "LMMS_VR_JUDGE_MODEL": "sample-oracle", "LMMS_VR_JUDGE_CACHE": str(folder / "judge_cache.sqlite")}
    env.pop("LMMS_VR_STDERR", None)
    out: dict = {"scale": "quick" if scale == QUICK else "full", "documents": {}, "replay": {}, "score": {}, "report": {}}
    report_runs = REPORT_RUNS if scale.distinct_runs else QUICK_REPORT_RUNS
    runs: dict[str, list[Path]] = {}
    with judge_server() as base_url:
        env["LMMS_VR_JUDGE_BASE_URL"] = base_url
        for benchmark, tasks in TASKS.items():
            extra = max(report_runs[benchmark]) - 2 if scale.distinct_runs else 0  # runs besides the two replays
            files = [predictions[benchmark]] + [in_child(variant, predictions[benchmark], k, folder / f"predictions_{benchmark}_v{k}.jsonl")
                                                for k in range(1, extra + 1)]
            if benchmark != "cg_bench":  # both replays read the same verdicts: the cache is warmed first
                for task in tasks.split(","):
                    for file in files:
                        lmms_vr(["score", str(file), "--task", task, "--out", str(folder / f"warm_{file.stem}.json")], env)
            sides: dict[str, list[Step]] = {"off": [], "on": []}
            for repeat in range(scale.repeats):  # interleaved: the machine's load weighs on both sides alike
                for side in ("off", "on"):
                    where = folder / f"replay_{benchmark}_{side}" if repeat == 0 else folder / f"repeat{repeat}_{benchmark}_{side}"
                    sides[side].append(lmms_eval_replay(files[0], tasks, where, env, side))
            off, on = least(sides["off"]), least(sides["on"])
            on_values, _ = stderr_cells(folder / f"replay_{benchmark}_on", HEADLINE[benchmark])
            _, off_na = stderr_cells(folder / f"replay_{benchmark}_off", HEADLINE[benchmark])
            hook = in_child(hook_seconds, tasks, folder / f"replay_{benchmark}_on", env)
            out["replay"][benchmark] = {"tasks": tasks, "repeats": scale.repeats, "off": off.figures(), "on": on.figures(),
                                        "ratio_cpu": round(on.cpu_s / off.cpu_s, 3), "ratio_wall": round(on.wall_s / off.wall_s, 3),
                                        "stderr_in_process_s": round(hook, 2), "stderr_share_of_run_cpu": round(hook / off.cpu_s, 4),
                                        "stderr_on_has_values": on_values, "stderr_off_is_na": off_na}
            runs[benchmark] = [folder / f"replay_{benchmark}_on", folder / f"replay_{benchmark}_off"]
            for k, file in enumerate(files[1:], 1):
                lmms_eval_replay(file, tasks, folder / f"replay_{benchmark}_v{k}", env, "off")
                runs[benchmark].append(folder / f"replay_{benchmark}_v{k}")
            while len(runs[benchmark]) < max(report_runs[benchmark]):  # --quick: the same runs again, under other labels
                runs[benchmark].append(runs[benchmark][len(runs[benchmark]) - 2])
            results = json.loads(results_file(runs[benchmark][0]).read_text())
            out["documents"][benchmark] = sum(entry.get("effective", 0) for entry in results.get("n-samples", {}).values())
            scored = lmms_vr(["score", str(runs[benchmark][0]), "--out", str(folder / f"scored_{benchmark}.json")], env)
            out["score"][benchmark] = scored.figures()
            out["report"][benchmark] = {}
            for count in report_runs[benchmark]:
                items = [f"run{i + 1}={path}" for i, path in enumerate(runs[benchmark][:count])]
                for resamples in (scale.resamples, 0):
                    step = lmms_vr(["report", *items, "--out", str(folder / f"report_{benchmark}_{count}_{resamples}"),
                                    "--bootstrap", str(resamples)], env)
                    out["report"][benchmark][f"{count}_runs_{resamples}_resamples"] = step.figures()
            if reaggregate and benchmark == "cg_bench":  # the same four-run report, every resample re-aggregated by `metrics`
                items = [f"run{i + 1}={path}" for i, path in enumerate(runs[benchmark][:4])]
                step = lmms_vr_reaggregated(["report", *items, "--out", str(folder / "report_cg_bench_4_reaggregated"),
                                             "--bootstrap", str(scale.reaggregate_resamples)], env)
                out["report_reaggregated"] = {f"4_runs_{scale.reaggregate_resamples}_resamples": step.figures()}
        checked = in_child(same_intervals, {b: paths[:2] for b, paths in runs.items()},
                                 {b: tasks.split(",") for b, tasks in TASKS.items()}, scale.check_resamples, env)
    out.update(checked)
    ratios = {b: r["ratio_cpu"] for b, r in out["replay"].items()}
    cg = out["report"]["cg_bench"]
    four, four_none = cg[f"4_runs_{scale.resamples}_resamples"], cg["4_runs_0_resamples"]
    if reaggregate:
        out["reaggregate"] = reaggregation_estimate(out, scale)
    steps = [r[side] for r in out["replay"].values() for side in ("off", "on")] + list(out["score"].values()) + \
        [figures for per in out["report"].values() for figures in per.values()]
    out.update({
        "instderr_overhead_ratio": max(ratios.values()),
        "instderr_overhead_ratio_wall": max(r["ratio_wall"] for r in out["replay"].values()),
        "instderr_s": {b: r["stderr_in_process_s"] for b, r in out["replay"].items()},
        "report_ratio_4runs": round(four["wall_s"] / four_none["wall_s"], 3),
        "report_ratio_4runs_cpu": round(four["cpu_s"] / four_none["cpu_s"], 3),
        "report_4runs_s": four["wall_s"],
        "peak_mb_max": max(step["peak_mb"] for step in steps),
        "resamples": scale.resamples,
        "load_average_before_after": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
        "this_process_peak_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),  # the floor of every step's peak
        "total_s": round(time.perf_counter() - started, 1),
    })
    out["goals"] = {"instderr_overhead_ratio<=1.10": out["instderr_overhead_ratio"] <= 1.10,
                    "report_ratio_4runs<=2": out["report_ratio_4runs"] <= 2,
                    "report_4runs_s<60": out["report_4runs_s"] < 60,
                    "every_step<=1.5GB": out["peak_mb_max"] <= MB_LIMIT,
                    "same_intervals": out["same_intervals"]}
    return out


def reaggregation_estimate(out: dict, scale: Scale) -> dict:
    """The figures of bootstrapping by re-aggregating every resample with the metric function: the
    in-run standard errors (each task's resamples at the report's count, as the hook asks) against
    the replays' CPU time, and the four-run CG-Bench report extrapolated from its re-aggregated run."""
    per_resample = out["reaggregate_s_per_resample"]
    instderr = {b: sum(per_resample[t] for t in TASKS[b].split(",")) * scale.resamples for b in TASKS}
    ratios = {b: round((out["replay"][b]["off"]["cpu_s"] + instderr[b]) / out["replay"][b]["off"]["cpu_s"], 3) for b in TASKS}
    cg = out["report"]["cg_bench"]
    measured, none = out["report_reaggregated"][f"4_runs_{scale.reaggregate_resamples}_resamples"], cg["4_runs_0_resamples"]
    per = {key: (measured[key] - none[key]) / scale.reaggregate_resamples for key in ("wall_s", "cpu_s")}
    return {"s_per_resample": {t: round(v, 4) for t, v in per_resample.items()},
            "instderr_s_est": {b: round(v, 1) for b, v in instderr.items()},
            "instderr_overhead_ratio_est": max(ratios.values()), "instderr_overhead_ratio_est_by_benchmark": ratios,
            "report_4runs_s_est": round(none["wall_s"] + per["wall_s"] * scale.resamples, 1),
            "report_4runs_cpu_s_est": round(none["cpu_s"] + per["cpu_s"] * scale.resamples, 1),
            "report_4runs_measured_at": scale.reaggregate_resamples}


def print_table(out: dict) -> None:
    print(f"statistics at {out['scale']} size (documents per replay: {out['documents']}; load {out['load_average_before_after']})")
    for benchmark, replay in out["replay"].items():
        print(f"  replay {benchmark:9s} off {replay['off']}  on {replay['on']}  cpu ratio {replay['ratio_cpu']}  wall ratio {replay['ratio_wall']}")
    for benchmark, step in out["score"].items():
        print(f"  score  {benchmark:9s} {step}")
    for benchmark, per in out["report"].items():
        for name, step in per.items():
            print(f"  report {benchmark:9s} {name:28s} {step}")
    for key in ("instderr_overhead_ratio", "instderr_overhead_ratio_wall", "instderr_s", "report_ratio_4runs", "report_4runs_s", "peak_mb_max",
                "same_intervals", "reaggregate", "goals", "total_s"):
        if key in out:
            print(f"  {key}: {out[key]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small runs (a smoke run), not the benchmarks' sizes")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--keep", help="build and keep everything in this folder (default: a temporary one)")
    parser.add_argument("--reaggregate", action="store_true", help="also measure the bootstrap that re-aggregates every "
                        "resample by the benchmark's metrics (no per-sample columns)")
    args = parser.parse_args(argv)
    scale = QUICK if args.quick else FULL
    if args.keep:
        folder = Path(args.keep)
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        out = measure(folder, scale, args.reaggregate)
    else:
        with tempfile.TemporaryDirectory(prefix="lmms_vr_statistics_") as tmp:
            out = measure(Path(tmp), scale, args.reaggregate)
    if args.json:
        print(json.dumps(out))
    else:
        print_table(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
