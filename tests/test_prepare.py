"""`lmms-vr prepare`: archives joined and extracted once, media verified and counted (offline)."""

from __future__ import annotations

import random
import subprocess
import zipfile

import pytest

from lmms_video_reasoning.utils import prepare
from lmms_video_reasoning.utils.data import DataError
from lmms_video_reasoning.utils.synthetic import write_video


def test_verify_counts_present_missing_unreadable(tmp_path):
    root = tmp_path / "root"
    (root / "videos" / "nested").mkdir(parents=True)
    write_video(root / "videos" / "good.mp4", duration=1.0)
    write_video(root / "videos" / "nested" / "moved.mp4", duration=1.0)  # found by name
    (root / "videos" / "empty.mp4").write_bytes(b"")
    (root / "videos" / "junk.mp4").write_bytes(b"not a video at all" * 100)
    report = prepare.verify_media(root, ["videos/good.mp4", "videos/moved.mp4", "videos/empty.mp4",
                                         "videos/junk.mp4", "videos/absent.mp4"])
    assert report.present == 2
    assert report.missing == ["videos/absent.mp4"]
    assert sorted(p.rsplit("/", 1)[1] for p in report.unreadable) == ["empty.mp4", "junk.mp4"]
    assert not report.ok
    assert "2 present, 1 missing, 2 unreadable" in report.summary()


def test_plain_and_split_zips_are_extracted_once(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    payload = tmp_path / "payload"
    (payload / "video").mkdir(parents=True)
    for i in range(3):
        (payload / "video" / f"v{i}.bin").write_bytes(random.Random(i).randbytes(120_000))
    with zipfile.ZipFile(root / "plain.zip", "w") as zf:
        zf.write(payload / "video" / "v0.bin", "plain/v0.bin")
    # a real split archive made by Info-ZIP: big.z01, big.z02, ..., big.zip
    subprocess.run(["zip", "-q", "-r", "-s", "100k", str(root / "big.zip"), "video"], cwd=payload, check=True)
    assert prepare._split_parts(root / "big.zip"), "zip -s should have produced parts"

    extracted = prepare.extract_archives(root)
    assert {p.name for p in extracted} == {"plain.zip", "big.zip"}
    assert (root / "plain" / "v0.bin").read_bytes() == (payload / "video" / "v0.bin").read_bytes()
    for i in range(3):
        assert (root / "video" / f"v{i}.bin").read_bytes() == (payload / "video" / f"v{i}.bin").read_bytes()
    assert not list(root.glob("*.joined.zip"))
    assert prepare.extract_archives(root) == []  # stamped: not again


def test_truncated_zip_is_a_clear_error(tmp_path):
    (tmp_path / "bad.zip").write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(DataError, match="bad.zip is not a valid zip"):
        prepare.extract_archives(tmp_path)


def test_download_failure_offline_is_explained(tmp_path, monkeypatch):
    from lmms_video_reasoning.utils.data import CG_BENCH

    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    with pytest.raises(DataError, match="download from CG-Bench/CG-Bench failed.*--verify-only"):
        prepare.download(CG_BENCH, ["cgbench_mini.json"], tmp_path)


def test_chunked_zip_is_joined_in_numeric_order(tmp_path):
    blob = tmp_path / "whole.zip"
    with zipfile.ZipFile(blob, "w") as zf:
        zf.writestr("cg_videos_720p/a.mp4", random.Random(1).randbytes(50_000))
    data = blob.read_bytes()
    root = tmp_path / "root"
    root.mkdir()
    size = len(data) // 11 + 1
    for number, start in enumerate(range(0, len(data), size), 1):  # chunk_10 sorts before chunk_2 as text
        (root / f"video_chunk_{number}.zip").write_bytes(data[start:start + size])
    assert len(prepare.chunk_groups(root)[root / "video.zip"]) == 11
    assert [p.name for p in prepare.extract_archives(root)] == ["video.zip"]
    assert (root / "cg_videos_720p" / "a.mp4").read_bytes() == random.Random(1).randbytes(50_000)


@pytest.mark.parametrize("benchmark", ["vcr_bench", "vr_bench", "cg_bench"])
def test_prepare_verify_only_on_the_sample_layout(benchmark, tmp_path, capsys):
    from lmms_video_reasoning.utils.cli import main
    from lmms_video_reasoning.utils.sample import write_sample

    name = "vrbench" if benchmark == "vr_bench" else benchmark
    root = write_sample(tmp_path, (name,))[name]
    assert main(["prepare", benchmark, "--root", str(root), "--verify-only"]) == 0
    out = capsys.readouterr().out
    assert " 0 missing, 0 unreadable" in out
    # break one required video: the status must say so
    victim = next(p for p in sorted(root.rglob("*.mp4")) if "clue" not in str(p))
    victim.write_bytes(b"garbage" * 10)
    assert main(["prepare", benchmark, "--root", str(root), "--verify-only"]) == 1
    assert "1 unreadable" in capsys.readouterr().out


def test_atomic_target_replaces_on_success_and_cleans_up_on_failure(tmp_path):
    from lmms_video_reasoning.utils.files import atomic_target

    target = tmp_path / "out.zip"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError):
        with atomic_target(target) as tmp:
            assert tmp.suffix == ".zip" and tmp.parent == tmp_path
            tmp.write_bytes(b"partial")
            raise RuntimeError("writer died")
    assert target.read_bytes() == b"old" and list(tmp_path.iterdir()) == [target]
    with atomic_target(target) as tmp:
        tmp.write_bytes(b"new")
    assert target.read_bytes() == b"new" and list(tmp_path.iterdir()) == [target]
