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
  (`LMMS_VR_STDERR=off`): ``instderr_overhead_ratio`` = on / off (the worst benchmark);
- ``score``: `lmms-vr score` on each replay's output folder;
- ``report``: `lmms-vr report` on 1, 2 and 4 full CG-Bench runs (and 4 VCR-Bench and VRBench
  runs) at 1000 resamples and at 0: ``report_ratio_4runs`` (1000 / 0, four CG-Bench runs),
  ``report_4runs_s``;
- ``same_intervals``: the array bootstrap and the reference bootstrap (each resample
  re-aggregated by the benchmark's metric function) agree to 1e-9 on these runs (a few
  hundred resamples, every metric, paired differences included).

Every step runs as its own process; its peak memory is that process's maximum resident set
(`resource.getrusage(RUSAGE_CHILDREN)` after it ended). `--quick` builds small runs (a smoke
run in well under a minute). Goals: ``instderr_overhead_ratio`` <= 1.10, ``report_ratio_4runs``
<= 2, ``report_4runs_s`` < 60, no step over 1.5 GB.

    .venv/bin/python benchmarks/statistics.py [--quick] [--json] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
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


FULL = Scale(12_129, 1_219, 1_034, 859, 8_243, 960, 1000, 200)
QUICK = Scale(300, 40, 60, 50, 120, 14, 200, 50)


def mark(text: str, copy: int) -> str:
    return f"⟦c{copy}⟧ {text}"


# ---------------------------------------------------------------------------------------------
# Full-size roots and replay predictions, scaled up from the sample benchmark
# ---------------------------------------------------------------------------------------------


def write_cg_bench(root: Path, questions: int, videos: int) -> list[dict]:
    """A CG-Bench root whose full split (`cgbench.json`) has `questions` questions on `videos`
    videos, each a copy of a sample question of the same sample video; replies for the four
    multiple-choice and grounding tasks."""
    from lmms_video_reasoning.cg_bench import data, sample

    base = sample.build_questions()
    by_video = {video.uid: [q for q in base if q["video_uid"] == video.uid] for video in sample.VIDEOS}
    meta, rows = {}, []
    for v in range(videos):
        video = sample.VIDEOS[v % len(sample.VIDEOS)]
        meta[f"cgs{v:05d}"] = {"duration": float(video.duration), "max_frame": video.duration * video.fps - 1, "fps": float(video.fps)}
    for i in range(questions):
        v = i % videos
        video = sample.VIDEOS[v % len(sample.VIDEOS)]
        pool = by_video[video.uid]
        q = dict(pool[(i // videos) % len(pool)])
        q.update(qid=100_000 + i, video_uid=f"cgs{v:05d}", question=mark(q["question"], i))
        rows.append(q)
    root.mkdir(parents=True, exist_ok=True)
    (root / data.META_FILE).write_text(json.dumps(meta))
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
    from lmms_video_reasoning.vcr_bench.data import ANNOTATION

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
    from lmms_video_reasoning.vrbench.data import ANNOTATIONS, flatten

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
