"""Proxy clips for video-native models (utils/lmms/model_video.py): the model ends with the same frames.

- Proxies are cached; chat models' frames and timing (their readers as they call them) match;
  lmms-eval's own classes on a grid of videos: tests/test_model_equivalence.py.
- The proxy cache stays within its bound with two processes filling it at once.
- End to end (slow): the tiny offline Qwen2-VL through `python -m lmms_eval`: the processor
  builds identical tensors with the proxy and with `LMMS_VR_VIDEO_INPUT=path`, which
  restores today's behaviour (no proxy made).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from fractions import Fraction

import numpy as np
import pytest
from lmms_video_reasoning.utils.lmms import model_video as mv
from lmms_video_reasoning.utils.lmms import model_readings as readings, proxy_clips as clips
from lmms_video_reasoning.utils.media import synthetic as syn
from lmms_video_reasoning.vrbench import frames as vr_frames

READINGS = {
    "qwen2_vl": readings.Reading("qwen2_vl", 32, 602112, 3136),
    "qwen2_5_vl": readings.Reading("qwen2_5_vl", 32, 1605632, 200704),
    "qwen2_vl_odd_budget": readings.Reading("qwen2_vl", 15, 602112, 3136),
    "llava_onevision": readings.Reading("llava_onevision", 32),
}


@pytest.fixture(scope="module")
def long_ish_video(tmp_path_factory) -> Path:
    """Textured, B-frames, index-stamped: 45 s at 30 fps (qwen reads 90 frames of 1350)."""
    out = tmp_path_factory.mktemp("model_video") / "long_ish.mp4"
    return syn.write_video(out, 45, fps=30, width=320, height=240, bframes=3, textured=True, stamp_index=True)


def llava_load_video(path: str, max_frames_num: int) -> np.ndarray:
    """lmms-eval's own ``Llava_OneVision.load_video`` (its decord reader) on ``path``."""
    from lmms_eval.models.simple.llava_onevision import Llava_OneVision

    return Llava_OneVision.load_video(object.__new__(Llava_OneVision), path, max_frames_num)


@pytest.mark.parametrize("name", sorted(READINGS))
def test_proxy_is_cached_and_holds_the_composed_frames(name, long_ish_video, tmp_path, monkeypatch):
    """The proxy lands in the cache folder and a second request is a hit. Whether each model's own
    code reads the same tensors from it is tests/test_model_equivalence.py's (lmms-eval's classes)."""
    monkeypatch.setenv(clips.CACHE_DIR_ENV, str(tmp_path / "proxies"))
    reading = READINGS[name]
    proxy = mv.prepare(long_ish_video, mv.Request(reading))
    assert proxy is not None and Path(proxy).parent == tmp_path / "proxies" and proxy.endswith(clips.PROXY_SUFFIX)
    if reading.model == "llava_onevision":  # native size: the index stamps survive, and the real reader agrees
        original, via_proxy = llava_load_video(str(long_ish_video), reading.max_frames), llava_load_video(proxy, reading.max_frames)
        assert np.array_equal(original, via_proxy)
        assert [syn.read_index_stamp(f) for f in via_proxy] == list(readings.model_frames(reading, 1350, 30.0, 320, 240).indices)
    # A second request is a cache hit: same file, not rewritten.
    mtime = Path(proxy).stat().st_mtime_ns
    assert mv.prepare(long_ish_video, mv.Request(reading)) == proxy and Path(proxy).stat().st_mtime_ns >= mtime


def chat_model(name: str, **settings):
    """An lmms-eval model instance (no checkpoint) with its constructor's defaults + ``settings``."""
    from lmms_eval.models.chat.qwen2_5_vl import Qwen2_5_VL as Qwen2_5_VLChat
    from lmms_eval.models.chat.qwen3_vl import Qwen3_VL as Qwen3_VLChat

    from lmms_eval.models.simple.qwen3_vl import Qwen3_VL

    model = object.__new__({"qwen2_5_vl_chat": Qwen2_5_VLChat, "qwen3_vl_chat": Qwen3_VLChat, "qwen3_vl": Qwen3_VL}[name])
    defaults = {"max_num_frames": 32, "fps": None, "max_pixels": 1605632, "min_pixels": 256 * 28 * 28}
    if name.startswith("qwen3_vl"):
        defaults["total_pixels"] = None
    for key, value in {**defaults, **settings}.items():
        setattr(model, key, value)
    return model


