"""`lmms-vr judge-agreement` with two simulated judges on loopback (utils/results/judge_agreement.py and
the agreement_pairs module it runs).

The reference judge is the sample benchmark's oracle; the candidate is the same oracle with a
known share of verdicts flipped deterministically (by a hash of the request): CG-Bench step-1
verdicts 0 <-> 1 with probability 0.3, VCR-Bench recall steps Matched <-> Unmatched with
probability 0.25, everything else untouched. Both are real OpenAI-compatible servers on
127.0.0.1, both judge three model runs through `lmms-vr score` into one SQLite cache; the
agreement is then read from that cache alone (no request), or a calibration subset is judged by
the reference within a request or cost bound.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from pathlib import Path
from types import SimpleNamespace

import pytest

from lmms_video_reasoning.judges import LocalJudgeServer
from lmms_video_reasoning.utils.results.agreement_pairs import kendall_tau
from lmms_video_reasoning.utils.results.judge_agreement import stratified_subset
from lmms_video_reasoning.utils.tools.cli import main as cli_main
from lmms_video_reasoning.utils.tools.demo import sample_responder
from lmms_video_reasoning.vcr_bench.prompts import official_prompt
from score_report_support import environment

TASKS = ("vcr_cot", "cg_bench_open", "vr_bench")
RECALL_PROMPT = official_prompt("Recall_Evaluation_Prompt")[:60]
STEP1_FLIP, RECALL_FLIP = 0.3, 0.25


def draw(*parts) -> float:
    """A deterministic number in [0, 1) for a request (and a step of it)."""
    return int(hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:12], 16) / 16**12


class FlippingJudge:
    """The oracle with a known share of verdicts flipped; logs every verdict it could flip and whether it did."""

    def __init__(self) -> None:
        self.log: list[tuple[str, bool, bool]] = []  # (call, flipped, could be flipped)

    def __call__(self, body: dict) -> str:
        reply = sample_responder(body)
        text = json.dumps(body["messages"], sort_keys=True)
        step1 = re.fullmatch(r'```json\n\{"result": ([012])\}\n```', reply)
        if step1 and "image_url" not in text:  # step 2 carries the clue frames
            # 2 ("needs a visual check") is never flipped: the same requests then follow for both judges
            flipped = step1[1] != "2" and draw(text, "step1") < STEP1_FLIP
            self.log.append(("cg_bench.open.step1", flipped, step1[1] != "2"))
            return reply.replace(step1[1], str(1 - int(step1[1]))) if flipped else reply
        content = body["messages"][-1].get("content")
        if isinstance(content, str) and content.startswith(RECALL_PROMPT):
            def flip(match, counter=iter(range(10**6))):
                index = next(counter)
                flipped = draw(text, "recall", index) < RECALL_FLIP
                self.log.append(("vcr.recall", flipped, True))
                other = {"Matched": "Unmatched", "Unmatched": "Matched"}[match[1]]
                return f'"judgment": "{other if flipped else match[1]}"'
            return re.sub(r'"judgment": "(Matched|Unmatched)"', flip, reply)
        return reply


def degrade(lines: list[dict], every: int) -> list[dict]:
    """A worse model: every `every`-th answer of a task replaced by the next answer of that task."""
    out, by_task = [], {}
    for line in lines:
        by_task.setdefault(line["task"], []).append(line)
    for group in by_task.values():
        for index, line in enumerate(group):
            response = group[(index + 1) % len(group)]["response"] if index % every == 0 else line["response"]
            out.append({**line, "response": response})
    return out


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def score_with(model: str, responder, predictions: Path, cache: Path, env: dict, out: Path) -> dict:
    with LocalJudgeServer(responder=responder, model=model) as server:
        with environment({**env, "LMMS_VR_JUDGE_BASE_URL": server.base_url, "LMMS_VR_JUDGE_MODEL": model,
                          "LMMS_VR_JUDGE_CACHE": str(cache)}):
            assert cli_main(["score", str(predictions), "--out", str(out)]) == 0
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def judged(sample_dir, sample_env, tmp_path_factory):
    """Three runs (the sample's answers and two degraded copies), each scored by both judges into one cache."""
    out = tmp_path_factory.mktemp("agreement")
    lines = [json.loads(line) for line in (sample_dir / "predictions.jsonl").read_text().splitlines()]
    lines = [line for line in lines if line["task"] in TASKS]
    runs = {"a": write_jsonl(out / "a.jsonl", lines), "b": write_jsonl(out / "b.jsonl", degrade(lines, 3)),
            "c": write_jsonl(out / "c.jsonl", degrade(lines, 2))}
    cache, candidate = out / "judge.sqlite", FlippingJudge()
    scored = {}
    for name, path in runs.items():  # the candidate first, run a first: its requests are all new, so the log is run a's
        scored[("cand", name)] = score_with("cand-judge", candidate, path, cache, sample_env, out / f"{name}_cand.json")
        if name == "a":
            log_a = list(candidate.log)
    for name, path in runs.items():
        scored[("ref", name)] = score_with("ref-judge", sample_responder, path, cache, sample_env, out / f"{name}_ref.json")
    return SimpleNamespace(out=out, runs=runs, cache=cache, scored=scored, log_a=log_a, env=sample_env, candidate=candidate)


def agreement(judged, *arguments: str, runs=("a",)) -> dict:
    out = judged.out / f"agreement_{'_'.join(runs)}_{abs(hash(arguments))}.json"
    with environment(judged.env):
        status = cli_main(["judge-agreement", *[f"{name}={judged.runs[name]}" for name in runs], "--reference", "ref-judge",
                           "--candidate", "cand-judge", "--out", str(out), "--bootstrap", "400", *arguments])
    assert status == 0
    return json.loads(out.read_text())


def call(document: dict, name: str) -> dict:
    return next(c for c in document["calls"] if c["call"] == name)


def test_the_known_disagreement_rates_are_recovered_within_their_ci(judged):
    """Run a: every step-1 verdict and recall step was asked once, so the measured disagreement is
    exactly the share the candidate flipped, and both it and the flip probability lie in the CI."""
    requests_before = sqlite3.connect(judged.cache).execute("SELECT COUNT(*) FROM replies").fetchone()[0]
    document = agreement(judged, "--cache", str(judged.cache))
    for name, probability in (("cg_bench.open.step1", STEP1_FLIP), ("vcr.recall", RECALL_FLIP)):
        logged = [(flipped, flippable) for logged, flipped, flippable in judged.log_a if logged == name]
        c = call(document, name)
        assert c["pairs"] == len(logged) >= 20, (name, c["pairs"], len(logged))
        realized = sum(flipped for flipped, _ in logged) / len(logged)
        expected = probability * sum(flippable for _, flippable in logged) / len(logged)  # the flip rate over every verdict
        measured = 1 - c["agreement"]
        assert measured == pytest.approx(realized), name
        low, high = 1 - c["agreement_ci"][1], 1 - c["agreement_ci"][0]
        assert low <= realized <= high and low <= expected <= high, (name, realized, expected, (low, high))
        assert c["kappa"] < 0.9 and c["kappa_ci"][0] < c["kappa"] < c["kappa_ci"][1]
    # the calls the candidate did not touch agree completely
    for c in document["calls"]:
        if c["call"] not in ("cg_bench.open.step1", "vcr.recall"):
            assert c["agreement"] == 1.0, c
    assert call(document, "vrbench.unique logical_consistency")["statistic"] == "weighted kappa (quadratic)"
    assert call(document, "cg_bench.open.step1")["statistic"] == "Cohen's kappa"
    # the judges and the snapshots that answered them
    assert document["judges"]["cg_bench"]["reference"]["snapshots"] == {"ref-judge": call(document, "cg_bench.open.step1")["pairs"]
                                                                         + call(document, "cg_bench.open.step2")["pairs"]}
    assert set(document["judges"]["vcr_bench"]["candidate"]["snapshots"]) == {"cand-judge"}
    assert sqlite3.connect(judged.cache).execute("SELECT COUNT(*) FROM replies").fetchone()[0] == requests_before, "nothing was sent"


def test_metric_differences_are_the_two_judges_own_scores(judged):
    document = agreement(judged, "--cache", str(judged.cache))
    by = {(m["task"], m["metric"]): m for m in document["metrics"]}
    for task, metric in (("cg_bench_open", "oe_acc"), ("vcr_cot", "accuracy"), ("vcr_cot", "cot_f1")):
        row = by[(task, metric)]
        assert row["reference"] == pytest.approx(judged.scored[("ref", "a")]["results"][task][f"{metric},none"])
        assert row["candidate"] == pytest.approx(judged.scored[("cand", "a")]["results"][task][f"{metric},none"])
        assert row["difference"] == pytest.approx(row["candidate"] - row["reference"])
        assert row["ci"][0] <= row["difference"] <= row["ci"][1]
    assert by[("vcr_cot", "accuracy")]["difference"] == 0 and by[("vcr_cot", "accuracy")]["ci"] == [0, 0]
    assert by[("vcr_cot", "cot_f1")]["difference"] != 0, "flipped recall steps move the CoT score"
    # the sample whose answer makes the oracle refuse (VRBench) has no verdict from either: counted, not compared
    vr = next(row for row in document["coverage"] if row["task"] == "vr_bench")
    assert vr["samples"] - vr["compared"] == 1 and vr["reference_incomplete"] == vr["candidate_incomplete"] == 1


def test_ranking_agreement_over_three_runs(judged):
    document = agreement(judged, "--cache", str(judged.cache), runs=("a", "b", "c"))
    rows = {(r["task"], r["metric"]): r for r in document["ranking"]}
    accuracy = rows[("vcr_cot", "accuracy")]
    assert accuracy["runs"] == ["a", "b", "c"]
    assert accuracy["reference"] == accuracy["candidate"] and accuracy["tau"] == pytest.approx(1.0)
    for row in rows.values():
        assert row["tau"] == pytest.approx(kendall_tau(row["reference"], row["candidate"]))
    oe = rows[("cg_bench_open", "oe_acc")]
    assert oe["reference"] == [pytest.approx(judged.scored[("ref", r)]["results"]["cg_bench_open"]["oe_acc,none"]) for r in "abc"]


def test_the_report_shows_the_agreement_with_its_plot_and_snapshots(judged):
    document_path = judged.out / "for_report.json"
    with environment(judged.env):
        assert cli_main(["judge-agreement", str(judged.runs["a"]), "--reference", "ref-judge", "--candidate", "cand-judge",
                         "--cache", str(judged.cache), "--out", str(document_path), "--bootstrap", "100"]) == 0
        assert cli_main(["report", str(judged.out / "a_ref.json"), "--out", str(judged.out / "report"), "--bootstrap", "50",
                         "--agreement", str(document_path)]) == 0
    markdown = (judged.out / "report" / "report.md").read_text()
    section = markdown[markdown.index("## Judge agreement"):]
    assert "ref-judge x" in section and "cand-judge x" in section, "the judges' snapshots are stated"
    assert "cg\\_bench.open.step1" in section and "Kendall" not in section  # one run: no ranking table
    assert (judged.out / "report" / "judge_agreement_1.png").stat().st_size > 5000
    assert "Judge agreement" in (judged.out / "report" / "report.html").read_text()
    with environment(judged.env):  # a file that is not an agreement is refused with the fix
        assert cli_main(["report", str(judged.out / "a_ref.json"), "--out", str(judged.out / "report2"),
                         "--agreement", str(judged.out / "a_ref.json")]) == 2


def test_stratified_subset_is_proportional_seeded_and_covers_every_stratum():
    strata = {"a": list(range(60)), "b": list(range(100, 130)), "c": list(range(200, 210))}
    chosen = stratified_subset(strata, 20, seed=1)
    counts = {name: sum(item in set(items) for item in chosen) for name, items in strata.items()}
    assert len(chosen) == 20 and counts == {"a": 12, "b": 6, "c": 2}
    assert stratified_subset(strata, 20, seed=1) == chosen and stratified_subset(strata, 20, seed=2) != chosen
    small = stratified_subset({"a": list(range(97)), "b": [100, 101], "c": [200]}, 3, seed=0)
    assert len(small) == 3 and {100, 101} & set(small) and 200 in small, "every stratum gets one when the size allows"
    assert len(stratified_subset(strata, 500)) == 100


@pytest.fixture(scope="module")
def candidate_only(judged, tmp_path_factory):
    """A cache with the candidate's verdicts of run a only (what a cluster run with a local judge leaves)."""
    cache = tmp_path_factory.mktemp("calibration") / "judge.sqlite"
    score_with("cand-judge", FlippingJudge(), judged.runs["a"], cache, judged.env, cache.parent / "a_cand.json")
    return cache


def calibrate(judged, cache: Path, server: LocalJudgeServer, *bounds: str, prices: dict | None = None) -> tuple[dict, str]:
    out = cache.parent / f"calibrated_{abs(hash(bounds))}.json"
    env = {**judged.env, "REF_KEY": "sk-test-ref-SECRET", **({"LMMS_VR_JUDGE_PRICES": json.dumps(prices)} if prices else {})}
    with environment(env):
        status = cli_main(["judge-agreement", str(judged.runs["a"]), "--reference", "ref-judge", "--candidate", "cand-judge",
                           "--cache", str(cache), "--calibrate", "12", "--reference-base-url", server.base_url,
                           "--reference-key-env", "REF_KEY", "--out", str(out), "--bootstrap", "100", *bounds])
    assert status == 0
    return json.loads(out.read_text()), out.read_text()


def test_calibration_judges_a_stratified_subset_within_the_stated_request_bound(judged, candidate_only, capsys):
    with LocalJudgeServer(responder=sample_responder, model="ref-judge", api_key="sk-test-ref-SECRET") as server:
        document, text = calibrate(judged, candidate_only, server)
        sent = server.request_count
    printed = capsys.readouterr().out
    calibration = document["calibration"]
    assert calibration["samples"] == 12 and sum(row["compared"] for row in document["coverage"]) == 12
    assert {row["task"] for row in document["coverage"]} == set(TASKS), "every task is represented"
    assert sent == calibration["bound"]["calls"] == calibration["expected_requests"], "the reference asked what the candidate needed"
    assert calibration["bound"]["max_calls"] == 2 * calibration["expected_requests"] and not calibration["bound"]["exhausted"]
    assert f"at most {calibration['bound']['max_calls']} requests" in printed and "price unknown" in printed
    assert "SECRET" not in text + printed
    # a second calibration is served by the cache: nothing is sent again
    with LocalJudgeServer(responder=sample_responder, model="ref-judge", api_key="sk-test-ref-SECRET") as server:
        again, _ = calibrate(judged, candidate_only, server)
        assert server.request_count == 0 and again["calls"] == document["calls"]


def test_calibration_stops_at_the_request_bound_and_counts_what_was_not_compared(judged, tmp_path):
    cache = tmp_path / "judge.sqlite"
    score_with("cand-judge", FlippingJudge(), judged.runs["a"], cache, judged.env, tmp_path / "a_cand.json")
    with LocalJudgeServer(responder=sample_responder, model="ref-judge", api_key="sk-test-ref-SECRET") as server:
        document, _ = calibrate(judged, cache, server, "--max-requests", "5")
        assert server.request_count == 5
    assert document["calibration"]["bound"]["exhausted"] and document["calibration"]["bound"]["calls"] == 5
    not_compared = sum(row["samples"] - row["compared"] for row in document["coverage"])
    assert not_compared >= 12 - 5 and sum(row["compared"] for row in document["coverage"]) <= 5


def test_calibration_stops_before_its_cost_bound(judged, tmp_path):
    cache = tmp_path / "judge.sqlite"
    score_with("cand-judge", FlippingJudge(), judged.runs["a"], cache, judged.env, tmp_path / "a_cand.json")
    prices = {"ref-judge": {"input": 100.0, "output": 100.0}}  # USD per 1M tokens: a few cents per request
    with LocalJudgeServer(responder=sample_responder, model="ref-judge", api_key="sk-test-ref-SECRET") as server:
        document, _ = calibrate(judged, cache, server, "--max-cost", "0.5", prices=prices)
        sent = server.request_count
    bound = document["calibration"]["bound"]
    assert bound["exhausted"] and 0 < sent == bound["calls"] < document["calibration"]["expected_requests"]
    assert 0 < bound["spent_usd"] <= 0.5 and document["calibration"]["expected_cost_usd"] > 0
