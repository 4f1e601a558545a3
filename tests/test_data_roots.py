"""Data roots, media resolution and the replay predictions file: clear errors, no KeyError."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from lmms_video_reasoning.cg_bench.data import CG_BENCH
from lmms_video_reasoning.utils.core import roots
from lmms_video_reasoning.utils.core.data_errors import require_fields
from lmms_video_reasoning.vcr_bench.data import VCR_BENCH
from lmms_video_reasoning.vrbench.data import VRBENCH
from lmms_video_reasoning.utils.lmms.replay_model import PredictionsError, load_predictions, lookup


def test_env_root_wins(tmp_path, monkeypatch):
    monkeypatch.setenv("VCR_BENCH_ROOT", str(tmp_path))
    assert roots.data_root(VCR_BENCH) == tmp_path


def test_env_root_that_is_not_a_directory_names_the_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("CGBENCH_ROOT", str(tmp_path / "nope"))
    with pytest.raises(roots.DataError, match="CGBENCH_ROOT=.*not a directory.*lmms-vr prepare cg_bench"):
        roots.data_root(CG_BENCH)


def test_default_root_is_under_the_cache(tmp_path, monkeypatch):
    monkeypatch.delenv("VRBENCH_ROOT", raising=False)
    monkeypatch.setenv("LMMS_VR_CACHE", str(tmp_path))
    assert roots.data_root(VRBENCH) == tmp_path / "data" / "vrbench"


def test_missing_annotation_under_a_local_root_is_explained(tmp_path, monkeypatch):
    monkeypatch.setenv("VRBENCH_ROOT", str(tmp_path))
    with pytest.raises(roots.DataError, match="VRBench_eval.jsonl not found under VRBENCH_ROOT"):
        roots.annotation_file(VRBENCH, "VRBench_eval.jsonl")


def test_hub_failure_is_explained_offline(tmp_path):
    # No network here: the real huggingface_hub call fails; the error must say what to do.
    # (A subprocess, because huggingface_hub reads HF_HUB_OFFLINE when first imported.)
    code = ("from lmms_video_reasoning.utils.core import roots\nfrom lmms_video_reasoning.vcr_bench.data import VCR_BENCH\n"
            "try:\n    roots.annotation_file(VCR_BENCH, 'v1/videos/meta_info_video.json')\n"
            "except roots.DataError as exc:\n    print(exc)\n")
    env = {**os.environ, "LMMS_VR_CACHE": str(tmp_path), "HF_HUB_OFFLINE": "1"}
    env.pop("VCR_BENCH_ROOT", None)
    message = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True).stdout
    assert "VLM-Reasoning/VCR-Bench" in message and "VCR_BENCH_ROOT" in message and "lmms-vr prepare" in message


def test_media_errors_name_file_variable_and_command(tmp_path, monkeypatch):
    monkeypatch.setenv("CGBENCH_ROOT", str(tmp_path))
    with pytest.raises(roots.MediaError, match=r"cg_videos_720p/x\.mp4 not found under .*CGBENCH_ROOT.*lmms-vr prepare cg_bench"):
        roots.require_media(CG_BENCH, tmp_path / "cg_videos_720p/x.mp4", "video cg_videos_720p/x.mp4")
    (tmp_path / "empty.mp4").write_bytes(b"")
    with pytest.raises(roots.MediaError, match="empty"):
        roots.require_media(CG_BENCH, tmp_path / "empty.mp4", "video empty.mp4")


def test_read_json_errors_name_the_file(tmp_path):
    bad = tmp_path / "a.json"
    bad.write_text("[{]")
    with pytest.raises(roots.DataError, match=r"a\.json is not valid JSON \(line 1"):
        roots.read_json(bad)
    lines = tmp_path / "b.jsonl"
    lines.write_text('{"a": 1}\n\n{"a": 2}\n')
    assert roots.read_json(lines) == [{"a": 1}, {"a": 2}]


@pytest.mark.parametrize("reader", ["read_json", "read_jsonl"])
def test_jsonl_errors_name_the_line_counting_blank_lines(tmp_path, reader):
    """Line numbers are 1-based and count blank lines; a raw U+2028 inside a string (valid JSON)
    and a lone carriage return between tokens neither split a record nor shift the numbering."""
    path = tmp_path / "a.jsonl"
    path.write_text('{"a": "x\u2028y"}\n\n{"a":\r2}\n\n\n{"a": 3\n{"a": 4}\n', encoding="utf-8")
    with pytest.raises(roots.DataError, match=r"a\.jsonl:6: not valid JSON"):
        getattr(roots, reader)(path)
    path.write_text('{"a": "x\u2028y"}\n\n{"a":\r2}\n', encoding="utf-8")
    assert getattr(roots, reader)(path) == [{"a": "x\u2028y"}, {"a": 2}]


def test_require_fields_names_the_record():
    with pytest.raises(roots.DataError, match="record qid=7: missing field\\(s\\) answer"):
        require_fields({"qid": 7}, ["qid", "answer"], "record qid=7")
    with pytest.raises(roots.DataError, match="expected a JSON object"):
        require_fields(["x"], ["qid"], "record 3")


def test_predictions_file(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"id": 3, "response": "A"}) + "\n"
                    + json.dumps({"task": "cg_bench_mcq", "id": "3:long", "response": "B"}) + "\n"
                    + json.dumps({"task": "vcr_cot", "id": 3, "response": "C"}) + "\n")
    table = load_predictions(path)
    assert lookup(table, "cg_bench_mcq", "3:long") == "B"
    assert lookup(table, "vcr_cot", "3") == "C"  # task-specific line wins
    assert lookup(table, "vr_bench", "3") == "A"  # task-less line serves any task
    assert lookup(table, "vr_bench", "4") is None


@pytest.mark.parametrize("content, message", [
    ("{not json}\n", r"p\.jsonl:1: not valid JSON"),
    ('{"id": 1}\n', r"p\.jsonl: record 1: expected"),
    ('{"id": 1, "response": 5}\n', r"response must be a string"),
])
def test_bad_predictions_files(tmp_path, content, message):
    path = tmp_path / "p.jsonl"
    path.write_text(content)
    with pytest.raises(PredictionsError, match=message):
        load_predictions(path)
    with pytest.raises(PredictionsError, match="not found"):
        load_predictions(tmp_path / "missing.jsonl")


def test_usable_video_rejects_undecodable_files(tmp_path, monkeypatch):
    from lmms_video_reasoning.utils.media.synthetic import write_video

    monkeypatch.setenv("VCR_BENCH_ROOT", str(tmp_path))
    good = write_video(tmp_path / "good.mp4", duration=2.0)
    assert roots.usable_video(VCR_BENCH, tmp_path / "good.mp4") == good
    (tmp_path / "half.mp4").write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    (tmp_path / "junk.mp4").write_bytes(b"\x00garbage" * 500)
    for name in ("half.mp4", "junk.mp4"):
        with pytest.raises(roots.MediaError, match=rf"{name} is unusable: .*lmms-vr prepare vcr_bench"):
            roots.usable_video(VCR_BENCH, tmp_path / name)
    with pytest.raises(roots.MediaError, match="not found"):
        roots.require_media(VCR_BENCH, tmp_path / "absent.mp4", "video absent.mp4")
    assert roots.video_problem(tmp_path / "absent.mp4") == "it does not exist"


def test_lone_surrogates_in_predictions_become_replacement_characters(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text('{"id": 1, "response": "bad \\udcff byte"}\n{"id": 2, "response": "ok \\ud83d\\ude00"}\n')
    table = load_predictions(path)
    assert lookup(table, "t", "1") == "bad \ufffd byte"
    assert lookup(table, "t", "2") == "ok \U0001F600"  # a proper pair is kept
    for text in table.values():
        text.encode("utf-8")  # everything is now writable by lmms-eval's sample logger


@pytest.mark.parametrize("hub", ["offline", "unreachable"])
def test_lmms_eval_with_no_root_and_no_hub_fails_at_once_with_one_message(tmp_path, hub):
    """No root and no Hub: lmms-eval's task loading ends at once with one message naming the
    variable and the `prepare` command (not 74 s of retries and a RetryError traceback)."""
    import time

    env = {k: v for k, v in os.environ.items() if not k.endswith("_ROOT") and not k.startswith("HF_")}
    env.update(LMMS_VR_CACHE=str(tmp_path / "cache"), HF_HOME=str(tmp_path / "hf"),
               **({"HF_HUB_OFFLINE": "1"} if hub == "offline" else {"HF_ENDPOINT": "http://127.0.0.1:9"}))
    predictions = tmp_path / "predictions.jsonl"
    predictions.write_text('{"task": "vcr_cot", "id": "x", "response": "A"}\n')
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "lmms_eval", "--tasks", "vcr_cot", "--model", "vr_replay",
                           "--model_args", f"predictions={predictions}", "--output_path", str(tmp_path / "out")],
                          env=env, capture_output=True, text=True, timeout=600)
    elapsed = time.monotonic() - started
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    assert "RetryError" not in out and "Traceback" not in out, out[-3000:]
    [message] = [line for line in out.splitlines() if line.startswith("lmms-video-reasoning: cannot start: ")]
    assert "VCR_BENCH_ROOT is not set" in message and "lmms-vr prepare vcr_bench" in message, message
    assert ("HF_HUB_OFFLINE=1 is set" if hub == "offline" else "127.0.0.1:9) is unreachable") in message
    # One attempt is what the message and the absence of RetryError show; the time is printed, and
    # bounded only against a hang (a loaded machine stretches lmms-eval's start-up).
    print(f"no root, Hub {hub}: refused after {elapsed:.0f} s")
    assert elapsed < 300, elapsed