def qwen_reads(path: str, reading: readings.Reading, total: int) -> tuple[np.ndarray, dict, dict]:
    """What qwen_vl_utils (real, decord) gives for ``path`` with the video kwargs ``reading``'s
    model passes for a video of ``total`` frames: frames, video metadata, processor kwargs. The
    same kwargs on the source and on its proxy; that they are the model's own is
    tests/test_model_equivalence.py's (lmms-eval's classes)."""
    from qwen_vl_utils import process_vision_info

    kwargs, patch = readings._video_kwargs(reading, total)
    messages = [{"role": "user", "content": [{"type": "video", "video": path, **kwargs}]}]
    _images, videos, video_kwargs = process_vision_info(messages, return_video_kwargs=True, return_video_metadata=True,
                                                        image_patch_size=patch)
    frames, metadata = videos[0]
    return frames.numpy(), metadata, video_kwargs


CHAT_CASES = {
    "qwen2_5_vl_chat": ("qwen2_5_vl_chat", {}),
    "qwen2_5_vl_chat_fps1": ("qwen2_5_vl_chat", {"fps": 1.0}),
    "qwen3_vl_chat": ("qwen3_vl_chat", {}),
    "qwen3_vl_chat_total_pixels": ("qwen3_vl_chat", {"max_num_frames": 48, "total_pixels": 20_000_000}),
    "qwen3_vl_simple": ("qwen3_vl", {}),
    "qwen3_vl_simple_fps2": ("qwen3_vl", {"fps": 2.0, "max_num_frames": 40}),
}


@pytest.mark.parametrize("case", sorted(CHAT_CASES))
def test_chat_model_reads_the_same_frames_and_timing_from_the_proxy(case, long_ish_video, tmp_path, monkeypatch):
    """Chat models pass the reader's `video_metadata` (fps, frame indices, count) to the processor:
    the timed proxy must give back the frames AND that metadata."""
    monkeypatch.setenv(clips.CACHE_DIR_ENV, str(tmp_path / "proxies"))
    name, settings = CHAT_CASES[case]
    model = chat_model(name, **settings)
    reading = readings.reading_of(model)
    assert reading is not None and reading.model == name and reading.timed
    proxy = mv.prepare(long_ish_video, mv.Request(reading))
    assert proxy is not None and proxy.endswith(clips.PROXY_SUFFIX)
    frames, metadata, kwargs = qwen_reads(str(long_ish_video), reading, 1350)
    proxy_frames, proxy_metadata, proxy_kwargs = qwen_reads(proxy, reading, 1350)
    assert frames.shape == proxy_frames.shape and np.array_equal(frames, proxy_frames), case
    assert proxy_metadata == metadata and proxy_kwargs == kwargs, (proxy_metadata, metadata)
    assert metadata["total_num_frames"] == 1350 and metadata["fps"] == 30.0
    # Placeholders are tiny: the proxy is about the size of its real frames.
    real = len(metadata["frames_indices"])
    assert Path(proxy).stat().st_size < (real * frames[0].size + 1350 * 1200), Path(proxy).stat().st_size


@pytest.mark.parametrize("kind", ["ntsc", "vfr", "vfr_large_denominator"])
def test_timed_proxy_keeps_a_fractional_rate(kind, tmp_path, monkeypatch):
    """29.97 fps (30000/1001), or variable frame timing (an average rate such as 24.376, or
    66256000/1104043: a denominator over a million, found by hypothesis): the proxy reports the
    same count and the same float rate to decord, to the last bit."""
    import decord

    monkeypatch.setenv(clips.CACHE_DIR_ENV, str(tmp_path / "proxies"))
    if kind == "ntsc":
        source = syn.write_video(tmp_path / "ntsc.mp4", 8, fps=30000 / 1001, width=160, height=120, stamp_index=True)
    elif kind == "vfr":
        source = syn.write_video(tmp_path / "vfr.mp4", 8, fps=24, width=160, height=120, vfr=True, stamp_index=True)
    else:
        source = syn.write_video(tmp_path / "vfr2.mp4", 69.01, fps=60000 / 1001, width=80, height=32, vfr=True, textured=True)
    model = chat_model("qwen2_5_vl_chat", max_num_frames=16)
    proxy = mv.prepare(source, mv.Request(readings.reading_of(model)))
    assert proxy is not None
    original, via_proxy = decord.VideoReader(str(source)), decord.VideoReader(proxy)
    assert (len(via_proxy), via_proxy.get_avg_fps()) == (len(original), original.get_avg_fps())
    frames, metadata, _ = qwen_reads(str(source), readings.reading_of(model), len(original))
    proxy_frames, proxy_metadata, _ = qwen_reads(proxy, readings.reading_of(model), len(original))
    assert proxy_metadata == metadata and np.array_equal(frames, proxy_frames)
    # A proxy whose container would declare another rate is never used (and never left in the cache).
    monkeypatch.setenv(clips.CACHE_DIR_ENV, str(tmp_path / "other"))
    monkeypatch.setattr(clips, "source_rate", lambda fps: Fraction(round(fps)))
    assert mv.prepare(source, mv.Request(readings.reading_of(model))) is None
    assert not list((tmp_path / "other").glob("*" + clips.PROXY_SUFFIX))


