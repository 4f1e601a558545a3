"""Proxies are provably the models' own inputs: lmms-eval's real code on the path vs on the proxy.

For every reading in `utils.lmms.model_readings.KNOWN_MODELS` (qwen2_vl, simple and chat qwen2_5_vl, simple
and chat qwen3_vl, llava_onevision) lmms-eval 0.7.3's own model class runs its
`generate_until` (tiny offline checkpoints) on each video of a grid, once with the original
path and once with our proxy (`tests/model_equivalence.py`, in a subprocess with the processor
probe). What the processor received must be byte-identical: `pixel_values_videos`,
`video_grid_thw`, `input_ids`, `second_per_grid_ts`, and the video metadata (fps, frame
indices, frame count, backend); a run that fails must fail the same way in both modes.

The grid follows the datasets: CG-Bench clue clips are seconds long and its videos 9-105
minutes at 10-60 fps (cg_bench/video_meta_info.json), VCR-Bench's from under a minute to over
30 minutes; plus the cases a copy of the selection gets wrong: one frame, sub-second, an odd
frame count, fewer decoded frames than the budget, NTSC rates, 7 and 60 fps, variable frame
rate, portrait, odd sizes and sizes that are no multiple of the patch, extensions a model does not read as
a video. Long videos are tiny and at a low rate, so they cost little to make and read.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from lmms_video_reasoning.utils.lmms import model_readings as readings, model_video as mv, proxy_clips as clips
from lmms_video_reasoning.utils.media import synthetic as syn

HARNESS = Path(__file__).with_name("model_equivalence.py")
BROKEN_LAST_FRAME = "3s_last_frame_undecodable.mp4"
CG_BENCH_TABLE = Path(readings.__file__).resolve().parents[2] / "cg_bench" / "video_meta_info.json"
ARRAYS = ("pixel_values_videos", "video_grid_thw", "input_ids", "second_per_grid_ts")
METADATA = ("fps", "frames_indices", "total_num_frames", "video_backend")
QUIET_CPU = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def cg_bench_durations() -> tuple[float, float]:
    """The shortest and the longest CG-Bench video (seconds), from the frame table the suite ships."""
    durations = sorted(entry["duration"] for entry in json.loads(CG_BENCH_TABLE.read_text()).values())
    return durations[0], durations[-1]


def grid_specs() -> dict[str, dict]:
    """name -> write_video settings (the file name's extension is part of the case)."""
    shortest, longest = cg_bench_durations()
    small = {"width": 64, "height": 48}
    return {
        # short: sub-second and clue clips
        "one_frame.mp4": {"duration": 0.1, "fps": 10, **small},
        "three_frames.mp4": {"duration": 0.3, "fps": 10, **small},
        "half_second_30fps.mp4": {"duration": 0.5, "fps": 30, "width": 96, "height": 64},
        "2s_30fps_320x240.mp4": {"duration": 2, "fps": 30, "width": 320, "height": 240},
        "5s_ntsc.mp4": {"duration": 5, "fps": 30000 / 1001, "width": 160, "height": 120, "bframes": 2},
        # medium
        "10s_30fps_480x270.mp4": {"duration": 10, "fps": 30, "width": 480, "height": 270},
        "12s_7fps_352x288.mp4": {"duration": 12, "fps": 7, "width": 352, "height": 288},
        "15.5s_23.976fps.mp4": {"duration": 15.5, "fps": 24000 / 1001, "width": 176, "height": 144, "bframes": 3},
        "6s_60fps_portrait.mp4": {"duration": 6, "fps": 60, "width": 90, "height": 160},
        "3s_odd_321x241.mp4": {"duration": 3, "fps": 25, "width": 321, "height": 241, "pix_fmt": "yuv444p"},
        "20s_odd_portrait_161x287.mp4": {"duration": 20, "fps": 30, "width": 161, "height": 287, "pix_fmt": "yuv444p"},
        "8s_vfr.mp4": {"duration": 8, "fps": 24, "vfr": True, "width": 160, "height": 120},
        "45s_30fps.mov": {"duration": 45, "fps": 30, "width": 112, "height": 84, "bframes": 2},
        "4s_upper_case.MP4": {"duration": 4, "fps": 25, **small},  # qwen2_vl / qwen2_5_vl: not a video path
        "4s_matroska.mkv": {"duration": 4, "fps": 25, **small},  # simple qwen2_vl: not a video path; qwen3_vl: one
        # decord counts the last frame but cannot decode it: both modes must fail (ours names the file)
        BROKEN_LAST_FRAME: {"duration": 3, "fps": 10, "width": 160, "height": 120, "corrupt_last": True},
        # long: CG-Bench's shortest and longest video, VCR-Bench's 30+ minutes (tiny, low rate, short GOP)
        "cg_bench_shortest_10fps.mp4": {"duration": shortest, "fps": 10, "gop": 50, "width": 32, "height": 32},
        "vcr_bench_31min_2fps.mp4": {"duration": 31 * 60, "fps": 2, "gop": 20, "width": 64, "height": 32},
        "cg_bench_longest_half_fps.mp4": {"duration": longest, "fps": 0.5, "gop": 10, "width": 32, "height": 32},
    }


@pytest.fixture(scope="session")
def shared_folder(tmp_path_factory) -> Path:
    """A folder all xdist workers of this session share (videos and checkpoints are made once)."""
    root = tmp_path_factory.getbasetemp()
    root = root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root
    folder = root / "model_equivalence"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _once(folder: Path, name: str, make) -> Path:
    """`make(target)` under a file lock, unless `target` exists (another worker made it)."""
    target = folder / name
    with open(folder / f".{name}.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not target.exists():
            tmp = folder / f".tmp-{name}"
            make(tmp)
            tmp.rename(target)
    return target


@pytest.fixture(scope="session")
def grid(shared_folder) -> list[str]:
    return [str(make_video(shared_folder / "grid", name, spec)) for name, spec in grid_specs().items()]


def make_video(folder: Path, name: str, spec: dict) -> Path:
    """`write_video` of `spec` (textured) as `folder/<name>.d/<name>`, made once across workers."""
    folder.mkdir(parents=True, exist_ok=True)
    settings = dict(spec)

    def write(tmp: Path):
        tmp.mkdir()
        corrupt = settings.pop("corrupt_last", False)
        syn.write_video(tmp / name, settings.pop("duration"), textured=True, **settings)
        if corrupt:
            overwrite_last_packet(tmp / name)

    return _once(folder, name + ".d", write) / name


def overwrite_last_packet(path: Path) -> None:
    """Fill the last frame's compressed data with 0xFF: still counted, no longer decodable."""
    import av

    with av.open(str(path)) as container:
        packets = [(p.pts, p.pos, p.size) for p in container.demux(container.streams.video[0]) if p.size]
    _pts, pos, size = max(packets)
    data = bytearray(path.read_bytes())
    data[pos:pos + size] = b"\xff" * size
    path.write_bytes(bytes(data))


@pytest.fixture(scope="session")
def checkpoints(shared_folder) -> dict[str, Path]:
    from tiny_models import BUILDERS

    return {family: _once(shared_folder, f"tiny_{family}", build) for family, build in BUILDERS.items()}


# Each reading with lmms-eval's constructor settings; pixel limits lowered where the defaults
# would upscale the tiny videos 50x (same code, smaller tensors). A second setting each where
# the model reads differently: an odd budget, budgets above the video, sampling by fps.
SMALL = {"max_pixels": 50176, "min_pixels": 3136}
READINGS = {
    "qwen2_vl": [("lmms_eval.models.simple.qwen2_vl.Qwen2_VL", "qwen2_vl", {}),
                 ("lmms_eval.models.simple.qwen2_vl.Qwen2_VL", "qwen2_vl", {"max_num_frames": 7})],
    "qwen2_5_vl": [("lmms_eval.models.simple.qwen2_5_vl.Qwen2_5_VL", "qwen2_5_vl", SMALL),
                   ("lmms_eval.models.simple.qwen2_5_vl.Qwen2_5_VL", "qwen2_5_vl", {**SMALL, "max_num_frames": 64})],
    "qwen2_5_vl_chat": [("lmms_eval.models.chat.qwen2_5_vl.Qwen2_5_VL", "qwen2_5_vl", SMALL),
                        ("lmms_eval.models.chat.qwen2_5_vl.Qwen2_5_VL", "qwen2_5_vl", {**SMALL, "fps": 1.0})],
    "qwen3_vl": [("lmms_eval.models.simple.qwen3_vl.Qwen3_VL", "qwen3_vl", {**SMALL, "min_pixels": 4096}),
                 ("lmms_eval.models.simple.qwen3_vl.Qwen3_VL", "qwen3_vl", {**SMALL, "min_pixels": 4096, "fps": 2.0, "max_num_frames": 40})],
    "qwen3_vl_chat": [("lmms_eval.models.chat.qwen3_vl.Qwen3_VL", "qwen3_vl", {**SMALL, "min_pixels": 4096}),
                      ("lmms_eval.models.chat.qwen3_vl.Qwen3_VL", "qwen3_vl",
                       {"min_pixels": 4096, "total_pixels": 2_000_000, "max_num_frames": 48})],
    "llava_onevision": [("llava_onevision", None, {}), ("llava_onevision", None, {"max_frames_num": 8})],
}


# One harness process per group (each process start costs seconds of CPU): the readings with a
# frame budget over a short proxy, and the timed ones.
GROUPS = {"budget": ("qwen2_vl", "qwen2_5_vl", "llava_onevision"), "timed": ("qwen2_5_vl_chat", "qwen3_vl", "qwen3_vl_chat")}
# The second setting of each reading runs on this part of the grid (sampled: CPU time in CI).
SECOND_SETTING_VIDEOS = ("one_frame.mp4", "three_frames.mp4", "2s_30fps_320x240.mp4", "5s_ntsc.mp4", "12s_7fps_352x288.mp4",
                         "8s_vfr.mp4", "cg_bench_shortest_10fps.mp4", "vcr_bench_31min_2fps.mp4")


def models_of(reading: str, only: int | None = None) -> list[tuple[str, tuple, tuple[str, ...] | None]]:
    """`(name, setting, videos)` of `reading`'s settings in READINGS (all, or the one at index
    `only`); `videos`: the grid names a setting runs on (None: all)."""
    return [(f"{reading}#{n}", setting, None if n == 0 else SECOND_SETTING_VIDEOS)
            for n, setting in enumerate(READINGS[reading]) if only is None or n == only]


def run_harness(folder: Path, videos: list[str], models: list[tuple], checkpoints: dict[str, Path],
                modes: tuple[str, ...] = ("path", "fast"), lmms_eval_tree: Path | None = None) -> list[dict]:
    """The harness's result lines for `models` (``models_of``) on `videos`, each with its calls
    loaded (`lmms_eval_tree`: a folder holding another `lmms_eval/`, imported instead of the installed one)."""
    from processor_probe import processor_calls, processor_probe_env

    specs = []
    for name, (dotted, family, settings), names in models:
        kwargs = settings if family is None else {"pretrained": str(checkpoints[family]), "device": "cpu", "device_map": "cpu", **settings}
        specs.append({"name": name, "class": dotted, "kwargs": kwargs, "modes": list(modes),
                      "videos": [v for v in videos if names is None or Path(v).name in names]})
    folder.mkdir(parents=True, exist_ok=True)
    spec, results = folder / "spec.json", folder / "results.jsonl"
    spec.write_text(json.dumps({"videos": videos, "cache": str(folder / "proxies"), "models": specs}))
    env = {**os.environ, **processor_probe_env(folder / "probe"), **QUIET_CPU}
    if lmms_eval_tree is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(lmms_eval_tree), env["PYTHONPATH"]])
    env.pop(mv.INPUT_ENV, None)
    done = subprocess.run([sys.executable, str(HARNESS), str(spec), str(results)], env=env, capture_output=True, text=True,
                          timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    calls = {Path(c["_file"]).name: c for c in _calls_with_names(folder / "probe", processor_calls)}
    lines = [json.loads(line) for line in results.read_text().splitlines()]
    for line in lines:
        line["calls"] = [calls[name] for name in line["calls"]]
    return lines


def _calls_with_names(probe: Path, processor_calls) -> list[dict]:
    names = sorted((probe / "calls").glob("call-*.npz"))
    return [{**call, "_file": str(name)} for call, name in zip(processor_calls(probe), names)]


def assert_same_calls(case: str, got: list[dict], want: list[dict]) -> None:
    """Two runs' processor calls received the same arrays (dtype, shape, values) and video metadata."""
    assert len(got) == len(want), (case, len(got), len(want))
    for a, b in zip(got, want):
        for key in ARRAYS:
            assert (key in a) == (key in b), (case, key)
            if key in b:
                assert a[key].dtype == b[key].dtype and a[key].shape == b[key].shape, (case, key, a[key].shape, b[key].shape)
                assert np.array_equal(a[key], b[key]), (case, key, "differs")
        mine, theirs = a["video_metadata"], b["video_metadata"]
        assert (mine is None) == (theirs is None), case
        for one, other in zip(mine or [], theirs or []):
            assert {k: one[k] for k in METADATA} == {k: other[k] for k in METADATA}, (case, one, other)


def assert_equivalent(lines: list[dict]) -> dict[str, dict[str, int]]:
    """Path and fast runs of each (model, video) gave the processor the same inputs (or failed
    alike); returns, per model, how many fast runs read a proxy and how many the original path."""
    runs = {(line["model"], line["video"], line["mode"]): line for line in lines}
    counts = {line["model"]: {"proxy": 0, "path": 0} for line in lines}
    for (model, video, mode), fast in runs.items():
        if mode != "fast":
            continue
        path = runs[(model, video, "path")]
        case, used = f"{model} on {Path(video).name}", counts[model]
        normalise = (lambda text: None if text is None else text.replace(video, "<video>")
                     .split(str(Path(fast["reads"][0]).parent) if fast["reads"] else "\0")[0])
        if Path(video).name == BROKEN_LAST_FRAME:
            # lmms-eval's own path gets no frames from it: its decord read fails (an error, or simple
            # qwen2_vl logs "Failed to process video" and answers from the text); ours stops with an
            # error naming the file, or hands the path where the model cannot read it anyway.
            assert path["error"] or not any("pixel_values_videos" in call for call in path["calls"]), (case, path)
            assert fast["error"] and (("MediaError" in fast["error"] and "corrupt" in fast["error"])
                                      or normalise(fast["error"]) == normalise(path["error"])), (case, fast["error"])
            used["path"] += 1
            continue
        assert normalise(fast["error"]) == normalise(path["error"]), (case, fast["error"], path["error"])
        assert_same_calls(case, fast["calls"], path["calls"])
        assert path["reads"] in ([], [video]), (case, path["reads"])
        # Not vacuous: wherever the model read the video without error, it read our proxy.
        if path["reads"] and not path["error"]:
            assert len(fast["reads"]) == 1 and fast["reads"][0].endswith(clips.PROXY_SUFFIX), (case, fast["reads"])
            used["proxy"] += 1
        else:
            assert fast["reads"] == path["reads"], (case, fast["reads"], path["reads"])
            used["path"] += 1
    return counts


def test_groups_cover_every_known_reading():
    assert sorted(r for group in GROUPS.values() for r in group) == sorted(READINGS) == sorted(set(readings.KNOWN_MODELS.values()))


@pytest.mark.slow
@pytest.mark.parametrize("group", sorted(GROUPS))
def test_processor_gets_identical_inputs_from_path_and_proxy(group, grid, checkpoints, tmp_path):
    models = [model for reading in GROUPS[group] for model in models_of(reading)]
    lines = run_harness(tmp_path, grid, models, checkpoints)
    sampled = sum(Path(v).name in SECOND_SETTING_VIDEOS for v in grid)
    assert len(lines) == 2 * sum(len(grid) if names is None else sampled for _name, _setting, names in models)
    counts = assert_equivalent(lines)
    for reading in GROUPS[group]:  # every reading read most of the full grid through proxies
        assert counts[f"{reading}#0"]["proxy"] >= len(grid) // 2, (reading, counts)


# CG-Bench's frame rates (its frame table) plus VCR-Bench-like 7 fps and NTSC fractions.
RATES = (7, 10, 24000 / 1001, 24, 25, 30000 / 1001, 30, 50, 60000 / 1001, 60)


@pytest.mark.slow
def test_hypothesis_chosen_videos_give_identical_inputs(shared_folder, checkpoints, tmp_path_factory):
    """Videos hypothesis picks (duration, rate, size, orientation, timing), each through the first
    setting of every reading, in one harness run per example."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    # Even sizes (yuv420p), landscape or portrait. At least 80 px wide: decord 0.6.0's get_batch fails
    # on some narrower frames (16, 24, 48, 72 px measured), and then so does the model's own path.
    sizes = st.tuples(st.integers(40, 120), st.integers(16, 120)).map(lambda wh: (2 * wh[0], 2 * wh[1]))
    videos = st.fixed_dictionaries({"duration": st.floats(0.1, 90.0).map(lambda d: round(d, 2)), "fps": st.sampled_from(RATES),
                                    "size": sizes, "vfr": st.booleans(), "bframes": st.sampled_from((0, 2))})

    @settings(max_examples=2, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(spec=videos)
    def check(spec):
        (width, height), settings_ = spec["size"], {k: v for k, v in spec.items() if k != "size"}
        name = f"h_{spec['duration']}s_{spec['fps']:.3f}_{width}x{height}_{int(spec['vfr'])}_{spec['bframes']}.mp4"
        video = make_video(shared_folder / "hypothesis", name, {**settings_, "width": width, "height": height})
        models = [model for reading in sorted(READINGS) for model in models_of(reading, only=0)]  # all videos
        assert_equivalent(run_harness(tmp_path_factory.mktemp("hypothesis"), [str(video)], models, checkpoints))

    check()


@pytest.mark.slow
def test_upstream_qwen2_vl_pr_gives_the_processor_the_same_inputs(grid, checkpoints, tmp_path):
    """The upstream host PR "qwen2_vl decodes only the frames it keeps" (dev/host_prs.py),
    applied to a copy of the installed lmms-eval: lmms-eval's own Qwen2_VL, given the plain video
    path as upstream tasks give it, hands its processor the same tensors as the unpatched class, on
    the whole grid and both settings, without ever calling qwen_vl_utils' fetch_video where it
    read the video."""
    import lmms_eval

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "dev"))  # a development tool, not part of the package
    import host_prs

    patched = host_prs.patched_copy("qwen2-vl-kept-frames", Path(lmms_eval.__file__).parent, tmp_path)
    models = models_of("qwen2_vl")
    before = run_harness(tmp_path / "before", grid, models, checkpoints, modes=("plain",))
    after = run_harness(tmp_path / "after", grid, models, checkpoints, modes=("plain",), lmms_eval_tree=patched)
    assert {line["lmms_eval"] for line in after} == {str(patched / "lmms_eval" / "__init__.py")}
    assert {line["lmms_eval"] for line in before} == {lmms_eval.__file__}
    assert [(line["model"], line["video"]) for line in before] == [(line["model"], line["video"]) for line in after]
    read, skipped_decoding = 0, 0
    for was, now in zip(before, after):
        case = f"{was['model']} on {Path(was['video']).name}"
        assert now["error"] == was["error"], (case, now["error"], was["error"])
        assert_same_calls(case, now["calls"], was["calls"])
        if was["reads"] and not was["error"] and any("pixel_values_videos" in call for call in was["calls"]):
            read += 1
            skipped_decoding += not now["reads"]  # the patched model read the video without fetch_video
    assert skipped_decoding == read >= len(grid), (skipped_decoding, read)
