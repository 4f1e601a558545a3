"""Offline batch judging: `lmms-vr score --batch-export` / `--batch-import` in rounds, answered by a
`vllm run-batch` stand-in (`tests/batch_runner.py`: the sample judge's replies, run-batch's output
format), then `lmms-vr score` from the cache, against the synchronous run of the same tasks."""

from __future__ import annotations

import json
import math
import re

import pytest

from batch_runner import answer_file
from lmms_video_reasoning.judges.cache import ReplyCache, request_key
from lmms_video_reasoning.utils.tools.cli import main as cli_main
from lmms_video_reasoning.utils.tools.demo import sample_responder
from score_report_support import environment, sample_judge

TASKS = ("vcr_cot", "vr_bench", "cg_bench_open")  # later steps (VCR-Bench, CG-Bench) and re-asks (VRBench's refusals)
NO_KEY = {"LMMS_VR_JUDGE_BASE_URL": "", "LMMS_VR_JUDGE_API_KEY": "", "OPENAI_API_KEY": "", "DEEPSEEK_API_KEY": "",
          "LMMS_VR_JUDGE_MODEL": "sample-oracle", "HF_HUB_OFFLINE": "1"}


def _score(path, task, out, env) -> dict:
    with environment(env):
        assert cli_main(["score", str(path), "--task", task, "--out", str(out)]) == 0
    return json.loads(out.read_text())["results"][task]


@pytest.fixture(scope="module")
def synchronous(sample_dir, sample_env, tmp_path_factory):
    folder = tmp_path_factory.mktemp("sync")
    with sample_judge(folder / "judge.sqlite", {**sample_env, "HF_HUB_OFFLINE": "1"}):
        return {task: _score(sample_dir / "predictions.jsonl", task, folder / f"{task}.json", {}) for task in TASKS}


def _round(predictions, task, folder, number, env, capsys, faults=None) -> tuple[int, str]:
    requests, results = folder / f"requests_{number}.jsonl", folder / f"results_{number}.jsonl"
    with environment(env):
        assert cli_main(["score", str(predictions), "--task", task, "--batch-export", str(requests)]) == 0
        exported = capsys.readouterr().out
        count = sum(1 for line in requests.read_text().splitlines() if line.strip())
        if count:
            answer_file(requests, results, sample_responder, faults=faults)
            assert cli_main(["score", str(predictions), "--task", task, "--batch-import", str(results)]) == 0
    return count, exported + capsys.readouterr().out


@pytest.mark.parametrize("task", TASKS)
def test_rounds_until_empty_give_the_synchronous_metrics(task, synchronous, sample_dir, sample_env, tmp_path, capsys):
    env = {**sample_env, **NO_KEY, "LMMS_VR_JUDGE_CACHE": str(tmp_path / "judge.sqlite")}
    predictions = sample_dir / "predictions.jsonl"
    counts, outputs = [], []
    for number in range(1, 10):
        count, output = _round(predictions, task, tmp_path, number, env, capsys)
        counts.append(count)
        outputs.append(output)
        if not count:
            break
    assert counts[-1] == 0 and "nothing to judge" in outputs[-1]
    announced = int(outputs[0].split("rounds left: at most ")[1].split(",")[0])
    assert len(counts) - 1 <= announced, (counts, announced)
    if task != "vr_bench":
        assert len(counts) >= 3, f"{task}: a later step is exported only after its first step is imported ({counts})"
    scored = _score(predictions, task, tmp_path / "scored.json", env)
    for name, value in synchronous[task].items():
        got = scored[name]
        same = (math.isnan(value) and math.isnan(got)) if isinstance(value, float) and math.isnan(value) else got == value
        assert same, f"{task} {name}: synchronous {value!r}, batch files {got!r}"


def test_export_lines_are_batch_requests_keyed_by_the_cache_key(sample_dir, sample_env, tmp_path, capsys):
    env = {**sample_env, **NO_KEY, "LMMS_VR_JUDGE_CACHE": str(tmp_path / "judge.sqlite")}
    _round(sample_dir / "predictions.jsonl", "vr_bench", tmp_path, 1, env, capsys)
    lines = [json.loads(line) for line in (tmp_path / "requests_1.jsonl").read_text().splitlines()]
    assert lines
    for line in lines:
        assert line["method"] == "POST" and line["url"] == "/v1/chat/completions"
        body = line["body"]
        assert body["model"] == "sample-oracle"
        assert line["custom_id"] == request_key(body["model"], body["messages"], body["max_tokens"], body.get("temperature"), 0)
    assert len({line["custom_id"] for line in lines}) == len(lines)