def test_unknown_chat_models_and_impossible_budgets_get_the_path(long_ish_video, tmp_path, monkeypatch):
    from lmms_eval.models.chat.qwen2_5_vl import Qwen2_5_VL as Qwen2_5_VLChat

    monkeypatch.setenv(clips.CACHE_DIR_ENV, str(tmp_path / "proxies"))

    class Custom(Qwen2_5_VLChat):  # a subclass reads like its parent
        pass

    custom = object.__new__(Custom)
    custom.max_num_frames, custom.fps, custom.max_pixels, custom.min_pixels = 8, None, 1605632, 200704
    assert readings.reading_of(custom) == readings.Reading("qwen2_5_vl_chat", 8, 1605632, 200704)
    # Qwen3-VL asks for exactly max_num_frames; more than the video has is its own error, so no proxy.
    short = syn.write_video(tmp_path / "short.mp4", 1, fps=10, width=160, height=120)
    assert mv.prepare(short, mv.Request(readings.reading_of(chat_model("qwen3_vl_chat")))) is None


def test_protocol_frames_proxy_holds_exactly_those_frames(long_ish_video, tmp_path, monkeypatch):
    """VRBench protocol: 16 segment midpoints at 224x224 (OpenCV bilinear) as a video."""
    import decord
    from lmms_video_reasoning.utils.media.frame_decoder import read_frames

    monkeypatch.setenv(clips.CACHE_DIR_ENV, str(tmp_path / "proxies"))
    indices = vr_frames.indices(1350, 16)
    proxy = mv.prepare(long_ish_video, mv.Request(None, tuple(indices), vr_frames.SIZE))
    frames = decord.VideoReader(proxy).get_batch(list(range(16))).asnumpy()
    expected = read_frames(long_ish_video, indices, size=vr_frames.SIZE, as_array=True)
    assert np.array_equal(frames, expected)


def test_plain_path_setting_and_unknown_models_get_the_path(long_ish_video, tmp_path, monkeypatch):
    monkeypatch.setenv(clips.CACHE_DIR_ENV, str(tmp_path / "proxies"))
    checked = []
    assert mv.video_for_model(long_ish_video, on_broken=lambda p: checked.append(p) or p) == str(long_ish_video)
    assert checked == [long_ish_video]  # outside a known model: the path, checked
    monkeypatch.setenv(mv.INPUT_ENV, "path")
    assert mv.video_for_model(long_ish_video, frames=[0, 1], size=(224, 224)) == str(long_ish_video)
    assert not (tmp_path / "proxies").exists()
    monkeypatch.setenv(mv.INPUT_ENV, "proxy-please")
    with pytest.raises(ValueError, match=mv.INPUT_ENV):
        mv.video_for_model(long_ish_video)


def as_qwen2_vl(call):
    """Run `call` the way lmms-eval's qwen2_vl calls a hook: from a method of a Qwen2_VL instance."""
    from lmms_eval.models.simple.qwen2_vl import Qwen2_VL

    class Stub(Qwen2_VL):
        def __init__(self):  # lmms-eval's defaults, no checkpoint
            self.max_num_frames, self.max_pixels, self.min_pixels = 32, 602112, 3136

        def generate_until(self, requests):
            return call()

    return Stub().generate_until([])


def test_broken_file_is_reported_by_the_decode_itself(tmp_path, monkeypatch, long_ish_video):
    from lmms_video_reasoning.utils.core.roots import MediaError

    monkeypatch.setenv(clips.CACHE_DIR_ENV, str(tmp_path / "proxies"))
    broken = tmp_path / "broken.mp4"
    broken.write_bytes(long_ish_video.read_bytes()[: 20_000])
    with pytest.raises(MediaError, match="broken.mp4"):
        as_qwen2_vl(lambda: mv.video_for_model(broken))
    checks = []
    with pytest.raises(MediaError, match="advice"):  # the benchmark's own check words the error when it can

        def check(path):
            checks.append(path)
            raise MediaError(f"{path.name}: advice")

        as_qwen2_vl(lambda: mv.video_for_model(broken, on_broken=check))
    assert checks == [broken]


