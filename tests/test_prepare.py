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
