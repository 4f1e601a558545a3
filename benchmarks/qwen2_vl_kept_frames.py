"""The upstream host PR "qwen2_vl decodes only the frames it keeps": its time and memory, before and after.

Not a test. The PR (``dev/host_prs.py``, ``QWEN2_VL``) is applied to a copy of the
installed lmms-eval 0.7.3; each case runs in a fresh process importing that copy, and calls
``Qwen2_VL._vision_inputs`` (the step the PR changes: the images and videos handed to the
processor) on one video message with the model's defaults (32 frames, max_pixels 602112):

- ``before``: ``decode_kept_frames=False``, the previous path (``process_vision_info``: 2 fps,
  up to 768 frames decoded and resized, then the model's 32);
- ``after``: the PR's default, only the kept frames decoded.

Peak memory is the growth of the resident high-water mark during the call, after a warm-up
call on a tiny video (imports and codec set-up not counted). ``identical``: the two tensors are
equal element for element (same shape and dtype). Videos: the 20-minute 1280x720 file and the
5-minute textured 720p file with B-frames of ``benchmarks/frame_sampling.py`` (generated once,
cached), and the short clips of ``benchmarks/model_inputs.py``.

WARNING: ``before`` on the 20-minute file peaks near 17 GB resident.

    python benchmarks/qwen2_vl_kept_frames.py [--json] [--files long_720p_gop250 ...] [--repeats 1]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1] / "dev"))  # host_prs: the PR series' tool
import frame_sampling as fs  # noqa: E402 - the generated benchmark videos
import model_inputs as mi  # noqa: E402 - its short clips

SHORT = tuple(mi.CLIPS)
LONG = mi.FILES


def patched_lmms_eval(target: Path) -> Path:
    """A copy of the installed lmms-eval with the PR applied; returns the folder to put on sys.path."""
    import lmms_eval
    import host_prs

    return host_prs.patched_copy("qwen2-vl-kept-frames", Path(lmms_eval.__file__).parent, target)


def worker(tree: str, mode: str, video: str, warmup: str, out: str) -> None:
    sys.path.insert(0, tree)
    import numpy as np
    from lmms_eval.models.simple.qwen2_vl import Qwen2_VL

    assert Qwen2_VL.__module__ and Path(sys.modules[Qwen2_VL.__module__].__file__).is_relative_to(tree), "not the patched lmms-eval"
    model = Qwen2_VL.__new__(Qwen2_VL)  # no checkpoint: the video inputs depend on these settings only
    model.max_num_frames, model.decode_kept_frames = 32, mode == "after"

    def message(path):
        return [[{"role": "user", "content": [{"type": "video", "video": path, "max_pixels": 602112, "min_pixels": 3136}, {"type": "text", "text": "Describe."}]}]]

    model._vision_inputs(message(warmup))
    (_, videos), elapsed, growth = fs.measured(lambda: model._vision_inputs(message(video)))
    np.save(out, videos[0].numpy())
    print(json.dumps({"seconds": elapsed, "peak_growth_mb": growth, "shape": list(videos[0].shape)}))


def run_case(tree: Path, mode: str, video: Path, warmup: Path, out: Path) -> dict:
    cmd = [sys.executable, __file__, "--worker", str(tree), mode, str(video), str(warmup), str(out)]
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "LMMS_VR_NO_AUTOLOAD": "1"}  # lmms-eval as it is, no plugin
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{mode} on {video.name} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def benchmark(names: list[str], repeats: int, cache_dir: Path) -> dict:
    import numpy as np

    paths = {**fs.generate(cache_dir, [n for n in names if n in LONG]), **mi.generate_clips(cache_dir, [n for n in names if n in SHORT])}
    warmup = fs.warmup_video(cache_dir)
    rows = []
    with tempfile.TemporaryDirectory(prefix="qwen2_vl_kept_frames_") as tmp:
        tmp = Path(tmp)
        tree = patched_lmms_eval(tmp)
        for name in names:
            runs = {"before": [], "after": []}
            for _ in range(repeats):  # interleaved: before and after see the same machine state
                for mode in runs:
                    runs[mode].append(run_case(tree, mode, paths[name], warmup, tmp / f"{mode}.npy"))
            same = np.array_equal(np.load(tmp / "before.npy"), np.load(tmp / "after.npy"))
            row = {"file": name, "identical": bool(same), "shape": runs["after"][-1]["shape"]}
            for mode, results in runs.items():
                row[f"{mode}_s"] = round(float(np.median([r["seconds"] for r in results])), 3)
                row[f"{mode}_peak_mb"] = round(max(r["peak_growth_mb"] for r in results), 1)
            row["speedup"] = round(row["before_s"] / row["after_s"], 1)
            row["memory_ratio"] = round(row["before_peak_mb"] / max(row["after_peak_mb"], 1.0), 1)
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    return {"machine": fs.machine(), "repeats": repeats, "rows": rows, "identical": all(r["identical"] for r in rows)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--files", nargs="+", default=list(SHORT + LONG), choices=list(SHORT + LONG))
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--cache-dir", type=Path, default=fs.DEFAULT_CACHE)
    args = parser.parse_args(argv)
    summary = benchmark(args.files, args.repeats, args.cache_dir)
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"{'file':32} {'before s':>9} {'after s':>8} {'x':>6} {'before MB':>10} {'after MB':>9} identical")
        for r in summary["rows"]:
            print(f"{r['file']:32} {r['before_s']:9.2f} {r['after_s']:8.2f} {r['speedup']:6.1f} {r['before_peak_mb']:10.0f} {r['after_peak_mb']:9.0f} {r['identical']}")
    return 0 if summary["identical"] else 1


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(*sys.argv[2:7])
    else:
        sys.exit(main())