def test_import_refuses_foreign_stale_and_other_models_replies(sample_dir, sample_env, tmp_path, capsys):
    env = {**sample_env, **NO_KEY, "LMMS_VR_JUDGE_CACHE": str(tmp_path / "judge.sqlite")}
    predictions = sample_dir / "predictions.jsonl"
    requests, results = tmp_path / "requests.jsonl", tmp_path / "results.jsonl"
    with environment(env):
        assert cli_main(["score", str(predictions), "--task", "vr_bench", "--batch-export", str(requests)]) == 0
    keys = [json.loads(line)["custom_id"] for line in requests.read_text().splitlines()]
    other, garbage, failing = keys[0], keys[1], keys[2]
    answer_file(requests, results, sample_responder, faults={other: "other_model", garbage: "garbage", failing: "error"})
    foreign = json.loads(results.read_text().splitlines()[3])
    foreign["custom_id"] = "f" * 64  # a reply for a request this cache never exported
    with results.open("a") as handle:
        handle.write(json.dumps(foreign) + "\n" + "not json\n")
    capsys.readouterr()
    with environment(env):
        assert cli_main(["score", str(predictions), "--task", "vr_bench", "--batch-import", str(results)]) == 0
    out = capsys.readouterr().out
    assert "REFUSED (not served): 1 answered by another model than the judge's, 1 with a custom_id this cache never exported" in out
    assert "1 not result lines" in out and "1 failed lines" in out
    cache = ReplyCache(tmp_path / "judge.sqlite")
    assert [row["reason"][:6] for row in cache.rejected(garbage)] == ["parse:"], "kept apart, not served"
    assert cache.get(other) is None and cache.get(garbage) is None and cache.get("f" * 64) is None
    assert any("answered by 'some-other-model'" in row["reason"] for row in cache.rejected(other))
    assert cache.get(keys[3]) is not None
    # The same results again: every line already imported is stale, nothing is served twice.
    with environment(env):
        assert cli_main(["score", str(predictions), "--task", "vr_bench", "--batch-import", str(results)]) == 0
    again = capsys.readouterr().out
    assert "stale" in again and " 0 cached," in again
    # The refused, unparsed and failed requests are due in the next export (the unparsed one as its re-ask).
    with environment(env):
        assert cli_main(["score", str(predictions), "--task", "vr_bench", "--batch-export", str(tmp_path / "next.jsonl")]) == 0
    due = [json.loads(line)["custom_id"] for line in (tmp_path / "next.jsonl").read_text().splitlines()]
    assert other in due and failing in due and garbage not in due
    assert len(due) == 3 + sum(1 for key in keys[3:] if cache.get(key) is None)  # + the sample judge's refusals, re-asked


# ---------------------------------------------------------------------- an import's every line accounted for

SUMMARY = re.compile(r"imported \S+: (\d+) lines: (\d+) cached, (\d+) did not parse .*?, (\d+) failed lines \(due again; \d+ "
                     r"requests out of attempts: judged failed\), (\d+) duplicates \(imported once\), (\d+) in (\d+) conflicts "
                     r".*?, (\d+) refused, (\d+) undecodable, (\d+) not result lines, (\d+) blank")


def _accounting(out: str) -> tuple[int, dict]:
    """(the line count the import reports, each fate's count) from its summary line."""
    found = SUMMARY.search(out)
    assert found, out
    numbers = [int(value) for value in found.groups()]
    names = ("cached", "rejected", "errors", "duplicates", "conflict_lines", "conflicts", "refused", "undecodable",
             "unreadable", "blank")
    return numbers[0], dict(zip(names, numbers[1:]))


def _exported(predictions, env, folder) -> tuple[list[str], list[dict]]:
    requests, results = folder / "requests.jsonl", folder / "answered.jsonl"
    with environment(env):
        assert cli_main(["score", str(predictions), "--task", "vr_bench", "--batch-export", str(requests)]) == 0
    answer_file(requests, results, sample_responder)
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    return [row["custom_id"] for row in rows], rows


def _with_reply(row: dict, content: str) -> dict:
    row = json.loads(json.dumps(row))
    row["id"] = "another-line-id"
    row["response"]["body"]["id"] = "chatcmpl-another"
    row["response"]["body"]["choices"][0]["message"]["content"] = content
    return row


def _encoded(row: dict) -> bytes:
    return json.dumps(row).encode("utf-8") + b"\n"


