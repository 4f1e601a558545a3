"""`lmms-vr score` leaves nothing out silently (issue 14): every run in a folder, duplicated or
missing rows, replay predictions with duplicate or unknown ids, duplicate VRBench videos,
errors as messages; and a judge incident followed by a healthy rerun.

Everything goes through the real CLI (`lmms_video_reasoning.utils.tools.cli.main`, in-process) on
the generated sample benchmark; judged tasks use the sample judge over real HTTP.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from judge_faults import FaultPlan, request_fingerprint
from test_batch_api import outcomes_of
from lmms_video_reasoning.judges import LocalJudgeServer
from lmms_video_reasoning.utils.results import samples_io
from lmms_video_reasoning.utils.tools.cli import main as cli_main
from score_report_support import environment, judge_env

NO_JUDGE = {"LMMS_VR_JUDGE_BASE_URL": "", "LMMS_VR_JUDGE_API_KEY": "", "OPENAI_API_KEY": "", "DEEPSEEK_API_KEY": ""}
MCQ = "vr_bench_mcq"  # no judge: fast


def predictions_of(sample_dir: Path, task: str) -> list[dict]:
    rows = [json.loads(line) for line in (sample_dir / "predictions.jsonl").read_text().splitlines() if line.strip()]
    return [row for row in rows if row.get("task") in (task, None)]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def cli(*argv: str) -> int:
    with environment(NO_JUDGE):
        return cli_main(["score", *argv])


@pytest.fixture
def env(sample_env):
    with environment(sample_env):
        yield


def scored_run(sample_dir: Path, out: Path, predictions: list[dict]) -> Path:
    """A run's results + samples files written by `lmms-vr score predictions --out`."""
    source = write_jsonl(out.parent / f"{out.stem}_predictions.jsonl", predictions)
    assert cli(str(source), "--task", MCQ, "--out", str(out)) == 0
    return samples_io.samples_path(out, MCQ)


def test_every_run_in_a_folder_is_scored(env, sample_dir, tmp_path, capsys):
    rows = predictions_of(sample_dir, MCQ)
    blank = [{**row, "response": "no idea"} for row in rows]
    folder = tmp_path / "outputs"
    scored_run(sample_dir, folder / "model_a" / "20260101_000000_results.json", rows)
    scored_run(sample_dir, folder / "model_b" / "20260102_000000_results.json", blank)
    (folder / "model_b" / "20260102_000000_samples_not_ours.jsonl").write_text('{"doc_id": 0}\n')
    capsys.readouterr()
    assert cli(str(folder), "--out", str(tmp_path / "rescored.json")) == 0
    printed = capsys.readouterr()
    assert "NOT SCORED:" in printed.out and "task 'not_ours' is not a task of this suite" in printed.out
    written = sorted(tmp_path.glob("rescored_*.json"))
    assert [p.name for p in written] == ["rescored_model_a__20260101_000000.json", "rescored_model_b__20260102_000000.json"]
    first, second = (json.loads(p.read_text()) for p in written)
    assert first["results"][MCQ]["mcq_accuracy,none"] > 0 == second["results"][MCQ]["mcq_accuracy,none"]
    assert first["lmms_vr"]["run"] == "model_a/20260101_000000"
    assert printed.out.count(f"\n{MCQ}  (") == 2


def test_duplicated_and_missing_rows_are_checked_against_the_documents(env, sample_dir, tmp_path, capsys):
    samples = scored_run(sample_dir, tmp_path / "run" / "20260101_000000_results.json", predictions_of(sample_dir, MCQ))
    lines = samples.read_text().splitlines()
    documents = len(lines)
    dropped_id = json.loads(lines[3])["sample_id"]
    edited = write_jsonl(tmp_path / "edited" / f"x_samples_{MCQ}.jsonl",
                         [json.loads(line) for line in lines[:3] + lines[4:] + [lines[0]]])  # one missing, one doubled
    capsys.readouterr()
    assert cli(str(edited), "--out", str(tmp_path / "edited.json")) == 0
    out = capsys.readouterr().out
    assert "1 duplicated rows scored once" in out and f"1 of {documents} documents have no sample" in out and dropped_id in out
    results = json.loads((tmp_path / "edited.json").read_text())
    coverage = results["lmms_vr"]["coverage"][MCQ]
    assert coverage["missing"] == [dropped_id] and coverage["duplicates_dropped"] == 1 and coverage["documents"] == documents
    assert results["n-samples"][MCQ] == {"original": documents, "effective": documents - 1}

    conflicting = json.loads(lines[0])
    conflicting["record"]["response"] = "(B) something else"
    clash = write_jsonl(tmp_path / "clash" / f"x_samples_{MCQ}.jsonl", [json.loads(line) for line in lines] + [conflicting])
    assert cli(str(clash)) == 2
    assert "appears twice with different content" in capsys.readouterr().err


