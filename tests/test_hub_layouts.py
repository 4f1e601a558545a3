"""`lmms-vr prepare` against a fake Hub on loopback (the real huggingface_hub client via HF_ENDPOINT),
with each benchmark in every layout the Hub serves or served; then the tasks' own resolvers find
and decode every document's media. Failures on the way give one message and a safe rerun."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from fake_hub import FakeHub
from hub_layouts import CG_LAYOUTS, VRBENCH_NESTINGS, cg_repo, vcr_repo, vrbench_repo, zip_bytes

from lmms_video_reasoning.utils.data import media_index

TOKEN = "hf_fake_token_for_the_gated_repo"


@pytest.fixture(scope="module")
def hub():
    with FakeHub() as server:
        server.token = TOKEN
        yield server


def prepare(hub: FakeHub, benchmark: str, root: Path, *extra: str, token: str | None = TOKEN) -> subprocess.CompletedProcess:
    """`lmms-vr prepare` in a fresh process (huggingface_hub reads HF_ENDPOINT at import), stdin closed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_") and not k.endswith("_ROOT")}
    env.update(HF_ENDPOINT=hub.url, HF_HOME=str(root.parent / "hf_home"),
               HF_HUB_DISABLE_TELEMETRY="1", HF_HUB_DISABLE_PROGRESS_BARS="1", **({"HF_TOKEN": token} if token else {}))
    # the repos are built from the generated sample: a subset of each release (--subset: counts printed, not checked)
    command = [sys.executable, "-m", "lmms_video_reasoning.utils.tools.cli", "prepare", benchmark, "--root", str(root), "--subset"]
    return subprocess.run([*command, *(extra or ("--keep-free", "0"))], env=env, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=300)


def assert_ok(proc: subprocess.CompletedProcess, env_name: str, root: Path) -> None:
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"export {env_name}={root.resolve()}" in proc.stdout
    assert "Traceback" not in proc.stderr


def assert_one_message(proc: subprocess.CompletedProcess, *fragments: str) -> str:
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "Traceback" not in out, out
    for fragment in fragments:
        assert fragment in out, out
    return out


# ---------------------------------------------------------------------- every layout works


def prepared(hub, repo: str, files: dict, benchmark: str, env_name: str, root: Path, monkeypatch, gated=False) -> str:
    """Publish `files`, run prepare into `root` (must succeed), point the tasks at it; return its stdout."""
    hub.add(repo, files, gated=gated)
    proc = prepare(hub, benchmark, root)
    assert_ok(proc, env_name, root)
    monkeypatch.setenv(env_name, str(root))
    media_index.forget()
    return proc.stdout


def test_vcr_bench_from_the_hub(hub, sample_dir, tmp_path, monkeypatch):
    from lmms_video_reasoning.vcr_bench import data
    from lmms_video_reasoning.vcr_bench.benchmark import MEDIA

    root = tmp_path / "root"
    out = prepared(hub, "VLM-Reasoning/VCR-Bench", vcr_repo(sample_dir), "vcr_bench", "VCR_BENCH_ROOT", root, monkeypatch)
    assert "videos  yes       4       4        0        0" in out
    docs = data.records_at()
    paths = {MEDIA.checked(doc) for doc in docs}  # resolves and decodes a first frame
    assert paths == set((root / "v1/videos/video/synthetic").glob("*.mp4")) and len(paths) == 4
    # a second run downloads nothing and extracts nothing
    before = len(hub.downloads())
    proc = prepare(hub, "vcr_bench", root)
    assert_ok(proc, "VCR_BENCH_ROOT", root)
    assert "extracting" not in proc.stdout and len(hub.downloads()) == before


def _quick_first(values):
    """The first case runs everywhere; the others are marked slow (CI runs them too)."""
    return [value if index == 0 else pytest.param(value, marks=pytest.mark.slow) for index, value in enumerate(values)]


@pytest.mark.parametrize("nesting", _quick_first(VRBENCH_NESTINGS))
def test_vrbench_split_set_from_the_hub(nesting, hub, sample_dir, tmp_path, monkeypatch):
    from lmms_video_reasoning.vrbench import data
    from lmms_video_reasoning.vrbench.benchmark import MEDIA
    from lmms_video_reasoning.vrbench.docs import flatten

    root = tmp_path / "root"
    files = vrbench_repo(sample_dir, nesting, tmp_path / "build")
    assert "(split," in prepared(hub, "OpenGVLab/VRBench", files, "vr_bench", "VRBENCH_ROOT", root, monkeypatch)
    docs = flatten(data.records_at())
    found = {MEDIA.checked(doc) for doc in docs}  # resolves and decodes a first frame
    assert found == set((root / "VRBench/videos/v001").glob("*.mp4")) and len(found) == 4
    assert not list(root.glob("*.joined.zip")) and not list((root / "v001_360p_zips").glob("*.mp4"))


