"""One document's video input, as lmms-eval's models consume it: today's path vs proxy clips.

Not a test. On the long files of ``benchmarks/frame_sampling.py`` (a 20-minute 1280x720
GOP-250 file and a 5-minute 1280x720 textured file with B-frames; generated once, cached)
and three short clips made here (2 s 30 fps 320x240, 5 s 29.97 fps 1280x720 with B-frames,
15.5 s 23.976 fps 480x270: fewer frames than the model's budget), each case runs in a fresh
process (peak memory = growth of the resident high-water mark during the call, after a
warm-up call on a tiny video so imports and codec set-up are not counted).

Every case runs lmms-eval's own code: the model class itself (``Qwen2_VL`` of
``lmms_eval.models.simple.qwen2_vl`` with its defaults; the chat ``Qwen2_5_VL`` with its
defaults) built from a tiny offline checkpoint (``tests/tiny_models.py``: tokenizer, chat
template, processor), its real ``generate_until`` on one request whose ``doc_to_visual`` is our
hook (``utils.model_video.video_for_model``), up to its processor call, where
``ProcessorInputs`` records the ``videos`` and ``video_metadata`` the model's code built and
ends the call (no forward pass):

- ``today``: ``LMMS_VR_VIDEO_INPUT=path``: the model reads the original video path (qwen2_vl:
  decord probe, ``process_vision_info`` at 2 fps up to 768 frames, resized, then its
  ``unique(linspace(...))`` of those; chat: decord probe, ``nframes``, with metadata).
- ``ours``: ``LMMS_VR_VIDEO_INPUT=fast``: the hook makes the proxy (cold cache) and the model
  reads it. Measured twice in one process: ``cold`` (first question on a video: the proxy is
  made) and ``warm`` (a later question on the same video: the proxy is read from the cache).
  ``per_document`` mixes them with the papers' questions per video (CG-Bench 12,129 questions
  on 1,219 videos, arXiv 2412.12075; VCR-Bench 1,034 on 859, arXiv 2504.07956).
- ``frames identical`` (every row): the frames handed to the processor have the same shape and
  a maximum pixel difference of 0, and the video metadata is equal.
- ``floor``: only decoding qwen2_vl's frames with ``utils.media.frame_decoder.read_frames`` (cold), the
  least any exact method must do; ``today_s / floor_s`` is the largest speed-up exact frames allow.

``--json`` prints ``speedup_vs_model_path`` (long files), ``speedup_short_clips``,
``peak_memory_mb``, ``frames_identical``, the package versions and per-case rows.

WARNING: ``qwen2_vl`` / ``today`` peaks near 17 GB on the 20-minute file (it was killed for lack
of memory at 24 GB resident on the 23 GB development machine in the issue-23 run):
``--today-files`` limits lmms-eval's own path to some files.

    python benchmarks/model_inputs.py [--json] [--skip-today] [--files ...] [--today-files ...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import frame_sampling as fs  # noqa: E402 - the generated benchmark videos

from lmms_video_reasoning.utils.lmms import model_video as mv  # noqa: E402
from lmms_video_reasoning.utils.lmms import model_readings as readings, proxy_clips as clips  # noqa: E402
from lmms_video_reasoning.utils.media import synthetic as syn  # noqa: E402

FILES = ("long_720p_gop250", "textured_720p_bframes")
# Short clips (generated here): the frame count is below the model's budget, the cases a fixed
# 32-frame copy of qwen2_vl's selection got wrong (2 s -> 4 frames, 5 s -> 10, 15.5 s -> 30).
CLIPS = {
    "clip_2s_30fps_320x240": {"duration": 2, "fps": 30, "width": 320, "height": 240},
    "clip_5s_ntsc_1280x720": {"duration": 5, "fps": 30000 / 1001, "width": 1280, "height": 720, "bframes": 3},
    "clip_15.5s_23.976fps_480x270": {"duration": 15.5, "fps": 24000 / 1001, "width": 480, "height": 270},
}
CHAT = {"max_pixels": 1605632, "min_pixels": 256 * 28 * 28, "max_num_frames": 32}  # qwen2_5_vl chat defaults
# consumer -> lmms-eval class, tiny checkpoint family, constructor settings (qwen2_vl: its defaults)
MODELS = {"qwen2_vl": ("lmms_eval.models.simple.qwen2_vl.Qwen2_VL", "qwen2_vl", {}),
          "chat": ("lmms_eval.models.chat.qwen2_5_vl.Qwen2_5_VL", "qwen2_5_vl", CHAT)}
QWEN2_VL = readings.Reading("qwen2_vl", 32, 602112, 3136)  # qwen2_vl's defaults, for the decode floor only
GOALS = {"speedup_vs_model_path": 20.0, "peak_memory_mb": 1024.0}
QUESTIONS_PER_VIDEO = {"cg_bench": 12129 / 1219, "vcr_bench": 1034 / 859}  # the papers' totals (see docstring)
TESTS = Path(__file__).resolve().parents[1] / "tests"  # tiny_models.py: offline checkpoints


# ----------------------------------------------------------------------------- lmms-eval's own path (worker)


class ProcessorReached(Exception):
    """Raised by ``ProcessorInputs`` to end ``generate_until`` at its processor call (no forward pass)."""


class ProcessorInputs:
    """A model's processor, wrapped: each call's ``videos`` and ``video_metadata`` (what the
    model's own code built) are recorded; then the call stops ``generate_until``
    (``stop=True``) or returns a one-token batch for a stub forward pass."""

    def __init__(self, processor, stop: bool = True):
        self.processor, self.stop, self.calls = processor, stop, []

    def __getattr__(self, name):  # apply_chat_template, batch_decode, ...: the real processor's
        return getattr(self.processor, name)

    def __call__(self, *args, **kwargs):
        import torch
        from transformers import BatchFeature

        self.calls.append({"videos": kwargs.get("videos"), "video_metadata": kwargs.get("video_metadata"), "at": time.perf_counter()})
        if self.stop:
            raise ProcessorReached
        return BatchFeature({"input_ids": torch.tensor([[0]])})


def lmms_model(consumer: str, checkpoints: Path, stop: bool = True):
    """lmms-eval's own class for ``consumer``, built from a tiny offline checkpoint (tokenizer,
    chat template, processor; its forward pass never runs), its processor wrapped."""
    import importlib

    sys.path.insert(0, str(TESTS))
    from tiny_models import BUILDERS

    dotted, family, settings = MODELS[consumer]
    checkpoint = checkpoints / f"tiny_{family}"
    if not (checkpoint / "TINY_MODEL.json").exists():
        BUILDERS[family](checkpoint)
    module, _, name = dotted.rpartition(".")
    model = getattr(importlib.import_module(module), name)(pretrained=str(checkpoint), device="cpu", device_map="cpu", **settings)
    model.processor = ProcessorInputs(model.processor, stop=stop)
    return model


def doc_to_visual(doc):  # a task hook as ours are: the path, or the proxy of the calling model's frames
    return [mv.video_for_model(doc["video"])]


def doc_to_messages(doc):  # lmms-eval's default for chat models around doc_to_visual
    from lmms_eval.api.task import ConfigurableMessagesTask

    return ConfigurableMessagesTask._build_user_turn(doc_to_visual(doc), "Describe the video.")


def requests_for(model, videos: list[str]) -> list:
    """One ``generate_until`` request per video, as lmms-eval builds them for ``model``."""
    from lmms_eval.api.instance import Instance

    model.task_dict = {"bench": {"test": [{"video": str(v)} for v in videos]}}
    chat = not getattr(model, "is_simple", True)
    return [Instance("generate_until", ("ctx", doc_to_messages, {}, n, "bench", "test") if chat else ("ctx", {}, doc_to_visual, n, "bench", "test"),
                     idx=0, metadata={"task": "bench", "doc_id": n, "repeats": 1}) for n in range(len(videos))]


def model_reads(model, path: str, mode: str) -> tuple[np.ndarray, dict]:
    """lmms-eval's ``generate_until`` on one document whose video is ``path``, with
    ``LMMS_VR_VIDEO_INPUT=mode`` (``path``: today; ``fast``: our proxy), up to its processor
    call: the frames (uint8) and the video metadata it hands the processor."""
    import torch

    os.environ[mv.INPUT_ENV] = mode
    model.processor.calls.clear()
    try:
        model.generate_until(requests_for(model, [path]))
    except ProcessorReached:
        pass
    [call] = model.processor.calls
    video = call["videos"][0]
    frames = video.to(torch.uint8)
    if not torch.equal(frames.to(video.dtype), video):  # fetch_video resizes uint8 frames: whole values
        raise AssertionError(f"{path}: the frames handed to the processor are not whole 0..255 values")
    meta = (call["video_metadata"] or [None])[0]
    metadata = None if meta is None else {"indices": [int(i) for i in meta["frames_indices"]], "fps": float(meta["fps"]),
                                          "total_num_frames": int(meta["total_num_frames"])}
    return frames.numpy(), {"metadata": metadata}


def decode_floor(path: str) -> np.ndarray:
    """Only the decode of the frames qwen2_vl ends with (our sampler, cold): what any exact method must do."""
    from lmms_video_reasoning.utils.media import frame_decoder, frame_table

    info = frame_table.probe(path)
    chosen = readings.model_frames(QWEN2_VL, info.total_frames, info.fps, info.width, info.height)
    return frame_decoder.read_frames(path, sorted(set(chosen.indices)), as_array=True)


def _ours(model, path: str, cache: str) -> tuple[np.ndarray, dict]:
    """Cold (the hook makes the proxy, the model reads it) then warm (a later question on the
    same video: the proxy is found in the cache folder)."""
    os.environ[clips.CACHE_DIR_ENV] = cache
    start = time.perf_counter()
    frames, extra = model_reads(model, path, "fast")
    cold = time.perf_counter() - start
    start = time.perf_counter()
    model_reads(model, path, "fast")
    warm = time.perf_counter() - start
    proxies = list(Path(cache).glob("*" + clips.PROXY_SUFFIX))
    return frames, {**extra, "time": cold, "warm_s": warm, "proxy_mb": sum(p.stat().st_size for p in proxies) / 2**20}


def run_case(case: str, path: str, cache: str, model) -> tuple[np.ndarray, dict]:
    consumer, method = case.split(":")
    if method == "today":
        return model_reads(model, path, "path")
    if method == "ours":
        return _ours(model, path, cache)
    if case == "qwen2_vl:floor":
        return decode_floor(path), {}
    raise ValueError(case)


def worker(case: str, path: str, out: str, warmup: str, cache: str) -> None:
    from lmms_video_reasoning.utils.media import frame_table

    consumer, method = case.split(":")
    model = lmms_model(consumer, Path(warmup).parent / "checkpoints") if method != "floor" else None
    with tempfile.TemporaryDirectory() as warm_cache:
        run_case(case, warmup, warm_cache, model)  # imports, codec tables, torch kernels
    frame_table._TABLE_CACHE.clear()
    (frames, extra), elapsed, peak = fs.measured(lambda: run_case(case, path, cache, model))
    np.save(out, frames)
    print(json.dumps({"time": elapsed, "peak_growth_mb": peak, **extra}))  # ours: "time" = the cold question


def run_worker(case: str, path: Path, out: Path, warmup: Path, cache: Path) -> dict:
    cmd = [sys.executable, __file__, "--worker", case, str(path), str(out), str(warmup), str(cache)]
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{case} on {path} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


# ----------------------------------------------------------------------------- simulated run


# ----------------------------------------------------------------------------- driver


def check_frames(ours: dict, today: dict) -> dict:
    """Identical = same shape, max pixel difference 0, same video metadata (chat: fps, frame
    indices, frame count; qwen2_vl passes none)."""
    frames, reference = ours["frames"], today["frames"]
    same_shape = frames.shape == reference.shape
    diff = np.abs(frames.astype(np.int16) - reference.astype(np.int16)) if same_shape and frames.size else None
    max_diff = (int(diff.max()) if diff is not None else 0) if same_shape else None
    same_metadata = ours["metadata"] == today["metadata"]
    return {"shape_ok": same_shape, "frames": int(frames.shape[0]), "max_abs_diff": max_diff, "metadata_identical": same_metadata,
            "identical": same_shape and max_diff == 0 and same_metadata}


def generate_clips(cache_dir: Path, names: list[str]) -> dict[str, Path]:
    return {name: syn.write_video(cache_dir / f"{name}.mp4", textured=True, stamp_index=True, **CLIPS[name]) for name in names}


def benchmark(cache_dir: Path, skip_today: bool, files: tuple[str, ...] = FILES + tuple(CLIPS),
              today_files: tuple[str, ...] | None = None) -> dict:
    """``today_files``: the files lmms-eval's own path runs on (None: all of ``files``)."""
    long_files = [name for name in files if name in FILES]
    paths = {**fs.generate(cache_dir, long_files), **generate_clips(cache_dir, [name for name in files if name in CLIPS])}
    warmup = syn.write_video(cache_dir / "warmup_model_inputs.mp4", 4, fps=10, width=64, height=48)
    rows = []
    with tempfile.TemporaryDirectory(prefix="model_inputs_", dir=cache_dir) as tmpdir:
        tmp = Path(tmpdir)
        for name in files:
            floor = None
            for consumer in MODELS:
                outcome = {}
                methods = ("ours", "today", "floor") if consumer == "qwen2_vl" else ("ours", "today")
                for method in methods:
                    if method == "today" and (skip_today or (today_files is not None and name not in today_files)):
                        continue
                    case = f"{consumer}:{method}"
                    print(f"{name}: {case} ...", file=sys.stderr, flush=True)
                    out = tmp / f"{name}-{consumer}-{method}.npy"
                    outcome[method] = {**run_worker(case, paths[name], out, warmup, tmp / f"cache-{name}-{consumer}"),
                                       "frames": np.load(out)}
                ours = outcome["ours"]
                floor = outcome.get("floor", {}).get("time", floor)
                row = {"file": name, "short_clip": name in CLIPS, "consumer": consumer, "ours_s": ours["time"],
                       "ours_warm_s": ours["warm_s"], "ours_peak_mb": ours["peak_growth_mb"], "proxy_mb": ours["proxy_mb"],
                       "decode_floor_s": floor}
                if "today" in outcome:
                    today = outcome["today"]
                    row.update(today_s=today["time"], today_peak_mb=today["peak_growth_mb"], speedup=today["time"] / ours["time"],
                               speedup_warm=today["time"] / ours["warm_s"],
                               speedup_ceiling=today["time"] / floor if floor else None,
                               check=check_frames(ours, today))
                    row["speedup_per_document"] = {
                        bench: today["time"] / ((ours["time"] + (q - 1) * ours["warm_s"]) / q) for bench, q in QUESTIONS_PER_VIDEO.items()
                    }
                if consumer == "qwen2_vl":
                    from lmms_video_reasoning.utils.media import frame_table

                    info = frame_table.probe(paths[name])
                    row["composed_indices"] = list(readings.model_frames(QWEN2_VL, info.total_frames, info.fps, info.width, info.height).indices)
                rows.append(row)
    qwen_rows = [r for r in rows if r["consumer"] == "qwen2_vl" and not r["short_clip"]]
    chat_rows = [r for r in rows if r["consumer"] == "chat" and not r["short_clip"]]

    def lowest(selected, key):
        return min((r[key] for r in selected if r.get(key) is not None), default=None)

    summary = {
        "speedup_vs_model_path": lowest(qwen_rows, "speedup"),
        "speedup_vs_model_path_warm": lowest(qwen_rows, "speedup_warm"),
        "speedup_vs_model_path_per_document": {
            bench: min((r["speedup_per_document"][bench] for r in qwen_rows if "speedup_per_document" in r), default=None)
            for bench in QUESTIONS_PER_VIDEO},
        "speedup_ceiling_exact_decode": lowest(qwen_rows, "speedup_ceiling"),
        "speedup_vs_model_path_chat": lowest(chat_rows, "speedup"),
        "speedup_vs_model_path_chat_warm": lowest(chat_rows, "speedup_warm"),
        "speedup_short_clips": {consumer: lowest([r for r in rows if r["short_clip"] and r["consumer"] == consumer], "speedup")
                                for consumer in MODELS},
        "peak_memory_mb": max(r["ours_peak_mb"] for r in rows),
        "frames_identical": all(r["check"]["identical"] for r in rows if "check" in r) if any("check" in r for r in rows) else None,
        "frames_compared_on": sorted({r["file"] for r in rows if "check" in r}),
        "goals": GOALS, "machine": fs.machine(), "load_average_at_end": os.getloadavg(), "rows": rows,
        "versions": {name: _version(name) for name in ("lmms-eval", "qwen-vl-utils", "transformers", "decord", "av", "torch")},
    }
    return summary