def test_replay_duplicates_must_agree_and_unmatched_ids_are_reported(env, sample_dir, tmp_path, capsys):
    rows = predictions_of(sample_dir, MCQ)
    agreeing = write_jsonl(tmp_path / "agreeing.jsonl", rows + [rows[0], {**rows[1], "id": "no_such_video_qa1"}])
    capsys.readouterr()
    assert cli(str(agreeing), "--task", MCQ, "--out", str(tmp_path / "agreeing_results.json")) == 0
    assert "1 predictions match no document" in capsys.readouterr().out
    coverage = json.loads((tmp_path / "agreeing_results.json").read_text())["lmms_vr"]["coverage"][MCQ]
    assert coverage["unmatched_predictions"] == ["no_such_video_qa1"]

    clashing = write_jsonl(tmp_path / "clashing.jsonl", rows + [{**rows[0], "response": "(Z)"}])
    assert cli(str(clashing), "--task", MCQ) == 2
    err = capsys.readouterr().err
    assert f"record {len(rows) + 1}" in err and "different response" in err and "record 1" in err


def test_a_duplicate_vrbench_video_record_is_refused(sample_dir, sample_env, tmp_path, capsys):
    root = tmp_path / "vrbench"
    shutil.copytree(sample_dir / "vrbench", root)
    [annotations] = [p for p in root.rglob("*.jsonl")]
    first = annotations.read_text().splitlines()[0]
    annotations.write_text(annotations.read_text() + first + "\n")
    with environment({**sample_env, "VRBENCH_ROOT": str(root)}):
        assert cli(str(sample_dir / "predictions.jsonl"), "--task", MCQ) == 2
    err = capsys.readouterr().err
    assert f"video {json.loads(first)['video_id']} has a second record" in err


def test_score_errors_are_messages_not_tracebacks(env, sample_dir, tmp_path):
    samples = scored_run(sample_dir, tmp_path / "run" / "r_results.json", predictions_of(sample_dir, MCQ))
    stripped = write_jsonl(tmp_path / "stripped" / f"x_samples_{MCQ}.jsonl",
                           [{"doc_id": row["doc_id"], "record": {"sample_id": row["sample_id"]}}
                            for row in map(json.loads, samples.read_text().splitlines())])
    (tmp_path / "taken").mkdir()
    cases = {
        "stripped records": ([str(stripped)], "lacks what scoring needs"),
        "--out is a folder": ([str(samples), "--out", str(tmp_path / "taken")], "cannot write the results"),
        "unreadable path": ([str(tmp_path / "run")] , None),
    }
    (tmp_path / "run" / f"r_samples_{MCQ}.jsonl").chmod(0)
    for name, (argv, expected) in cases.items():
        proc = subprocess.run([sys.executable, "-m", "lmms_video_reasoning.utils.tools.cli", "score", *argv],
                              capture_output=True, text=True, timeout=300)
        if name == "unreadable path" and proc.returncode == 0:  # running as root: the file is readable anyway
            continue
        assert proc.returncode == 2, (name, proc.stdout[-2000:], proc.stderr[-2000:])
        assert "Traceback" not in proc.stderr, (name, proc.stderr[-3000:])
        assert "lmms-vr score: error:" in proc.stderr, name
        if expected:
            assert expected in proc.stderr, (name, proc.stderr[-2000:])


def test_a_judge_rejecting_the_key_is_a_message(env, sample_dir, tmp_path, capsys):
    with LocalJudgeServer(api_key="the-right-one") as server:
        with environment({**judge_env(server, tmp_path / "cache.sqlite"), "LMMS_VR_JUDGE_API_KEY": "sk-wrong-0123456789"}):
            assert cli_main(["score", str(sample_dir / "predictions.jsonl"), "--task", "vr_bench"]) == 2
    err = capsys.readouterr().err
    assert "the judge cannot run: HTTP 401" in err and "LMMS_VR_JUDGE_API_KEY" in err and "0123456789" not in err