@pytest.mark.parametrize("layout", _quick_first(CG_LAYOUTS))
def test_cg_bench_from_the_hub(layout, hub, sample_dir, tmp_path, monkeypatch):
    from lmms_video_reasoning.cg_bench import benchmark as binding
    from lmms_video_reasoning.cg_bench import data, task
    from lmms_video_reasoning.cg_bench.docs import META_FILE
    from lmms_video_reasoning.utils.core.roots import usable_video

    root = tmp_path / "root"
    prepared(hub, "CG-Bench/CG-Bench", cg_repo(sample_dir, layout), "cg_bench", "CGBENCH_ROOT", root, monkeypatch, gated=True)
    assert "video_meta_info.json" not in os.listdir(root)  # not on the Hub: the packaged table serves
    source = sample_dir / "cg_bench"
    docs = task.build_docs(data.records_at(split="mini"), "mcq", "mini")
    for doc in docs:
        assert binding.MEDIA.full_video(doc) == root / data.VIDEO_DIR / f"{doc['video_uid']}.mp4"
        clip = data.clue_clip_at(data.data_root(data.CG_BENCH), doc["qid"])
        assert (clip is not None) == (source / data.CLUE_DIR / f"{doc['qid']}.mp4").is_file()
        if clip is not None:
            assert clip.parent == root / data.CLUE_DIR and usable_video(data.CG_BENCH, clip) == clip
        has_srt = (source / data.SUBTITLE_DIR / f"{doc['video_uid']}.srt").is_file()
        assert (binding.MEDIA.subtitle_path(doc["video_uid"]) is not None) == has_srt
        assert binding.subtitle_flags(doc["video_uid"])["subtitles_unusable"] is None
    uid = docs[0]["video_uid"]
    assert uid not in data.meta_table(None)  # not in the official table: probed from the file
    sample_meta = json.loads((source / META_FILE).read_text())[uid]  # what the sample generator wrote
    assert data.video_meta(uid).max_frame == sample_meta["max_frame"] and data.video_meta(uid).fps == sample_meta["fps"]


# ---------------------------------------------------------------------- failures: one message, safe rerun


def test_gated_repo_without_a_token_says_how_to_get_access(hub, sample_dir, tmp_path):
    hub.add("CG-Bench/CG-Bench", cg_repo(sample_dir, "new-flat"), gated=True)
    out = assert_one_message(prepare(hub, "cg_bench", tmp_path / "root", "--keep-free", "0", token=None),
                             "CG-Bench/CG-Bench is gated", "`hf auth login`")
    assert out.count("is gated") == 1 and "huggingface-cli" not in out


def test_missing_split_part_is_named_before_any_join(hub, sample_dir, tmp_path):
    files = vrbench_repo(sample_dir, "v001_360p", tmp_path / "build")
    part = files.pop("v001_360p_zips/v001_360p.z02")
    hub.add("OpenGVLab/VRBench", files)
    root = tmp_path / "root"
    proc = assert_one_message(prepare(hub, "vr_bench", root), "v001_360p.z02 missing", "rerun `lmms-vr prepare`")
    assert proc.count("v001_360p.z02 missing") == 1
    assert not (root / "VRBench" / "videos").exists()  # nothing extracted from an incomplete set
    hub.add("OpenGVLab/VRBench", {**files, "v001_360p_zips/v001_360p.z02": part})
    assert_ok(prepare(hub, "vr_bench", root), "VRBENCH_ROOT", root)


def test_missing_byte_chunk_is_named_and_the_rerun_completes(hub, sample_dir, tmp_path):
    files = cg_repo(sample_dir, "old-sliced")
    chunk = files.pop("video_chunk_2.zip")
    hub.add("CG-Bench/CG-Bench", files, gated=True)
    root = tmp_path / "root"
    assert_one_message(prepare(hub, "cg_bench", root), "video_chunk_2.zip missing", "videos      yes")
    assert not (root / "cg_videos_720p").exists()
    hub.add("CG-Bench/CG-Bench", {**files, "video_chunk_2.zip": chunk}, gated=True)
    assert_ok(prepare(hub, "cg_bench", root), "CGBENCH_ROOT", root)


