"""End to end (slow): lmms-eval's chat video models receive the same inputs with and without proxies.

`--model qwen2_5_vl` and `--model qwen3_vl` are lmms-eval's CHAT classes
(`lmms_eval.models.chat.qwen2_5_vl.Qwen2_5_VL`, `...chat.qwen3_vl.Qwen3_VL`): its model registry
prefers a model's chat class unless `--force_simple` is given. Chat models call the task's `doc_to_messages`;
our tasks define none, so lmms-eval builds the user turn from `doc_to_visual` (a video path
becomes `{"type": "video", "url": ...}`) + `doc_to_text`. The model then reads the video with
`qwen_vl_utils.process_vision_info(..., return_video_metadata=True)` and hands the frames and
their metadata (fps, frames_indices, total_num_frames) to its processor. Qwen2.5-VL's processor
turns the metadata into `second_per_grid_ts` (temporal RoPE); Qwen3-VL's writes a `<t seconds>`
timestamp per temporal patch into the prompt, so its `input_ids` witness the frame timing.

Each test runs a tiny offline checkpoint through `python -m lmms_eval` on the sample `vcr_cot`
(6 documents) twice: `LMMS_VR_VIDEO_INPUT=fast` (our prepared inputs) and `=path` (plain video
paths, today's behaviour), and compares what the processor received and built, call by call.
"""

from __future__ import annotations

import numpy as np
import pytest
from lmms_video_reasoning.utils.lmms import model_video as mv, proxy_clips as clips
from processor_probe import METADATA_FIELDS

DOCUMENTS = 6
# The models' own settings, smaller frames than their defaults (min_pixels 200704 would upscale
# the sample's 320x240 videos 2.6x): a downscale as on real footage, 18 s instead of 28 s per
# run, and a check that the prepared inputs follow the model instance's settings. 32 frames (default).
MODEL_SETTINGS = "max_pixels=50176,min_pixels=3136"
# One BLAS/OpenMP thread: on the shared 2-core machine, torch's default thread pool makes each
# tiny matmul wait for busy cores (measured: generation 4.3 s -> 0.3 s per document).
QUIET_CPU = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
# Signs that a model fell back or failed on a video instead of reading it: lmms-eval's own
# messages and qwen_vl_utils' backend fallback.
FAILURE_SIGNS = ("Failed to process video", "Failed to probe video", "use torchvision as default")


def run_with_and_without_proxies(tmp_path, model: str, checkpoint) -> dict[str, dict]:
    """Run `model` on `vcr_cot` (sample, `--limit 6`) once per input mode.

    Returns {"fast" | "path": {"calls": the processor calls (processor_probe), "reads": the video
    paths qwen_vl_utils opened, "proxies": the `*.avi` proxy clips made in the run's own cache
    folder, "log": the CLI's output}}.
    """
    from lmms_cli import run_lmms_eval
    from lmms_video_reasoning.utils.tools.sample import env_for, write_sample
    from processor_probe import processor_calls, processor_probe_env, video_reads

    sample = tmp_path / "sample"
    write_sample(sample, ("vcr_bench",))
    args = f"pretrained={checkpoint},device=cpu,device_map=cpu,{MODEL_SETTINGS}"
    runs = {}
    for mode in ("fast", "path"):
        folder = tmp_path / f"{model}-{mode}"
        env = {**env_for(sample, ("vcr_bench",)), **processor_probe_env(folder / "probe"), **QUIET_CPU,
               mv.INPUT_ENV: mode, clips.CACHE_DIR_ENV: str(folder / "proxies")}
        results = run_lmms_eval("vcr_cot", folder / "out", model=model, model_args=args, env=env,
                                extra=["--limit", str(DOCUMENTS)], log_samples=False)
        runs[mode] = {"calls": processor_calls(folder / "probe"), "reads": video_reads(folder / "probe"),
                      "proxies": sorted((folder / "proxies").glob("*" + clips.PROXY_SUFFIX)), "log": results["_log"]}
    return runs