def test_import_accounts_for_every_line(sample_dir, sample_env, tmp_path, capsys):
    env = {**sample_env, **NO_KEY, "LMMS_VR_JUDGE_CACHE": str(tmp_path / "judge.sqlite")}
    predictions = sample_dir / "predictions.jsonl"
    keys, rows = _exported(predictions, env, tmp_path)
    assert len(keys) >= 8
    conflicted, doubled, undecodable, huge = keys[0], keys[1], keys[2], keys[3]
    reply = lambda row: row["response"]["body"]["choices"][0]["message"]["content"]  # noqa: E731
    lines = [
        _encoded(rows[0]),                                                    # 1: conflict, first reply
        _encoded(rows[1]),                                                    # 2: cached
        _encoded(_with_reply(rows[0], reply(rows[0]) + " (changed)")),        # 3: conflict, another reply
        _encoded(_with_reply(rows[1], reply(rows[1]))),                       # 4: the same reply again: a duplicate
        _encoded(rows[2]).replace(b'"content": "', b'"content": "\xff', 1),   # 5: not UTF-8
        _encoded(_with_reply(rows[3], "x" * (4 * 1024 * 1024 + 1))),          # 6: over the 4 MiB reply cap
        b"\n",                                                                # 7: blank
        b"{not json\n",                                                       # 8: not a result line
    ] + [_encoded(row) for row in rows[4:]]                                   # 9...: the other replies
    results = tmp_path / "results.jsonl"
    results.write_bytes(b"".join(lines))
    assert b"\xff" in results.read_bytes()
    capsys.readouterr()
    with environment(env):
        assert cli_main(["score", str(predictions), "--task", "vr_bench", "--batch-import", str(results)]) == 0
    out = capsys.readouterr().out
    total, fates = _accounting(out)
    assert total == results.read_bytes().count(b"\n") == len(lines)
    assert sum(value for name, value in fates.items() if name != "conflicts") == total, fates
    assert fates["conflicts"] == 1 and fates["conflict_lines"] == 2 and fates["duplicates"] == 1
    assert fates["undecodable"] == 1 and fates["unreadable"] == 1 and fates["blank"] == 1 and fates["refused"] == 1
    assert fates["cached"] + fates["rejected"] == len(rows) - 3, "every good line imported"
    assert f"{conflicted[:16]}: results.jsonl:1, results.jsonl:3" in out
    assert "results.jsonl:5: not UTF-8 (byte 0xff" in out
    assert f"results.jsonl:6: {huge[:16]}: reply larger than {4 * 1024 * 1024} bytes refused" in out
    assert "results.jsonl:8: not a batch result line" in out
    assert f"results.jsonl:4: {doubled[:16]}: the same reply as at results.jsonl:2" in out
    cache = ReplyCache(tmp_path / "judge.sqlite")
    assert cache.get(conflicted) is None, "neither of two different replies is cached"
    assert cache.get(doubled) is not None and cache.get(doubled).raw == reply(rows[1])
    assert cache.get(undecodable) is None and cache.get(huge) is None
    assert not cache.rejected(huge), "a reply over the cap is not kept"
    assert sum(cache.get(key) is not None for key in keys[4:]) == fates["cached"] - 1
    # The conflicting, undecodable and too large ones are due again.
    with environment(env):
        assert cli_main(["score", str(predictions), "--task", "vr_bench", "--batch-export", str(tmp_path / "next.jsonl")]) == 0
    due = {json.loads(line)["custom_id"] for line in (tmp_path / "next.jsonl").read_text().splitlines()}
    assert {conflicted, undecodable, huge} <= due and doubled not in due


def test_the_reply_cap_is_the_judge_setting(sample_dir, sample_env, tmp_path, capsys):
    env = {**sample_env, **NO_KEY, "LMMS_VR_JUDGE_CACHE": str(tmp_path / "judge.sqlite"), "LMMS_VR_JUDGE_MAX_REPLY_BYTES": "2048"}
    predictions = sample_dir / "predictions.jsonl"
    keys, rows = _exported(predictions, env, tmp_path)
    results = tmp_path / "results.jsonl"
    results.write_bytes(_encoded(_with_reply(rows[0], "y" * 3000)) + b"".join(_encoded(row) for row in rows[1:]))
    capsys.readouterr()
    with environment(env):
        assert cli_main(["score", str(predictions), "--task", "vr_bench", "--batch-import", str(results)]) == 0
    out = capsys.readouterr().out
    assert f"results.jsonl:1: {keys[0][:16]}: reply larger than 2048 bytes refused" in out
    assert ReplyCache(tmp_path / "judge.sqlite").get(keys[0]) is None