def test_vrbench_video_mode_gives_the_protocol_frames_as_a_clip(sample_dir, tmp_path, monkeypatch):
    """VRBench's default for video models: `num_frames` segment midpoints at 224x224, as a video."""
    import decord
    from lmms_video_reasoning.utils.media.frame_decoder import read_frames
    from lmms_video_reasoning.utils.media.frame_table import probe
    from lmms_video_reasoning.vrbench import benchmark as binding

    monkeypatch.setenv("VRBENCH_ROOT", str(sample_dir / "vrbench"))
    monkeypatch.setenv(clips.CACHE_DIR_ENV, str(tmp_path / "proxies"))
    doc = binding.build_docs("judge", "default")[0]
    source = binding.data.resolve_video(doc["video_path"])
    [clip] = as_qwen2_vl(lambda: binding.doc_to_visual(doc, {"visual_mode": "video", "num_frames": 8}))
    assert Path(clip).parent == tmp_path / "proxies"
    indices = vr_frames.indices(probe(source).total_frames, 8)
    expected = read_frames(source, indices, size=vr_frames.SIZE, as_array=True)
    assert np.array_equal(decord.VideoReader(clip).get_batch(list(range(8))).asnumpy(), expected)
    # `video_frames: model`: the model's own frames (a proxy for qwen2_vl); outside a model run: the path.
    [own] = as_qwen2_vl(lambda: binding.doc_to_visual(doc, {"visual_mode": "video", "video_frames": "model"}))
    assert own != clip and own.endswith(clips.PROXY_SUFFIX)
    assert binding.doc_to_visual(doc, {"visual_mode": "video"}) == [str(source)]


_FILL = """
import json, os, sys
from lmms_video_reasoning.utils.lmms import model_readings as readings, model_video as mv, proxy_clips as clips
path, worker = sys.argv[1], int(sys.argv[2])
cache = clips.ProxyCache(clips.cache_dir(), clips.cache_limit_bytes())
sizes = []
for n in range(4):
    mv.prepare(path, mv.Request(readings.Reading("qwen2_vl", 4 + 2 * n + 20 * worker, 602112, 3136)), cache)
    sizes.append(sum(size for _, size, _ in cache.entries()))
print(json.dumps(sizes))
"""


