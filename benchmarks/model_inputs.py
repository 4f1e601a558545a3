"""One document's video input, as lmms-eval's models consume it: today's path vs proxy clips.

Not a test. On the long files of ``benchmarks/frame_sampling.py`` (a 20-minute 1280x720
GOP-250 file and a 5-minute 1280x720 textured file with B-frames; generated once, cached),
each case runs in a fresh process (peak memory = growth of the resident high-water mark
during the call, after a warm-up call on a tiny video so imports and codec set-up are not
counted):

- ``qwen2_vl`` / ``today``: what lmms-eval's ``qwen2_vl`` does with a video path: decord
  probe of the first frame, ``qwen_vl_utils.process_vision_info`` (2 fps, up to 768 frames,
  resized), then ``linspace(0, n-1, 32, dtype=int)`` of those.
- ``qwen2_vl`` / ``ours``: ``utils.model_video.prepare`` (composed indices from the container,
  our sampler, the same resize, a lossless proxy clip; cold cache) and then the model's same
  code on the proxy path. Frames compared with ``today``: the stamped indices and the pixels.
- ``chat`` / ``today``: the chat ``qwen2_5_vl`` path (decord probe, ``nframes = 32``,
  ``process_vision_info`` reads only those, with ``video_metadata``); ``chat`` / ``ours``: the
  timed proxy (``prepare`` with the chat reading) and the same code on it. Frames and metadata
  (fps, frame indices, frame count) compared with ``today``.
- ``ours`` is measured twice in one process: ``cold`` (first question on a video: the proxy is
  made) and ``warm`` (a later question on the same video: the proxy is read from the cache).
  ``per_document`` mixes them with the papers' questions per video (CG-Bench 12,129 questions
  on 1,219 videos, arXiv 2412.12075; VCR-Bench 1,034 on 859, arXiv 2504.07956).
- ``floor``: only decoding the model's frames with ``utils.video.read_frames`` (cold), the
  least any exact method must do; ``today_s / floor_s`` is the largest speed-up exact frames allow.

Then a simulated run of 20 documents (hard links of the two files, so every document is a
new video) through a stub model that is lmms-eval's ``qwen2_vl`` class with its forward pass
replaced by a 2 s sleep (the GPU), calling the task hook as lmms-eval does: wall time with
and without decode-ahead. ``--json`` prints ``speedup_vs_model_path``, ``peak_memory_mb``,
``frames_identical``, ``overlap_efficiency`` and per-case rows.

WARNING: ``qwen2_vl`` / ``today`` peaks near 17 GB on the 20-minute file.

    python benchmarks/model_inputs.py [--json] [--docs 20] [--model-seconds 2] [--skip-today]
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

from lmms_video_reasoning.utils import model_video as mv  # noqa: E402
from lmms_video_reasoning.utils import synthetic as syn  # noqa: E402

FILES = ("long_720p_gop250", "textured_720p_bframes")
QWEN2_VL = mv.Reading("qwen2_vl", 32, 602112, 3136)  # lmms-eval qwen2_vl defaults
CHAT = {"max_pixels": 1605632, "min_pixels": 256 * 28 * 28, "max_num_frames": 32}  # qwen2_5_vl chat defaults
GOALS = {"speedup_vs_model_path": 20.0, "peak_memory_mb": 1024.0, "overlap_ratio": 1.15}
PIXEL_TOLERANCE = 1.0  # mean absolute difference allowed (codec tolerance); the proxy is lossless
CHAT_READING = mv.Reading("qwen2_5_vl_chat", CHAT["max_num_frames"], CHAT["max_pixels"], CHAT["min_pixels"])
QUESTIONS_PER_VIDEO = {"cg_bench": 12129 / 1219, "vcr_bench": 1034 / 859}  # the papers' totals (see docstring)


# ----------------------------------------------------------------------------- cases (worker)


def qwen2_vl_reads(path: str) -> np.ndarray:
    """lmms-eval qwen2_vl.generate_until on one video path, up to the tensor it gives its processor."""
    import decord
    from qwen_vl_utils import process_vision_info

    vr = decord.VideoReader(path)
    vr[0].asnumpy()  # the model's probe of the first frame
    del vr
    messages = [{"role": "user", "content": [{"type": "video", "video": path, "max_pixels": QWEN2_VL.max_pixels,
                                              "min_pixels": QWEN2_VL.min_pixels}]}]
    video = process_vision_info(messages)[1][0]
    keep = np.linspace(0, video.shape[0] - 1, QWEN2_VL.max_frames, dtype=int)
    return video[keep].to(dtype=__import__("torch").uint8).numpy()


def chat_reads(path: str) -> tuple[np.ndarray, dict]:
    """lmms-eval chat qwen2_5_vl on one video path: probe, nframes, process_vision_info (metadata kept)."""
    import decord
    from qwen_vl_utils import process_vision_info

    nframes = max(2, min(CHAT["max_num_frames"], len(decord.VideoReader(path))) // 2 * 2)
    messages = [{"role": "user", "content": [{"type": "video", "video": path, "nframes": nframes,
                                              "max_pixels": CHAT["max_pixels"], "min_pixels": CHAT["min_pixels"]}]}]
    video, meta = process_vision_info(messages, return_video_metadata=True)[1][0]
    metadata = {"indices": [int(i) for i in meta["frames_indices"]], "fps": float(meta["fps"]),
                "total_num_frames": int(meta["total_num_frames"])}
    return video.to(dtype=__import__("torch").uint8).numpy(), metadata


def decode_floor(path: str) -> np.ndarray:
    """Only the decode of the frames qwen2_vl ends with (our sampler, cold): what any exact method must do."""
    from lmms_video_reasoning.utils import video

    info = video.probe(path)
    chosen = mv.model_frames(QWEN2_VL, info.total_frames, info.fps, info.width, info.height)
    return video.read_frames(path, sorted(set(chosen.indices)), as_array=True)


def _ours(path: str, cache: str, reading: mv.Reading, reads) -> tuple[np.ndarray, dict]:
    """Cold (the proxy is made) then warm (a later question on the same video: a cache hit), each
    followed by the model's own read of the proxy."""
    os.environ[mv.CACHE_DIR_ENV] = cache
    start = time.perf_counter()
    proxy = mv.prepare(path, mv.Request(reading))
    prepared = time.perf_counter() - start
    frames, extra = reads(proxy)
    cold = time.perf_counter() - start
    mv._done.clear()  # a later question: the proxy is found in the cache folder
    start = time.perf_counter()
    reads(mv.prepare(path, mv.Request(reading)))
    warm = time.perf_counter() - start
    return frames, {**extra, "time": cold, "warm_s": warm, "prepare_s": prepared, "proxy_mb": os.path.getsize(proxy) / 2**20}