def test_import_that_accepts_nothing_fails(sample_dir, sample_env, tmp_path, capsys):
    env = {**sample_env, **NO_KEY, "LMMS_VR_JUDGE_CACHE": str(tmp_path / "judge.sqlite")}
    predictions = sample_dir / "predictions.jsonl"
    keys, rows = _exported(predictions, env, tmp_path)
    foreign = json.loads(json.dumps(rows[0]))
    foreign["custom_id"] = "f" * 64
    results = tmp_path / "results.jsonl"
    results.write_bytes(_encoded(foreign) + b"\xfe\xff\n" + b"[]\n")
    capsys.readouterr()
    with environment(env):
        assert cli_main(["score", str(predictions), "--task", "vr_bench", "--batch-import", str(results)]) == 2
    captured = capsys.readouterr()
    assert "results.jsonl:1: ffffffffffffffff: a custom_id this cache never exported" in captured.out
    assert "results.jsonl:2: not UTF-8" in captured.out and "results.jsonl:3: not a batch result line" in captured.out
    assert "nothing imported: none of its 3 lines was accepted" in captured.err
    assert "1 with a custom_id this cache never exported" in captured.err and "1 undecodable" in captured.err
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    with environment(env):
        assert cli_main(["score", str(predictions), "--task", "vr_bench", "--batch-import", str(empty)]) == 2
    assert "the file is empty" in capsys.readouterr().err
    # Imported once, then again: every line stale, nothing accepted.
    good = tmp_path / "good.jsonl"
    good.write_bytes(b"".join(_encoded(row) for row in rows))
    with environment(env):
        assert cli_main(["score", str(predictions), "--task", "vr_bench", "--batch-import", str(good)]) == 0
        capsys.readouterr()
        assert cli_main(["score", str(predictions), "--task", "vr_bench", "--batch-import", str(good)]) == 2
    again = capsys.readouterr()
    assert f"{len(rows)} stale (already imported, or not asked by this scoring)" in again.err


# ---------------------------------------------------------------------- scoring after the offline flow, with a judge configured


def _offline_flow_with_one_failure(predictions, env, folder, capsys) -> tuple[str, set[str]]:
    """Export/import rounds (no key) until nothing is due, one request failing in every batch until its
    attempts are used up: (its custom_id, the custom_ids answered in the batches)."""
    failing, answered = None, set()
    for number in range(1, 12):
        requests, results = folder / f"requests_{number}.jsonl", folder / f"results_{number}.jsonl"
        with environment(env):
            assert cli_main(["score", str(predictions), "--task", "vr_bench", "--batch-export", str(requests)]) == 0
        keys = [json.loads(line)["custom_id"] for line in requests.read_text().splitlines() if line.strip()]
        if not keys:
            break
        failing = failing or keys[0]
        answer_file(requests, results, sample_responder, faults={failing: "error"})
        answered |= {json.loads(line)["custom_id"] for line in results.read_text().splitlines()} - {failing}
        with environment(env):
            assert cli_main(["score", str(predictions), "--task", "vr_bench", "--batch-import", str(results)]) == 0
    out = capsys.readouterr().out
    assert "1 requests out of attempts: judged failed" in out and "nothing to judge" in out
    return failing, answered