def test_corrupt_chunk_is_named_and_a_fresh_download_fixes_it(hub, sample_dir, tmp_path):
    good = cg_repo(sample_dir, "new-flat")
    bad = bytearray(good["video_chunk_02.zip"])
    bad[len(bad) // 3] ^= 0xFF  # inside a member's compressed data
    hub.add("CG-Bench/CG-Bench", {**good, "video_chunk_02.zip": bytes(bad)}, gated=True)
    root = tmp_path / "root"
    out = assert_one_message(prepare(hub, "cg_bench", root), "video_chunk_02.zip", "delete the archive and rerun")
    assert "export CGBENCH_ROOT" not in out.replace("once fixed: export", "")
    # as told: delete it and rerun (the Hub now serves a good copy)
    hub.add("CG-Bench/CG-Bench", good, gated=True)
    (root / "video_chunk_02.zip").unlink()
    assert_ok(prepare(hub, "cg_bench", root), "CGBENCH_ROOT", root)


def test_zip_bomb_is_refused_before_writing(hub, sample_dir, tmp_path):
    bomb = {"video/synthetic/zeros.mp4": bytes(60 << 20)}  # 60 MiB of zeros deflate to ~60 KB
    files = vcr_repo(sample_dir)
    base = sample_dir / "vcr_bench" / "v1" / "videos"
    members = {p.relative_to(base).as_posix(): p for p in sorted((base / "video").rglob("*.mp4"))}
    files["v1/videos/video.zip"] = zip_bytes({**members, **bomb}, zipfile.ZIP_DEFLATED)
    hub.add("VLM-Reasoning/VCR-Bench", files)
    root = tmp_path / "root"
    assert_one_message(prepare(hub, "vcr_bench", root), "zip bomb", "--max-ratio")
    assert not (root / "v1/videos/video").exists()
    hub.add("VLM-Reasoning/VCR-Bench", vcr_repo(sample_dir))  # the archive changes on the Hub: fetched again
    assert_ok(prepare(hub, "vcr_bench", root), "VCR_BENCH_ROOT", root)


def test_full_disk_stops_before_downloading(hub, sample_dir, tmp_path):
    hub.add("VLM-Reasoning/VCR-Bench", vcr_repo(sample_dir))
    root = tmp_path / "root"
    before = len(hub.downloads())
    assert_one_message(prepare(hub, "vcr_bench", root, "--keep-free", "100P"), "not enough free disk",
                       "nothing was downloaded")
    assert len(hub.downloads()) == before
    assert_ok(prepare(hub, "vcr_bench", root), "VCR_BENCH_ROOT", root)


def test_hostile_member_path_is_refused(hub, sample_dir, tmp_path):
    files = vcr_repo(sample_dir, {"../../escaped.mp4": b"not a video"})
    hub.add("VLM-Reasoning/VCR-Bench", files)
    root = tmp_path / "deep" / "root"
    assert_one_message(prepare(hub, "vcr_bench", root), "would be written outside the data root")
    assert not list(tmp_path.rglob("escaped.mp4"))
    hub.add("VLM-Reasoning/VCR-Bench", vcr_repo(sample_dir))
    assert_ok(prepare(hub, "vcr_bench", root), "VCR_BENCH_ROOT", root)


def test_delete_archives_after_verified_extraction(hub, sample_dir, tmp_path):
    hub.add("OpenGVLab/VRBench", vrbench_repo(sample_dir, "v001", tmp_path / "build"))
    root = tmp_path / "root"
    assert_ok(prepare(hub, "vr_bench", root, "--keep-free", "0", "--delete-archives"), "VRBENCH_ROOT", root)
    assert not list((root / "v001_360p_zips").glob("v001_360p.*"))
    before = len(hub.downloads())
    proc = prepare(hub, "vr_bench", root)  # the archives are not fetched again while the videos are in place
    assert_ok(proc, "VRBENCH_ROOT", root)
    assert len(hub.downloads()) == before


def test_the_login_command_named_exists_in_the_installed_hub_client():
    """The advice names a command of the huggingface_hub this package installs (`huggingface-cli`
    is its deprecated name)."""
    from lmms_video_reasoning.utils.core.roots import HF_LOGIN, HF_WHOAMI

    hf = Path(sys.executable).with_name(HF_LOGIN.split()[0])
    for command in (HF_LOGIN, HF_WHOAMI):
        proc = subprocess.run([str(hf), *command.split()[1:], "--help"], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_space_check_covers_download_and_extraction(hub, sample_dir, tmp_path):
    """The disk holds the download but not the download plus its extraction: `prepare` stops before
    downloading anything, naming both sizes. (A full disk cannot be made here: `shutil.disk_usage`
    reports a free size in the child process; the Hub and the client are real.)"""
    files = vcr_repo(sample_dir)
    hub.add("VLM-Reasoning/VCR-Bench", files)
    total = sum(len(data) for data in files.values())
    archive = len(files["v1/videos/video.zip"])
    free = total + archive // 2  # the download fits, the extraction (about the archive's size) does not
    root = tmp_path / "root"
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_") and not k.endswith("_ROOT")}
    env.update(HF_ENDPOINT=hub.url, HF_HOME=str(tmp_path / "hf_home"), HF_HUB_DISABLE_TELEMETRY="1", HF_TOKEN=TOKEN)
    code = ("import collections, shutil, sys\n"
            f"shutil.disk_usage = lambda path: collections.namedtuple('usage', 'total used free')({free}, 0, {free})\n"
            "from lmms_video_reasoning.utils.tools.cli import main\nsys.exit(main(sys.argv[1:]))\n")
    before = len(hub.downloads())
    proc = subprocess.run([sys.executable, "-c", code, "prepare", "vcr_bench", "--root", str(root), "--subset", "--keep-free", "0"],
                          env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300)
    out = assert_one_message(proc, "not enough free disk", "extracting the archives about", "nothing was downloaded")
    assert len(hub.downloads()) == before and not (root / "v1" / "videos" / "video.zip").exists(), out