def test_cache_stays_within_its_bound_with_two_processes(tmp_path):
    small = syn.write_video(tmp_path / "small.mp4", 20, fps=10, width=160, height=120)
    folder = tmp_path / "proxies"
    one = clips.ProxyCache(folder, 1 << 40)
    env = {**os.environ, clips.CACHE_DIR_ENV: str(folder)}
    # Bound: about three clips of the largest kind written here.
    probe = mv.prepare(small, mv.Request(readings.Reading("qwen2_vl", 38, 602112, 3136)), one)
    clip = Path(probe).stat().st_size
    limit_mb = 3 * clip / 2**20
    env[clips.CACHE_MB_ENV] = str(limit_mb)
    procs = [subprocess.Popen([sys.executable, "-c", _FILL, str(small), str(w)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for w in (0, 1)]
    outputs = [p.communicate(timeout=300) for p in procs]
    for proc, (out, err) in zip(procs, outputs):
        assert proc.returncode == 0, err[-3000:]
    seen = [size for out, _ in outputs for size in json.loads(out.strip().splitlines()[-1])]
    limit = limit_mb * 2**20
    # Each process measured the folder after each of its writes: never above the bound by more
    # than the clip being written by the other process at that moment.
    assert max(seen) <= limit + clip, (seen, limit)
    held = sum(size for _, size, _ in one.entries())
    assert held <= limit, (held, limit)
    assert not [p for p in folder.iterdir() if ".tmp" in p.name], "a temporary file was left behind"
    assert len(one.entries()) >= 1


def test_run_reports_proxies_made_again_and_the_bound_that_keeps_them(tmp_path, monkeypatch):
    """lmms-eval orders documents by prompt, not by video: a bound too small for the run evicts a
    proxy before the video's next question. The exit line counts that and names the setting."""
    import atexit

    videos = [syn.write_video(tmp_path / f"v{n}.mp4", 6, fps=10, width=160, height=120, textured=True) for n in range(2)]
    reading = readings.Reading("qwen2_vl", 8, 602112, 3136)
    clip = Path(mv.prepare(videos[0], mv.Request(reading), clips.ProxyCache(tmp_path / "sizing", 1 << 40))).stat().st_size
    for limit, expect_again in ((int(1.5 * clip), 1), (1 << 40, 0)):
        monkeypatch.setattr(mv, "usage", mv._Usage())
        cache = clips.ProxyCache(tmp_path / f"cache-{limit}", limit)
        for n in (0, 0, 1, 0):  # a second question on video 0, then video 1, then video 0 again
            assert mv.prepare(videos[n], mv.Request(reading), cache) is not None
        line = mv.usage.summary(limit)
        assert mv.usage.made_again == expect_again and len(mv.usage.made) == 2, line
        assert f"{expect_again} made again" in line and ("reused from the cache" in line)
        assert (f"raise {clips.CACHE_MB_ENV} to at least" in line) == bool(expect_again), line
        atexit.unregister(mv.usage.report)  # this test's counts are not the test process's to report
    assert mv._Usage().summary(1 << 30) is None  # nothing made: nothing to report


# ---------------------------------------------------------------------- end to end (slow)


@pytest.mark.slow
def test_tiny_qwen2_vl_receives_the_same_tensors_with_and_without_proxies(tmp_path):
    from lmms_cli import run_lmms_eval
    from lmms_video_reasoning.utils.tools.sample import env_for, write_sample
    from processor_probe import processor_calls, processor_probe_env
    from tiny_models import build_qwen2_vl

    sample = tmp_path / "sample"
    write_sample(sample, ("vcr_bench",))
    checkpoint = build_qwen2_vl(tmp_path / "tiny_qwen2_vl")
    args = f"pretrained={checkpoint},device=cpu,device_map=cpu"
    runs = {}
    for mode in ("fast", "path"):
        folder = tmp_path / mode
        env = {**env_for(sample, ("vcr_bench",)), **processor_probe_env(folder / "probe"),
               mv.INPUT_ENV: mode, clips.CACHE_DIR_ENV: str(folder / "proxies")}
        results = run_lmms_eval("vcr_cot", folder / "out", model="qwen2_vl", model_args=args, env=env,
                                extra=["--limit", "6"], log_samples=False)
        runs[mode] = {"calls": processor_calls(folder / "probe"), "proxies": sorted((folder / "proxies").glob("*.avi")),
                      "log": results["_log"]}
    fast, path = runs["fast"], runs["path"]
    assert len(fast["calls"]) == len(path["calls"]) == 6
    # One proxy per video (documents sharing a video share it); none with plain paths.
    assert fast["proxies"] and not path["proxies"], (fast["proxies"], path["proxies"])
    for n, (a, b) in enumerate(zip(fast["calls"], path["calls"])):
        assert np.array_equal(a["video_grid_thw"], b["video_grid_thw"]), n
        assert np.array_equal(a["input_ids"], b["input_ids"]), n
        assert np.array_equal(a["pixel_values_videos"], b["pixel_values_videos"]), n
    assert "Failed to process video" not in fast["log"] + path["log"]


_VERSION_GUARD = r"""
import importlib.metadata, logging, sys
real, fake = importlib.metadata.version, dict(arg.split("=") for arg in sys.argv[2:])
importlib.metadata.version = lambda name: fake.get(name) or real(name)  # what this process reports as installed
logging.basicConfig(level=logging.INFO, format="LOG %(message)s")
from lmms_eval.models.simple.qwen2_vl import Qwen2_VL
from lmms_video_reasoning.utils.lmms import model_video as mv

class Stub(Qwen2_VL):
    def __init__(self):  # lmms-eval's defaults, no checkpoint
        self.max_num_frames, self.max_pixels, self.min_pixels, self.batch_size_per_gpu = 32, 602112, 3136, 1

    def generate_until(self, requests):  # two questions on the same video
        return [mv.video_for_model(sys.argv[1]) for _ in range(2)]

print("RESULT", *Stub().generate_until([]))
"""


@pytest.mark.parametrize("installed", [None, "lmms-eval=0.7.4", "qwen-vl-utils=0.0.15"])
def test_fast_path_is_off_on_unverified_versions(installed, tmp_path):
    """The readings are facts about lmms-eval 0.7.3 + qwen-vl-utils 0.0.14: another reported
    version hands the model the original path, says so in one log line, and the exit report counts it."""
    source = syn.write_video(tmp_path / "clip.mp4", 3, fps=10, width=64, height=48)
    env = {**os.environ, clips.CACHE_DIR_ENV: str(tmp_path / "proxies")}
    env.pop(mv.INPUT_ENV, None)
    done = subprocess.run([sys.executable, "-c", _VERSION_GUARD, str(source), *([installed] if installed else [])],
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    results = done.stdout.split("RESULT", 1)[1].split()
    guard_lines = [line for line in done.stderr.splitlines() if "video proxies are off for qwen2_vl" in line]
    if installed is None:
        assert all(r.endswith(clips.PROXY_SUFFIX) for r in results) and len(results) == 2, results
        assert not guard_lines, guard_lines
        return
    name, version = installed.split("=")
    assert results == [str(source)] * 2, results
    assert len(guard_lines) == 1 and f"{name} {version}" in guard_lines[0], guard_lines  # once per model, naming the version
    assert not (tmp_path / "proxies").exists()
    assert "2 handed the original path (qwen2_vl: 2 on unverified package versions)" in done.stderr, done.stderr[-2000:]


def test_settings_whose_selection_depends_on_batch_mates_or_backend_get_no_reading(tmp_path, monkeypatch):
    """qwen2_vl / qwen2_5_vl select frames of the batch's first video only, and chat qwen2_5_vl
    probes only the first: batch size 1 is the known reading. llava_onevision's pyav reader
    samples differently from its decord one. Such inputs get the path, counted at exit."""
    import atexit

    from lmms_eval.models.simple.llava_onevision import Llava_OneVision
    from lmms_eval.models.simple.qwen2_vl import Qwen2_VL

    qwen = object.__new__(Qwen2_VL)
    qwen.max_num_frames, qwen.max_pixels, qwen.min_pixels, qwen.batch_size_per_gpu = 32, 602112, 3136, 1
    assert readings.reading_of(qwen) == readings.Reading("qwen2_vl", 32, 602112, 3136)
    qwen.batch_size_per_gpu = 2
    assert readings.reading_of(qwen) is None

    class Batched(Qwen2_VL):
        def __init__(self):  # lmms-eval's defaults, batch size 2, no checkpoint
            self.max_num_frames, self.max_pixels, self.min_pixels, self.batch_size_per_gpu = 32, 602112, 3136, 2

        def generate_until(self, requests):
            return mv.video_for_model(requests[0])

    source = syn.write_video(tmp_path / "clip.mp4", 2, fps=10, width=64, height=48)
    monkeypatch.setenv(clips.CACHE_DIR_ENV, str(tmp_path / "proxies"))
    monkeypatch.setattr(mv, "usage", mv._Usage())
    assert Batched().generate_until([source]) == str(source)
    assert list(mv.usage.paths) == [("qwen2_vl", "with settings the video alone does not decide (batch size, reader, subclass)")]
    assert "1 handed the original path" in mv.usage.summary(1 << 30)
    atexit.unregister(mv.usage.report)  # this test's counts are not the test process's to report
    llava = object.__new__(Llava_OneVision)
    llava.max_frames_num, llava.video_decode_backend = 16, "decord"
    assert readings.reading_of(llava) == readings.Reading("llava_onevision", 16)
    llava.video_decode_backend = "pyav"
    assert readings.reading_of(llava) is None


@pytest.mark.parametrize("backend", ["torchcodec", "torchvision"])
def test_another_qwen_vl_utils_reader_gets_the_path(backend, tmp_path, monkeypatch):
    """qwen_vl_utils prefers torchcodec when installed (or FORCE_QWENVL_VIDEO_READER): its frame
    count and rate come from elsewhere, so the readings (proven with decord) do not apply."""
    from qwen_vl_utils import vision_process

    source = syn.write_video(tmp_path / "clip.mp4", 3, fps=10, width=64, height=48)
    monkeypatch.setenv(clips.CACHE_DIR_ENV, str(tmp_path / "proxies"))
    monkeypatch.setattr(mv, "usage", mv._Usage())
    assert as_qwen2_vl(lambda: mv.video_for_model(source)).endswith(clips.PROXY_SUFFIX)  # decord: a proxy
    monkeypatch.setattr(vision_process, "get_video_reader_backend", lambda: backend)
    assert as_qwen2_vl(lambda: mv.video_for_model(source)) == str(source)
    assert mv.usage.paths == {("qwen2_vl", "with a qwen-vl-utils video reader other than decord"): 1}
    import atexit

    atexit.unregister(mv.usage.report)  # this test's counts are not the test process's to report