def test_after_the_offline_flow_a_configured_judge_sends_nothing_it_held(sample_dir, sample_env, tmp_path, capsys):
    """The fault audit: after a finished offline batch flow, provider keys in the environment made `score`
    re-send the batch-failed judgment and report a JUDGE OUTAGE (exit 3). The batch's verdicts are used:
    the failed judgment is counted as failed, not sent, and the output says how to retry it."""
    from lmms_video_reasoning.judges import LocalJudgeServer

    env = {**sample_env, **NO_KEY, "LMMS_VR_JUDGE_CACHE": str(tmp_path / "judge.sqlite")}
    predictions = sample_dir / "predictions.jsonl"
    failing, answered = _offline_flow_with_one_failure(predictions, env, tmp_path, capsys)
    # A judge that cannot be reached (a closed port), its key set: nothing is sent, so no outage.
    unreachable = {**env, "LMMS_VR_JUDGE_BASE_URL": "http://127.0.0.1:9/v1", "LMMS_VR_JUDGE_API_KEY": "sk-test"}
    with environment(unreachable):
        status = cli_main(["score", str(predictions), "--task", "vr_bench", "--out", str(tmp_path / "scored.json")])
    out = capsys.readouterr().out
    assert "JUDGE OUTAGE" not in out and status == 0, out
    assert "judgments of the offline batch flow were not sent" in out, out
    assert "2 failed in the batch (attempts used up, or no reply parsed), 0 exported and not answered yet" in out, out
    assert "--judge-online` sends them to the configured judge (sample-oracle at http://127.0.0.1:9/v1)" in out, out
    stats = json.loads((tmp_path / "scored.json").read_text())["lmms_vr"]["judge_accounting"]["vr_bench"]["stats"]
    assert (stats["calls"], stats["not_computed"], stats["batch_failed"], stats["batch_due"]) == (0, 2, 2, 0), stats
    # A reachable judge: still nothing sent (requests counted by the server) ...
    with LocalJudgeServer(responder=sample_responder, model="sample-oracle") as server:
        reachable = {**env, "LMMS_VR_JUDGE_BASE_URL": server.base_url, "LMMS_VR_JUDGE_API_KEY": "sk-test"}
        with environment(reachable):
            assert cli_main(["score", str(predictions), "--task", "vr_bench"]) == 0
        assert server.request_count == 0
        assert "2 judgments of the offline batch flow were not sent" in capsys.readouterr().out
        # ... until asked: --judge-online sends the two failed judgments (re-asks included), nothing answered in a batch.
        cache = ReplyCache(tmp_path / "judge.sqlite")
        cached = {key for key in answered if cache.get(key) is not None}
        with environment(reachable):
            assert cli_main(["score", str(predictions), "--task", "vr_bench", "--judge-online"]) == 0
        sent = [{request_key(b["model"], b["messages"], b["max_tokens"], b.get("temperature"), attempt) for attempt in range(6)}
                for b in server.requests]
        assert sent and not set().union(*sent) & cached, "a request answered in a batch is never re-sent"
        assert failing in set().union(*sent) and len({min(keys) for keys in sent}) == 2, len(sent)
        assert "NOT SENT" not in capsys.readouterr().out
        assert cache.get(failing) is not None, "judged online now, and cached"
        # A later score: the failed line's judgment is served from the cache; the one whose replies never parse
        # (the sample judge's refusal, re-asked online in vain) is held again, nothing is sent.
        with environment(reachable):
            assert cli_main(["score", str(predictions), "--task", "vr_bench"]) == 0
        assert server.request_count == len(sent)
        assert "NOT SENT: 1 judgments of the offline batch flow were not sent: 1 failed" in capsys.readouterr().out


def test_a_request_still_due_in_the_flow_is_not_sent_and_others_are(sample_dir, sample_env, tmp_path, capsys):
    """One round imported with a failed line (due again): `score` with a configured judge sends none of the
    flow's requests and says to export them; a task the flow never exported is judged online as usual."""
    from lmms_video_reasoning.judges import LocalJudgeServer

    env = {**sample_env, **NO_KEY, "LMMS_VR_JUDGE_CACHE": str(tmp_path / "judge.sqlite")}
    predictions = sample_dir / "predictions.jsonl"
    requests, results = tmp_path / "requests.jsonl", tmp_path / "results.jsonl"
    with environment(env):
        assert cli_main(["score", str(predictions), "--task", "vr_bench", "--batch-export", str(requests)]) == 0
    keys = [json.loads(line)["custom_id"] for line in requests.read_text().splitlines()]
    answer_file(requests, results, sample_responder, faults={keys[0]: "error"})
    with environment(env):
        assert cli_main(["score", str(predictions), "--task", "vr_bench", "--batch-import", str(results)]) == 0
    capsys.readouterr()
    with LocalJudgeServer(responder=sample_responder, model="sample-oracle") as server:
        reachable = {**env, "LMMS_VR_JUDGE_BASE_URL": server.base_url, "LMMS_VR_JUDGE_API_KEY": "sk-test"}
        with environment(reachable):
            assert cli_main(["score", str(predictions), "--task", "vr_bench", "--out", str(tmp_path / "scored.json")]) == 0
        out = capsys.readouterr().out
        assert server.request_count == 0, "nothing the batch flow holds is sent"
        stats = json.loads((tmp_path / "scored.json").read_text())["lmms_vr"]["judge_accounting"]["vr_bench"]["stats"]
        due = stats["batch_due"]
        assert due >= 1 and stats["batch_failed"] == 0 and stats["not_computed"] == due, stats
        assert f"NOT SENT: {due} judgments of the offline batch flow were not sent: 0 failed in the batch" in out, out
        assert f"--batch-export FILE` exports the {due} still due" in out
        # The same cache, a task whose requests were never exported: judged online as usual.
        with environment(reachable):
            assert cli_main(["score", str(predictions), "--task", "vcr_cot"]) == 0
        assert server.request_count > 0 and "NOT SENT" not in capsys.readouterr().out