def run_case(case: str, path: str, cache: str) -> tuple[np.ndarray, dict]:
    if case == "qwen2_vl:today":
        return qwen2_vl_reads(path), {}
    if case == "qwen2_vl:ours":
        return _ours(path, cache, QWEN2_VL, lambda proxy: (qwen2_vl_reads(proxy), {}))
    if case == "chat:today":
        return chat_reads(path)
    if case == "chat:ours":
        return _ours(path, cache, CHAT_READING, chat_reads)
    if case == "qwen2_vl:floor":
        return decode_floor(path), {}
    raise ValueError(case)


def worker(case: str, path: str, out: str, warmup: str, cache: str) -> None:
    from lmms_video_reasoning.utils import video

    with tempfile.TemporaryDirectory() as warm_cache:
        run_case(case, warmup, warm_cache)  # imports, codec tables, torch kernels
    video._TABLE_CACHE.clear()
    mv._done.clear()
    Path("/proc/self/clear_refs").write_text("5")
    baseline = fs._status_mb("VmRSS")
    start = time.perf_counter()
    frames, extra = run_case(case, path, cache)
    elapsed = time.perf_counter() - start
    peak = fs._status_mb("VmHWM") - baseline
    np.save(out, frames)
    print(json.dumps({"time": elapsed, "peak_growth_mb": peak, **extra}))  # ours: "time" = the cold question


def run_worker(case: str, path: Path, out: Path, warmup: Path, cache: Path) -> dict:
    cmd = [sys.executable, __file__, "--worker", case, str(path), str(out), str(warmup), str(cache)]
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{case} on {path} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


# ----------------------------------------------------------------------------- simulated run


