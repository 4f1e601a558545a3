"""Media resolution on a large data root: the per-benchmark resolvers over `utils/data/media_index.py`.

Not a test. Builds (in a temporary folder) a CG-Bench-shaped root of `--files` empty files
(default 21,000: full videos flat at the root as an unzip of the repacked chunks leaves them,
clue clips in a `clue` folder, subtitles nested two folders deep, plus unrelated files), then
times, side by side in one run:

- ``index``: building the name index once (one walk of the root);
- ``resolve_by_name``: `cg_bench.data.video_at` for every video (none in its canonical
  folder, so each is found through the index), after the index is built;
- ``resolve_canonical``: the same after the files are moved into `cg_videos_720p/` (one
  `stat` each, no index);
- ``walk_per_lookup``: the naive alternative, one `os.walk` of the root per lookup, timed on
  `--naive` lookups and extrapolated to all videos.

Prints a table; ``--json`` prints one object with the timings (seconds) and
``speedup_vs_walk_per_lookup`` (naive extrapolated / (index + resolve_by_name)).

    /work/main/.venv/bin/python benchmarks/media_index.py [--json] [--files 21000] [--naive 20]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path


def build_root(root: Path, files: int) -> list[str]:
    videos = files // 3
    (root / "clue").mkdir(parents=True)
    (root / "subs" / "nested").mkdir(parents=True)
    (root / "other").mkdir()
    uids = [f"vid{i:06d}" for i in range(videos)]
    for uid in uids:
        (root / f"{uid}.mp4").touch()
    for i in range(files // 3):
        (root / "clue" / f"{i}.mp4").touch()
    for i in range(files - 2 * (files // 3)):
        (root / ("subs/nested" if i % 2 else "other") / f"{uids[i % videos]}.{'srt' if i % 2 else 'txt'}").touch()
    return uids


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--files", type=int, default=21_000)
    parser.add_argument("--naive", type=int, default=20, help="lookups timed for the walk-per-lookup baseline")
    args = parser.parse_args(argv)

    from lmms_video_reasoning.cg_bench import data
    from lmms_video_reasoning.utils.data import media_index

    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "root"
        uids = build_root(root, args.files)
        media_index.forget()
        start = time.perf_counter()
        index = media_index.index_for(root)
        t_index = time.perf_counter() - start
        start = time.perf_counter()
        found = [data.video_at(root, uid) for uid in uids]
        t_by_name = time.perf_counter() - start
        assert all(path is not None and path.parent == root for path in found)

        start = time.perf_counter()
        for uid in uids[: args.naive]:
            next(Path(d) / f"{uid}.mp4" for d, _s, names in os.walk(root) if f"{uid}.mp4" in names)
        t_naive = (time.perf_counter() - start) / args.naive * len(uids)

        (root / data.VIDEO_DIR).mkdir()
        for uid in uids:
            os.replace(root / f"{uid}.mp4", root / data.VIDEO_DIR / f"{uid}.mp4")
        media_index.forget()
        start = time.perf_counter()
        found = [data.video_at(root, uid) for uid in uids]
        t_canonical = time.perf_counter() - start
        assert all(path is not None and path.parent.name == data.VIDEO_DIR for path in found)

    result = {
        "files": sum(map(len, index.values())), "videos": len(uids),
        "index_s": round(t_index, 4), "resolve_by_name_s": round(t_by_name, 4),
        "resolve_canonical_s": round(t_canonical, 4), "walk_per_lookup_s_extrapolated": round(t_naive, 2),
        "speedup_vs_walk_per_lookup": round(t_naive / (t_index + t_by_name), 1),
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(f"root of {result['files']} files, {result['videos']} videos resolved")
        for key in ("index_s", "resolve_by_name_s", "resolve_canonical_s", "walk_per_lookup_s_extrapolated"):
            print(f"  {key:32s} {result[key]}")
        print(f"  speedup vs one walk per lookup  {result['speedup_vs_walk_per_lookup']}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