def assert_same_model_inputs(runs: dict[str, dict], model_class: str, processor: str) -> None:
    """`model_class` called `processor` once per document in both runs, with the same video
    metadata, and it built the same tensors; no video failed or fell back to another reader."""
    fast, path = runs["fast"], runs["path"]
    assert len(fast["calls"]) == len(path["calls"]) == DOCUMENTS, (len(fast["calls"]), len(path["calls"]))
    for n, (a, b) in enumerate(zip(fast["calls"], path["calls"])):
        assert a["processor"] == b["processor"] == processor, n
        assert a["model"] == b["model"] == model_class, (n, a["model"], b["model"])
        assert "pixel_values_videos" in b and b["video_metadata"], f"call {n}: no video reached the processor"
        for key in ("video_grid_thw", "input_ids", "pixel_values_videos", "second_per_grid_ts"):
            assert (key in a) == (key in b), (n, key)
            if key in b:
                assert a[key].shape == b[key].shape and np.array_equal(a[key], b[key]), (n, key)
        for field in METADATA_FIELDS:  # fps, frames_indices, total_num_frames, video_backend
            got = [meta[field] for meta in a["video_metadata"]]
            want = [meta[field] for meta in b["video_metadata"]]
            assert got == want, (n, field, got, want)
    for mode, run in runs.items():
        for sign in FAILURE_SIGNS:
            assert sign not in run["log"], (mode, sign)


def assert_proxies_only_in_fast_mode(runs: dict[str, dict]) -> None:
    """Fast mode made proxies (one per video; documents sharing a video share it) and the model
    read those, once per document; with plain paths none was made and it read the originals."""
    fast, path = runs["fast"], runs["path"]
    assert len(fast["reads"]) == len(path["reads"]) == DOCUMENTS, (fast["reads"], path["reads"])
    assert not path["proxies"], path["proxies"]
    assert not any(read.endswith(clips.PROXY_SUFFIX) for read in path["reads"]), path["reads"]
    assert fast["proxies"], "no proxy was made in fast mode: the chat model was handed the original video path"
    made = {str(proxy) for proxy in fast["proxies"]}
    assert set(fast["reads"]) <= made, f"fast mode: the model read {sorted(set(fast['reads']) - made)}, not the proxies {sorted(made)}"


@pytest.mark.slow
def test_tiny_qwen2_5_vl_chat_receives_the_same_tensors_with_and_without_proxies(tmp_path):
    from tiny_models import build_qwen2_5_vl

    runs = run_with_and_without_proxies(tmp_path, "qwen2_5_vl", build_qwen2_5_vl(tmp_path / "tiny_qwen2_5_vl"))
    assert_same_model_inputs(runs, "lmms_eval.models.chat.qwen2_5_vl.Qwen2_5_VL", "Qwen2_5_VLProcessor")
    # The frame timing is in the temporal RoPE: seconds per temporal patch (2 frames) at the
    # sampled rate, len(frames_indices) / total_num_frames * fps, from the metadata.
    for call in runs["path"]["calls"]:
        [meta] = call["video_metadata"]
        sampled_fps = len(meta["frames_indices"]) / meta["total_num_frames"] * meta["fps"]
        assert np.allclose(call["second_per_grid_ts"], [2 / sampled_fps]), (call["second_per_grid_ts"], meta)
    assert_proxies_only_in_fast_mode(runs)


@pytest.mark.slow
def test_tiny_qwen3_vl_chat_receives_the_same_tensors_with_and_without_proxies(tmp_path):
    from tiny_models import build_qwen3_vl

    runs = run_with_and_without_proxies(tmp_path, "qwen3_vl", build_qwen3_vl(tmp_path / "tiny_qwen3_vl"))
    assert_same_model_inputs(runs, "lmms_eval.models.chat.qwen3_vl.Qwen3_VL", "Qwen3VLProcessor")
    # The frame timing is in the prompt: a `<t seconds>` timestamp per temporal patch (2 frames),
    # the mean time of its frames from the metadata's frame indices and fps.
    import re

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "tiny_qwen3_vl")
    for call in runs["path"]["calls"]:
        [meta] = call["video_metadata"]
        indices, fps = meta["frames_indices"], meta["fps"]
        seconds = [index / fps for index in indices]
        expected = [f"{(seconds[k] + seconds[min(k + 1, len(seconds) - 1)]) / 2:.1f}" for k in range(0, len(seconds), 2)]
        stamps = re.findall(r"<(\d+\.\d) seconds>", tokenizer.decode(call["input_ids"][0]))
        assert stamps == expected and len(stamps) == int(call["video_grid_thw"][0][0]), (stamps, expected)
    assert_proxies_only_in_fast_mode(runs)