def simulated_run(paths: list[Path], docs: int, model_seconds: float, ahead: int, cache: Path) -> dict:
    """``docs`` documents through a stub of lmms-eval's qwen2_vl (its class; forward = sleep)."""
    from lmms_eval.api.instance import Instance
    from lmms_eval.models.simple.qwen2_vl import Qwen2_VL
    from lmms_eval.utils import Collator

    from lmms_video_reasoning.utils import video

    cache.parent.mkdir(parents=True, exist_ok=True)
    os.environ[mv.CACHE_DIR_ENV] = str(cache)
    os.environ[mv.DECODE_AHEAD_ENV] = str(ahead)
    mv._ahead = None
    mv._done.clear()
    video._TABLE_CACHE.clear()
    links = []
    for n in range(docs):  # a distinct file per document: nothing is shared between documents
        link = cache.parent / f"doc{ahead}-{n:02d}{paths[n % len(paths)].suffix}"
        if not link.exists():
            os.link(paths[n % len(paths)], link)
        links.append(link)
    dataset = [{"video": str(link)} for link in links]
    waits: list[float] = []

    def doc_to_visual(doc):  # a task hook as ours are: the proxy of the calling model's frames
        return [mv.video_for_model(doc["video"])]

    class StubQwen2VL(Qwen2_VL):
        def __init__(self):  # noqa: D107 - no checkpoint: lmms-eval's settings, a sleeping "GPU"
            from lmms_eval.api.model import lmms

            lmms.__init__(self)
            self.max_num_frames, self.max_pixels, self.min_pixels = QWEN2_VL.max_frames, QWEN2_VL.max_pixels, QWEN2_VL.min_pixels
            self.task_dict = {"sim": {"test": dataset}}

        def generate_until(self, requests):
            re_ords = Collator([r.args for r in requests], lambda x: (x[3],), grouping=True)
            for chunk in re_ords.get_batched(n=1, batch_fn=None):
                contexts, all_gen_kwargs, doc_to_visual_fns, doc_id, task, split = zip(*chunk)
                task, split = task[0], split[0]
                started = time.perf_counter()
                for fn, ids in zip(doc_to_visual_fns, doc_id):
                    visual = fn(self.task_dict[task][split][ids])
                    qwen2_vl_reads(visual[0])  # the model's own read of what it was given
                waits.append(time.perf_counter() - started)
                time.sleep(model_seconds)  # the forward pass (GPU work; the CPU is free)
            return ["" for _ in requests]

    requests = [Instance("generate_until", ("ctx", {}, doc_to_visual, n, "sim", "test"), idx=0,
                         metadata={"task": "sim", "doc_id": n, "repeats": 1}) for n in range(docs)]
    model = StubQwen2VL()
    start = time.perf_counter()
    model.generate_until(requests)
    wall = time.perf_counter() - start
    if mv._ahead is not None:
        mv._ahead.stop()
    for link in links:
        link.unlink()
    return {"wall_s": wall, "input_wait_s": sum(waits), "model_s": docs * model_seconds, "waits": waits}


# ----------------------------------------------------------------------------- driver


def check_frames(frames: np.ndarray, reference: np.ndarray) -> dict:
    same_shape = frames.shape == reference.shape
    diff = np.abs(frames.astype(np.int16) - reference.astype(np.int16)) if same_shape else None
    return {"shape_ok": same_shape, "max_abs_diff": int(diff.max()) if same_shape else None,
            "mean_abs_diff": float(diff.mean()) if same_shape else None,
            "identical": same_shape and float(diff.mean()) <= PIXEL_TOLERANCE}


def benchmark(cache_dir: Path, docs: int, model_seconds: float, skip_today: bool, files: tuple[str, ...] = FILES) -> dict:
    paths = fs.generate(cache_dir, list(files))
    warmup = syn.write_video(cache_dir / "warmup_model_inputs.mp4", 4, fps=10, width=64, height=48)
    rows = []
    with tempfile.TemporaryDirectory(prefix="model_inputs_", dir=cache_dir) as tmpdir:
        tmp = Path(tmpdir)
        for name in files:
            floor = None
            for consumer in ("qwen2_vl", "chat"):
                outcome = {}
                methods = ("ours", "today", "floor") if consumer == "qwen2_vl" else ("ours", "today")
                for method in methods:
                    if skip_today and method == "today":
                        continue
                    case = f"{consumer}:{method}"
                    print(f"{name}: {case} ...", file=sys.stderr, flush=True)
                    out = tmp / f"{name}-{consumer}-{method}.npy"
                    outcome[method] = {**run_worker(case, paths[name], out, warmup, tmp / f"cache-{name}-{consumer}"),
                                       "frames": np.load(out)}
                ours = outcome["ours"]
                floor = outcome.get("floor", {}).get("time", floor)
                row = {"file": name, "consumer": consumer, "ours_s": ours["time"], "ours_warm_s": ours["warm_s"],
                       "ours_peak_mb": ours["peak_growth_mb"], "prepare_s": ours["prepare_s"], "proxy_mb": ours["proxy_mb"],
                       "decode_floor_s": floor}
                if "today" in outcome:
                    today = outcome["today"]
                    row.update(today_s=today["time"], today_peak_mb=today["peak_growth_mb"], speedup=today["time"] / ours["time"],
                               speedup_warm=today["time"] / ours["warm_s"],
                               speedup_ceiling=today["time"] / floor if floor else None,
                               check=check_frames(ours["frames"], today["frames"]))
                    row["speedup_per_document"] = {
                        bench: today["time"] / ((ours["time"] + (q - 1) * ours["warm_s"]) / q) for bench, q in QUESTIONS_PER_VIDEO.items()
                    }
                    if consumer == "chat":  # the timing the processor gets: identical metadata
                        row["check"]["metadata_identical"] = {k: ours[k] for k in ("indices", "fps", "total_num_frames")} == {
                            k: today[k] for k in ("indices", "fps", "total_num_frames")}
                        row["check"]["identical"] = row["check"]["identical"] and row["check"]["metadata_identical"]
                if consumer == "qwen2_vl":
                    from lmms_video_reasoning.utils import video

                    info = video.probe(paths[name])
                    row["composed_indices"] = list(mv.model_frames(QWEN2_VL, info.total_frames, info.fps, info.width, info.height).indices)
                rows.append(row)
        print(f"simulated run: {docs} documents, {model_seconds} s each ...", file=sys.stderr, flush=True)
        sources = [paths[name] for name in files]
        sequential = simulated_run(sources, docs, model_seconds, 0, tmp / "sim0" / "cache")
        overlapped = simulated_run(sources, docs, model_seconds, mv.DEFAULT_DECODE_AHEAD, tmp / "sim2" / "cache")
    bound = max(sequential["input_wait_s"], sequential["model_s"])
    qwen_rows = [r for r in rows if r["consumer"] == "qwen2_vl"]
    chat_rows = [r for r in rows if r["consumer"] == "chat"]

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
        "peak_memory_mb": max(r["ours_peak_mb"] for r in rows),
        "frames_identical": all(r["check"]["identical"] for r in rows if "check" in r) if not skip_today else None,
        "overlap_efficiency": bound / overlapped["wall_s"],
        "simulated": {"docs": docs, "model_seconds": model_seconds, "decode_ahead": mv.DEFAULT_DECODE_AHEAD,
                      "wall_without_s": sequential["wall_s"], "wall_with_s": overlapped["wall_s"],
                      "total_decode_s": sequential["input_wait_s"], "total_model_s": sequential["model_s"],
                      "ratio_to_bound": overlapped["wall_s"] / bound, "input_wait_with_s": overlapped["input_wait_s"]},
        "goals": GOALS, "machine": fs.machine(), "load_average_at_end": os.getloadavg(), "rows": rows,
    }
    return summary


