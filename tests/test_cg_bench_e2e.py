"""CG-Bench end to end: the sample benchmark through `python -m lmms_eval` with the replay model and a local judge."""

from __future__ import annotations

import json
import math

import pytest
from lmms_cli import metric, run_lmms_eval, samples_files

from bench_scoring import score_records
from lmms_video_reasoning.cg_bench import benchmark as binding
from lmms_video_reasoning.cg_bench import sample
from lmms_video_reasoning.cg_bench import task as cg_task
from lmms_video_reasoning.utils.results import samples_io
from lmms_video_reasoning.utils.tools.sample import env_for, write_sample


@pytest.fixture(scope="module")
def cg_sample(tmp_path_factory):
    out = tmp_path_factory.mktemp("cg_e2e")
    write_sample(out, ("cg_bench",))
    return out


def _expected_mcq_accuracy(offset: int) -> float:
    """long/clue accuracy implied by `sample.mcq_reply`: kind 3 wrong, kind 7 unparseable (left out), the rest right."""
    kinds = [(i + offset) % 9 for i in range(len(sample.build_questions()) - sample.MINI_EXCLUDED)]
    scored = [k for k in kinds if k != 7]
    return 100.0 * sum(k != 3 for k in scored) / len(scored)


@pytest.mark.slow
def test_mcq_and_open_through_lmms_eval(cg_sample, tmp_path, monkeypatch):
    from lmms_video_reasoning.judges import LocalJudgeServer

    output = tmp_path / "out"
    with LocalJudgeServer(responder=lambda body: sample.oracle_judge_reply(body) or "0") as server:
        env = {**env_for(cg_sample, ("cg_bench",)), "LMMS_VR_JUDGE_BASE_URL": server.base_url, "LMMS_VR_JUDGE_CACHE": "off"}
        results = run_lmms_eval("cg_bench_mcq,cg_bench_open", output,
                                model_args=f"predictions={cg_sample / 'predictions.jsonl'}", env=env)
        judge_bodies = list(server.requests)

        # The CLI's numbers are what the same records give in-process (the `lmms-vr score` path).
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        rescored = {}
        for task in ("cg_bench_mcq", "cg_bench_open"):
            (path,) = samples_files(output, task)
            records = [samples_io.logged_record(json.loads(line), samples_io.task_spec(task))
                       for line in path.read_text().splitlines() if line.strip()]
            rescored[task] = score_records(binding, records)

    mcq = {name: metric(results, "cg_bench_mcq", name) for name in cg_task.METRICS["mcq"]}
    assert mcq["long_acc"] == pytest.approx(_expected_mcq_accuracy(0))
    assert mcq["clue_acc"] == pytest.approx(_expected_mcq_accuracy(4))
    assert mcq["crr"] == pytest.approx(100 * min(mcq["long_acc"], mcq["clue_acc"]) / mcq["clue_acc"])
    assert 0 < mcq["acc_at_iou"] <= mcq["rec_at_iou"] < 100 and 0 < mcq["miou"] < 100
    assert mcq["parse_failed"] > 0
    for name, value in mcq.items():
        assert value == pytest.approx(rescored["cg_bench_mcq"][name]), name

    oe_acc = metric(results, "cg_bench_open", "oe_acc")
    assert not math.isnan(oe_acc) and 50 < oe_acc < 100
    assert oe_acc == pytest.approx(rescored["cg_bench_open"]["oe_acc"])
    empty = sum(1 for i in range(len(sample.build_questions()) - sample.MINI_EXCLUDED) if sample.open_reply(sample.build_questions()[i], i) == "")
    assert metric(results, "cg_bench_open", "parse_failed") == empty
    assert metric(results, "cg_bench_open", "judge_failed") == 0 == rescored["cg_bench_open"]["judge_failed"]
    assert mcq["model_failed"] == 0 and metric(results, "cg_bench_open", "model_failed") == 0

    # Step 2 ran for the synonyms, with the clue frames attached.
    step2 = [b for b in judge_bodies if any(p.get("type") == "image_url" for p in b["messages"][0]["content"])]
    assert step2 and all(len(b["messages"][0]["content"]) > 1 for b in step2)

    [results_file] = output.rglob("*_results.json")
    date_id = results_file.name[: -len("_results.json")]
    details_file = results_file.with_name(f"{date_id}_cg_bench_mcq_details.json")  # paired with the run's results
    details = json.loads(details_file.read_text())
    assert set(details["breakdown"]["duration"]) == {"0-10", "10-20", "20-30", "60+"}
    assert set(details["breakdown"]["kind"]) == {"perception", "reasoning", "hallucination"}
    open_details = json.loads(details_file.with_name(f"{date_id}_cg_bench_open_details.json").read_text())
    assert open_details["judge"]["stats"]["by_tag"]["cg_bench.open.step2"]["calls"] == len(step2)
