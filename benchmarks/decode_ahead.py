"""Decode-ahead on run shapes: wall time of a run with and without it, side by side.

Not a test. Each run sends documents through lmms-eval's own ``Qwen2_VL.generate_until`` (its
class, a tiny offline checkpoint, its real processor on the frames it reads; the forward pass a
fixed sleep per document, the GPU's generation, leaving the CPU free), our hook giving each
document its proxy clip (``benchmarks/model_inputs.simulated_run``). The videos are real 720p
H.264 files from the benchmark generator (``benchmarks/frame_sampling.py``: a 20-minute GOP-250
file and a 5-minute textured file with B-frames, CG-Bench-like lengths; generated once, cached),
so each cold document decodes 32 frames of a long video as in a real run.

Run shapes (documents in lmms-eval's order, which sorts by prompt, not by video):

- ``distinct``: every document a new video (hard links: new cache keys). VCR-Bench (1,034
  questions on 859 videos) and the first question on each CG-Bench / VRBench video.
- ``cg_bench``: ~10 questions per video (CG-Bench: 12,129 on 1,219), in a seeded shuffle: a
  video's first question makes its proxy (cold), the later ones read it from the cache (warm).

For each shape and model time, the run without (``LMMS_VR_DECODE_AHEAD=0``) and with
(``--ahead``, default 2) decode-ahead, in alternating order (drift on a shared machine hits both):
``ratio`` = wall with / wall without (below 1: decode-ahead pays), ``saved_per_document_s``,
``input_wait`` (the model idle, waiting for its input) of both, and ``bound`` =
max(input wait without, model time): the least any overlap can reach.

    python benchmarks/decode_ahead.py [--json] [--docs 20] [--model-seconds 1 3] [--shapes distinct cg_bench] [--ahead 2] [--files ...]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import frame_sampling as fs  # noqa: E402 - the generated benchmark videos
import model_inputs as mi  # noqa: E402 - the simulated run through lmms-eval's own qwen2_vl

SHAPES = ("distinct", "cg_bench")
QUESTIONS_PER_VIDEO = {"distinct": 1, "cg_bench": round(12129 / 1219)}  # the papers' totals (model_inputs.QUESTIONS_PER_VIDEO)


def documents_of(shape: str, sources: list[Path], docs: int, folder: Path, tag: str, seed: int = 0) -> tuple[list[Path], list[Path]]:
    """(the run's documents' videos in the model's order, the links to remove afterwards)."""
    per_video = QUESTIONS_PER_VIDEO[shape]
    videos = mi.distinct_documents(sources, math.ceil(docs / per_video), folder, tag)
    documents = [videos[n // per_video] for n in range(docs)]
    if per_video > 1:
        random.Random(seed).shuffle(documents)
    return documents, videos


def measure(shape: str, model_seconds: float, ahead: int, docs: int, sources: list[Path], tmp: Path, checkpoints: Path,
            with_first: bool) -> dict:
    """The run without and with decode-ahead on the same shape (fresh cache and new video names each)."""
    runs = {}
    for depth in ((ahead, 0) if with_first else (0, ahead)):
        tag = f"{shape}-{model_seconds:g}s-ahead{depth}"
        print(f"{tag}: {docs} documents ...", file=sys.stderr, flush=True)
        documents, links = documents_of(shape, sources, docs, tmp / "documents", tag)
        try:
            runs[depth] = mi.simulated_run(documents, model_seconds, depth, tmp / tag / "cache", checkpoints)
        finally:
            for link in links:
                link.unlink()
    without, with_ = runs[0], runs[ahead]
    bound = max(without["input_wait_s"], without["model_s"])
    return {"shape": shape, "questions_per_video": QUESTIONS_PER_VIDEO[shape], "docs": docs, "model_seconds": model_seconds,
            "ahead": ahead, "wall_without_s": round(without["wall_s"], 2), "wall_with_s": round(with_["wall_s"], 2),
            "ratio": round(with_["wall_s"] / without["wall_s"], 3),
            "saved_per_document_s": round((without["wall_s"] - with_["wall_s"]) / docs, 3),
            "input_wait_without_s": round(without["input_wait_s"], 2), "input_wait_with_s": round(with_["input_wait_s"], 2),
            "model_s": without["model_s"], "ratio_to_bound": round(with_["wall_s"] / bound, 3)}


def benchmark(cache_dir: Path, docs: int, seconds: list[float], shapes: list[str], ahead: int, files: list[str]) -> dict:
    sources = list(fs.generate(cache_dir, files).values())
    rows = []
    with tempfile.TemporaryDirectory(prefix="decode_ahead_", dir=cache_dir) as tmpdir:
        for n, (shape, model_seconds) in enumerate((shape, s) for shape in shapes for s in seconds):
            rows.append(measure(shape, model_seconds, ahead, docs, sources, Path(tmpdir), cache_dir / "checkpoints",
                                with_first=n % 2 == 1))
    return {"rows": rows, "machine": fs.machine(), "load_average_at_end": os.getloadavg(),
            "sources": [p.name for p in sources]}


def print_table(summary: dict) -> None:
    print(f"{'shape':9} {'q/video':>7} {'model s':>7} {'without s':>9} {'with s':>7} {'ratio':>6} {'saved/doc s':>11} "
          f"{'wait without':>12} {'wait with':>9} {'to bound':>8}")
    for r in summary["rows"]:
        print(f"{r['shape']:9} {r['questions_per_video']:>7} {r['model_seconds']:>7g} {r['wall_without_s']:>9.1f} "
              f"{r['wall_with_s']:>7.1f} {r['ratio']:>6.3f} {r['saved_per_document_s']:>11.2f} {r['input_wait_without_s']:>12.1f} "
              f"{r['input_wait_with_s']:>9.1f} {r['ratio_to_bound']:>8.3f}")
    print(f"{summary['machine']}; load average at the end {summary['load_average_at_end']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument("--docs", type=int, default=20, help="documents per run")
    parser.add_argument("--model-seconds", type=float, nargs="+", default=[1.0, 3.0], help="stub generation time per document")
    parser.add_argument("--shapes", nargs="+", choices=SHAPES, default=list(SHAPES))
    parser.add_argument("--ahead", type=int, default=2, help="documents decoded ahead in the run with it")
    parser.add_argument("--files", nargs="+", choices=mi.FILES, default=list(mi.FILES), help="source videos, used in turn")
    parser.add_argument("--cache-dir", type=Path, default=fs.DEFAULT_CACHE, help="where generated videos are kept")
    args = parser.parse_args(argv)
    summary = benchmark(args.cache_dir, args.docs, args.model_seconds, args.shapes, args.ahead, args.files)
    if args.json:
        print(json.dumps(summary, indent=1))
    else:
        print_table(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