def test_a_judge_incident_then_a_healthy_rerun_gives_the_clean_metrics(env, sample_dir, tmp_path):
    """A burst of HTTP-200 replies that do not parse, then the judge recovers: the rerun on the
    same cache re-sends exactly the requests that had failed, and the metrics are the clean ones."""
    from lmms_video_reasoning.utils.tools.demo import sample_responder

    task = "vcr_cot"
    predictions = str(sample_dir / "predictions.jsonl")

    def run(server, cache: Path, out: Path) -> dict:
        with environment({**judge_env(server, cache), "LMMS_VR_JUDGE_CONCURRENCY": "4"}):
            assert cli_main(["score", predictions, "--task", task, "--out", str(out)]) == 0
        return json.loads(out.read_text())

    with LocalJudgeServer(responder=sample_responder) as healthy:
        clean = run(healthy, tmp_path / "clean.sqlite", tmp_path / "clean.json")
        total = healthy.request_count
    incident = FaultPlan(by_request={number: "unparseable" for number in range(5, 5 + total // 2)})
    with LocalJudgeServer(responder=sample_responder, faults=incident) as flaky:
        hurt = run(flaky, tmp_path / "shared.sqlite", tmp_path / "hurt.json")
        sent = [(request_fingerprint(body), number in incident.by_request) for number, body in enumerate(flaky.requests, 1)]
    assert hurt["results"][task]["judge_failed,none"] > 0, "the incident cost verdicts"
    answered = {fingerprint for fingerprint, failed in sent if not failed}
    failed = {fingerprint for fingerprint, failed in sent if failed} - answered
    with LocalJudgeServer(responder=sample_responder) as recovered:
        rerun = run(recovered, tmp_path / "shared.sqlite", tmp_path / "rerun.json")
        resent = [request_fingerprint(body) for body in recovered.requests]
    clean_outcomes, rerun_outcomes = outcomes_of(tmp_path / "clean.json", task), outcomes_of(tmp_path / "rerun.json", task)
    differ = "".join(f"\n  sample {sample}: clean {outcome}, rerun {rerun_outcomes.get(sample)}"
                     for sample, outcome in clean_outcomes.items() if rerun_outcomes.get(sample) != outcome)
    assert rerun["results"][task] == clean["results"][task], f"metrics differ; samples:{differ}"
    assert not differ, f"per-sample outcomes differ:{differ}"
    assert failed and failed <= set(resent), "every judgment that failed is asked again"
    assert not set(resent) & answered, "no judgment answered during the incident is paid for twice"
    # Besides the failed ones, only the later steps the failures had prevented are new.
    assert len(resent) < total
    stats = rerun["lmms_vr"]["judge_accounting"][task]["stats"]
    assert stats["calls"] == len(resent) and sum(stats["answered_by"].values()) == stats["cache_hits"] + len(resent)
    assert set(stats["answered_by"]) == {"sample-oracle"}


def test_vr_replay_reports_predictions_that_match_no_document(tmp_path, caplog):
    from types import SimpleNamespace

    from lmms_video_reasoning.utils.lmms.replay_model import ReplayModel

    predictions = write_jsonl(tmp_path / "p.jsonl", [
        {"task": "t", "id": "a", "response": "A"}, {"task": "t", "id": "typo", "response": "B"},
        {"id": "orphan", "response": "C"}, {"task": "other", "id": "x", "response": "D"},
    ])
    model = ReplayModel(predictions=str(predictions))
    model.task_dict = {"t": {"test": [{"sample_id": "a"}]}}
    request = SimpleNamespace(args=("ctx", {}, None, 0, "t", "test"))
    with caplog.at_level("WARNING", logger="lmms_video_reasoning"):
        assert model.generate_until([request]) == ["A"]
    warnings = " ".join(record.getMessage() for record in caplog.records)
    assert "1 predictions for task t" in warnings and "'typo'" in warnings
    assert "(no task given)" in warnings and "'orphan'" in warnings
    assert "'x'" not in warnings  # another task's prediction: not this run's business