def _version(name: str) -> str:
    from importlib import metadata

    return metadata.version(name)


def print_table(summary: dict) -> None:
    nan = float("nan")
    print(f"{'file':30} {'consumer':9} {'today s':>8} {'cold s':>7} {'x':>6} {'warm s':>7} {'x':>6} {'floor s':>8} "
          f"{'today MB':>9} {'ours MB':>8} {'frames':>7}")
    for r in summary["rows"]:
        check = r.get("check", {})
        print(f"{r['file']:30} {r['consumer']:9} {r.get('today_s', nan):>8.2f} {r['ours_s']:>7.2f} {r.get('speedup', nan):>5.1f}x "
              f"{r['ours_warm_s']:>7.2f} {r.get('speedup_warm', nan):>5.1f}x {r.get('decode_floor_s') or nan:>8.2f} "
              f"{r.get('today_peak_mb', nan):>9.0f} {r['ours_peak_mb']:>8.0f} "
              f"{('same' if check.get('identical') else 'DIFF') if check else '-':>7}")
    print(f"speedup_vs_model_path (qwen2_vl, min): cold {summary['speedup_vs_model_path']}, warm {summary['speedup_vs_model_path_warm']}, "
          f"per document {summary['speedup_vs_model_path_per_document']}, exact-decode ceiling {summary['speedup_ceiling_exact_decode']}; "
          f"chat: cold {summary['speedup_vs_model_path_chat']}, warm {summary['speedup_vs_model_path_chat_warm']}; "
          f"short clips (cold): {summary['speedup_short_clips']}")
    print(f"peak_memory_mb {summary['peak_memory_mb']:.0f}, frames_identical {summary['frames_identical']}\n{summary['machine']}\n"
          f"{summary['versions']}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--worker":
        worker(*argv[1:6])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument("--cache-dir", type=Path, default=fs.DEFAULT_CACHE, help="where generated videos are kept")
    parser.add_argument("--skip-today", action="store_true", help="skip lmms-eval's own paths (17 GB on the long file)")
    parser.add_argument("--files", nargs="+", choices=FILES + tuple(CLIPS), default=list(FILES + tuple(CLIPS)),
                        help="subset of files")
    parser.add_argument("--today-files", nargs="+", choices=FILES + tuple(CLIPS), default=None,
                        help="run lmms-eval's own path only on these (it needs over 16 GB on the 20-minute file)")
    args = parser.parse_args(argv)
    summary = benchmark(args.cache_dir, args.skip_today, tuple(args.files),
                        None if args.today_files is None else tuple(args.today_files))
    if args.json:
        print(json.dumps(summary, indent=1, default=str))
    else:
        print_table(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