def print_table(summary: dict) -> None:
    nan = float("nan")
    print(f"{'file':24} {'consumer':9} {'today s':>8} {'cold s':>7} {'x':>6} {'warm s':>7} {'x':>6} {'floor s':>8} "
          f"{'today MB':>9} {'ours MB':>8} {'frames':>7}")
    for r in summary["rows"]:
        check = r.get("check", {})
        print(f"{r['file']:24} {r['consumer']:9} {r.get('today_s', nan):>8.2f} {r['ours_s']:>7.2f} {r.get('speedup', nan):>5.1f}x "
              f"{r['ours_warm_s']:>7.2f} {r.get('speedup_warm', nan):>5.1f}x {r.get('decode_floor_s') or nan:>8.2f} "
              f"{r.get('today_peak_mb', nan):>9.0f} {r['ours_peak_mb']:>8.0f} "
              f"{('same' if check.get('identical') else 'DIFF') if check else '-':>7}")
    sim = summary["simulated"]
    print(f"\nsimulated {sim['docs']} documents x {sim['model_seconds']} s model: without decode-ahead {sim['wall_without_s']:.1f} s, "
          f"with {sim['wall_with_s']:.1f} s; max(total decode {sim['total_decode_s']:.1f} s, total model {sim['total_model_s']:.1f} s) "
          f"-> ratio {sim['ratio_to_bound']:.3f} (goal <= {GOALS['overlap_ratio']}), overlap_efficiency {summary['overlap_efficiency']:.3f}")
    print(f"speedup_vs_model_path (qwen2_vl, min): cold {summary['speedup_vs_model_path']}, warm {summary['speedup_vs_model_path_warm']}, "
          f"per document {summary['speedup_vs_model_path_per_document']}, exact-decode ceiling {summary['speedup_ceiling_exact_decode']}; "
          f"chat: cold {summary['speedup_vs_model_path_chat']}, warm {summary['speedup_vs_model_path_chat_warm']}")
    print(f"peak_memory_mb {summary['peak_memory_mb']:.0f}, frames_identical {summary['frames_identical']}\n{summary['machine']}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--worker":
        worker(*argv[1:6])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument("--docs", type=int, default=20, help="documents in the simulated run")
    parser.add_argument("--model-seconds", type=float, default=2.0, help="stub model time per document")
    parser.add_argument("--cache-dir", type=Path, default=fs.DEFAULT_CACHE, help="where generated videos are kept")
    parser.add_argument("--skip-today", action="store_true", help="skip lmms-eval's own paths (17 GB on the long file)")
    parser.add_argument("--files", nargs="+", choices=FILES, default=list(FILES), help="subset of files")
    args = parser.parse_args(argv)
    summary = benchmark(args.cache_dir, args.docs, args.model_seconds, args.skip_today, tuple(args.files))
    if args.json:
        print(json.dumps(summary, indent=1, default=str))
    else:
        print_table(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
