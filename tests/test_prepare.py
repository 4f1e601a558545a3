"""`lmms-vr prepare` pieces in-process: archive shapes, limits, stamps, resolvers, the table
(the Hub end to end is in test_hub_layouts.py)."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import types
import zipfile
from pathlib import Path

import pytest

from bench_scoring import score_records
from lmms_video_reasoning.utils.data import archives
from lmms_video_reasoning.utils.data import media_index
from lmms_video_reasoning.utils.data import prepare
from lmms_video_reasoning.utils.core import registry
from lmms_video_reasoning.utils.core.roots import DataError, MediaError
from lmms_video_reasoning.utils.media.synthetic import write_video

KEEP = types.SimpleNamespace(extraction_target=lambda archive, member: member)  # a benchmark keeping the nesting
LIMITS = archives.Limits(keep_free=0)


def _payload(tmp_path, count=3, size=120_000) -> Path:
    payload = tmp_path / "payload"
    (payload / "video").mkdir(parents=True)
    for i in range(count):
        (payload / "video" / f"v{i}.bin").write_bytes(random.Random(i).randbytes(size))
    return payload


@pytest.mark.parametrize("zip64", [False, True])
def test_plain_and_split_zips_are_extracted_once(tmp_path, zip64):
    root = tmp_path / "root"
    root.mkdir()
    payload = _payload(tmp_path)
    with zipfile.ZipFile(root / "plain.zip", "w") as zf:
        zf.write(payload / "video" / "v0.bin", "plain/v0.bin")
    # a real split archive made by Info-ZIP: big.z01, big.z02, ..., big.zip (-fz: ZIP64 records)
    subprocess.run(["zip", "-q", "-r", *(["-fz"] if zip64 else []), "-s", "100k", str(root / "big.zip"), "video"],
                   cwd=payload, check=True, stdin=subprocess.DEVNULL)
    found = {a.label: a for a in archives.find_archives(root)}
    assert found["big.zip"].kind == "split" and len(found["big.zip"].parts) >= 3
    assert found["plain.zip"].kind == "zip"

    report = prepare.extract_all(root, KEEP, LIMITS)
    assert sorted(report.extracted) == ["big.zip", "plain.zip"] and not report.failed
    assert (root / "plain" / "v0.bin").read_bytes() == (payload / "video" / "v0.bin").read_bytes()
    for i in range(3):
        assert (root / "video" / f"v{i}.bin").read_bytes() == (payload / "video" / f"v{i}.bin").read_bytes()
    assert not list(root.glob("*.joined.zip"))
    again = prepare.extract_all(root, KEEP, LIMITS)
    assert again.extracted == [] and sorted(again.up_to_date) == ["big.zip", "plain.zip"]


def test_stamp_is_void_when_the_archive_changes_or_a_file_goes_missing(tmp_path, capsys):
    root = tmp_path / "root"
    root.mkdir()
    archive = root / "a.zip"
    archive.write_bytes(_zip({"x/one.bin": b"1" * 100}))
    assert prepare.extract_all(root, KEEP, LIMITS).extracted == ["a.zip"]
    (root / "x" / "one.bin").unlink()  # a file went missing: extracted again
    assert prepare.extract_all(root, KEEP, LIMITS).extracted == ["a.zip"]
    archive.write_bytes(_zip({"x/one.bin": b"2" * 100, "x/two.bin": b"3"}))  # a new copy: same size, new content
    assert prepare.extract_all(root, KEEP, LIMITS).extracted == ["a.zip"]
    assert "a.zip changed since it was extracted: extracting it again (2 file(s) differ)" in capsys.readouterr().out
    assert (root / "x" / "one.bin").read_bytes() == b"2" * 100 and (root / "x" / "two.bin").read_bytes() == b"3"


def _zip(members: dict[str, bytes], method=zipfile.ZIP_STORED) -> bytes:
    import io

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", method) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buffer.getvalue()


def test_truncated_zip_is_a_clear_error_and_nothing_is_stamped(tmp_path):
    (tmp_path / "bad.zip").write_bytes(b"PK\x03\x04 truncated")
    report = prepare.extract_all(tmp_path, KEEP, LIMITS)
    assert len(report.failed) == 1 and "bad.zip has no zip end record" in report.failed[0]
    assert not (tmp_path / prepare.STAMP_DIR).exists()


def test_byte_chunks_are_read_in_numeric_order_without_a_joined_copy(tmp_path):
    data = _zip({"cg_videos_720p/a.mp4": random.Random(1).randbytes(50_000)})
    root = tmp_path / "root"
    root.mkdir()
    size = len(data) // 11 + 1
    for number, start in enumerate(range(0, len(data), size), 1):  # chunk_10 sorts before chunk_2 as text
        (root / f"video_chunk_{number}.zip").write_bytes(data[start:start + size])
    [archive] = archives.find_archives(root)
    assert archive.kind == "slices" and [p.name for p in archive.parts][:3] == ["video_chunk_1.zip", "video_chunk_2.zip",
                                                                               "video_chunk_3.zip"]
    assert prepare.extract_all(root, KEEP, LIMITS).extracted == ["video_chunk_*.zip"]
    assert (root / "cg_videos_720p" / "a.mp4").read_bytes() == random.Random(1).randbytes(50_000)
    assert sorted(p.name for p in root.iterdir()) == [".lmms_vr_prepare", "cg_videos_720p"] + [
        f"video_chunk_{n}.zip" for n in sorted(range(1, 12), key=str)]


def test_complete_chunks_with_one_damaged_name_the_damaged_one(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    for number in (1, 2, 3):
        (root / f"video_chunk_{number:02d}.zip").write_bytes(_zip({f"v{number}.mp4": bytes(1000)}))
    (root / "video_chunk_02.zip").write_bytes((root / "video_chunk_02.zip").read_bytes()[:-30])  # cut short
    report = prepare.extract_all(root, KEEP, LIMITS)
    assert report.extracted == ["video_chunk_01.zip", "video_chunk_03.zip"]
    assert len(report.failed) == 1 and "video_chunk_02.zip: not a complete zip while its sibling chunks are" in report.failed[0]


def test_limits_bomb_disk_and_hostile_names(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "bomb.zip").write_bytes(_zip({"z.bin": bytes(8 << 20)}, zipfile.ZIP_DEFLATED))
    [archive] = archives.find_archives(root)
    plan = archives.plan(archive, KEEP.extraction_target)
    with pytest.raises(archives.ArchiveError, match="zip bomb.*--max-ratio"):
        archives.check_space(plan, root, LIMITS)
    assert archives.check_space(plan, root, archives.Limits(max_ratio=1e6, keep_free=0)) == 8 << 20
    with pytest.raises(archives.ArchiveError, match="needs 8.0 MiB of free disk.*--keep-free.*nothing was written"):
        archives.check_space(plan, root, archives.Limits(max_ratio=1e6, keep_free=1 << 60))
    (root / "bomb.zip").write_bytes(_zip({"ok.bin": b"1", "/etc/evil": b"2"}))
    with pytest.raises(archives.ArchiveError, match="'/etc/evil' would be written outside the data root"):
        archives.plan(archives.find_archives(root)[0], KEEP.extraction_target)
    assert archives.parse_size("1.5G") == int(1.5 * 2 ** 30) and archives.parse_size("0") == 0
    with pytest.raises(ValueError, match="not a size"):
        archives.parse_size("lots")


def test_a_member_larger_than_declared_is_cut_off(tmp_path):
    data = bytearray(_zip({"a.bin": b"x" * 1000}))
    # lower the declared size in the central directory (a lying archive): extraction must stop at it
    at = data.rfind(b"PK\x01\x02")
    data[at + 24:at + 28] = (10).to_bytes(4, "little")
    (tmp_path / "lie.zip").write_bytes(bytes(data))
    report = prepare.extract_all(tmp_path, KEEP, LIMITS)
    assert report.failed and "expands beyond its declared" in report.failed[0]
    assert not (tmp_path / "a.bin").exists()


def test_undecompressable_member_is_a_message(tmp_path):
    data = bytearray(_zip({"a.bin": random.Random(3).randbytes(5000)}, zipfile.ZIP_DEFLATED))
    data[35:60] = b"\xff" * 25  # the deflate stream right after the local header (30 bytes + "a.bin")
    (tmp_path / "bad.zip").write_bytes(bytes(data))
    report = prepare.extract_all(tmp_path, KEEP, LIMITS)
    assert len(report.failed) == 1 and "bad.zip: member 'a.bin' does not decompress" in report.failed[0]
    assert "delete the archive and rerun" in report.failed[0] and not (tmp_path / "a.bin").exists()


def test_missing_split_part_is_named_without_running_anything(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    payload = _payload(tmp_path)
    subprocess.run(["zip", "-q", "-r", "-s", "100k", str(root / "big.zip"), "video"], cwd=payload, check=True,
                   stdin=subprocess.DEVNULL)
    (root / "big.z02").unlink()
    report = prepare.extract_all(root, KEEP, LIMITS)
    assert len(report.failed) == 1 and "split part(s) big.z02 missing" in report.failed[0]
    (root / "big.zip").unlink()
    assert "the last part big.zip (it holds the directory) is missing" in prepare.extract_all(root, KEEP, LIMITS).failed[0]


@pytest.mark.parametrize("size", ["same size", "other size"])
def test_a_second_archive_never_replaces_a_verified_video(tmp_path, size):
    """Two CG-Bench chunks holding a same-named video with different content: the first one's
    (extracted and verified) file is kept byte for byte; the second archive is refused as a
    whole, naming the archive, the member and the file, and stays refused on every rerun."""
    cg = registry.get("cg_bench").data()
    root = tmp_path / "root"
    root.mkdir()
    good, other = random.Random(1).randbytes(5000), random.Random(2).randbytes(5000 if size == "same size" else 4000)
    (root / "video_chunk_01.zip").write_bytes(_zip({"a.mp4": good}))
    (root / "video_chunk_02.zip").write_bytes(_zip({"b.mp4": b"b" * 100, "x/a.mp4": other}))
    for _run in range(2):
        report = prepare.extract_all(root, cg, LIMITS)
        assert report.extracted + report.up_to_date == ["video_chunk_01.zip"] and len(report.failed) == 1
        message = report.failed[0]
        assert message.startswith("video_chunk_02.zip: member 'x/a.mp4' would replace ") and "whose content differs" in message
        assert str(root / "cg_videos_720p" / "a.mp4") in message and "nothing of it was written" in message
        assert "delete it" in message and "delete the archive" in message
        assert (root / "cg_videos_720p" / "a.mp4").read_bytes() == good
        assert not (root / "cg_videos_720p" / "b.mp4").exists()  # the refused archive wrote nothing
    assert prepare.stamp_state(root, archives.find_archives(root)[1]) == "new"


def test_the_same_content_already_in_place_is_kept_and_counted_done(tmp_path):
    root = tmp_path / "root"
    (root / "x").mkdir(parents=True)
    (root / "x" / "one.bin").write_bytes(b"1" * 100)  # unzipped by other means, or by another archive
    before = (root / "x" / "one.bin").stat().st_mtime_ns
    (root / "a.zip").write_bytes(_zip({"x/one.bin": b"1" * 100, "x/two.bin": b"2"}))
    (root / "b.zip").write_bytes(_zip({"x/one.bin": b"1" * 100}))
    report = prepare.extract_all(root, KEEP, LIMITS)
    assert report.extracted == ["a.zip", "b.zip"] and not report.failed
    assert (root / "x" / "one.bin").stat().st_mtime_ns == before and (root / "x" / "two.bin").read_bytes() == b"2"


def test_a_member_under_an_existing_file_names_the_member_and_the_file(tmp_path):
    root = tmp_path / "root"
    (root / "videos").mkdir(parents=True)
    (root / "videos" / "a.mp4").write_bytes(b"good video")
    (root / "b.zip").write_bytes(_zip({"videos/a.mp4/x": b"1", "videos/c.mp4": b"2"}))
    [message] = prepare.extract_all(root, KEEP, LIMITS).failed
    assert message.startswith(f"b.zip: member 'videos/a.mp4/x' goes to {root / 'videos' / 'a.mp4' / 'x'}, under "
                              f"{root / 'videos' / 'a.mp4'}, which is a file, not a folder")
    assert "File exists" not in message and "nothing of it was written" in message
    assert (root / "videos" / "a.mp4").read_bytes() == b"good video" and not (root / "videos" / "c.mp4").exists()
    (root / "b.zip").write_bytes(_zip({"videos/c.mp4": b"2"}))  # a folder where a member goes
    (root / "videos" / "c.mp4").mkdir()
    assert "member 'videos/c.mp4' goes to" in prepare.extract_all(root, KEEP, LIMITS).failed[0]
    # within one archive: a member where another needs a folder is refused before anything is written
    (root / "c.zip").write_bytes(_zip({"d/e.mp4": b"1", "d/e.mp4/f": b"2"}))
    with pytest.raises(archives.ArchiveError, match="c.zip: member 'd/e.mp4' would be the file d/e.mp4, where member "
                                                    "'d/e.mp4/f' needs a folder"):
        archives.plan(archives.find_archives(root)[1], KEEP.extraction_target)


# ---------------------------------------------------------------------- resolvers


def test_paths_leaving_the_root_are_refused(tmp_path, monkeypatch):
    from lmms_video_reasoning.vcr_bench import data as vcr
    from lmms_video_reasoning.vrbench import data as vr

    (tmp_path / "outside.mp4").write_bytes(b"x")
    root = tmp_path / "root"
    root.mkdir()
    for bad in ("../outside.mp4", "video/../../outside.mp4", "/etc/passwd", "C:\\videos\\x.mp4"):
        with pytest.raises(MediaError, match="leaves the data root"):
            vcr.video_at(root, bad)
    monkeypatch.setenv("VRBENCH_ROOT", str(root))
    with pytest.raises(MediaError, match="VRBench record: media path '/abs/v.mp4' leaves the data root"):
        vr.resolve_video("/abs/v.mp4")
    from lmms_video_reasoning.cg_bench import data as cg

    with pytest.raises(MediaError, match="CG-Bench video_uid '../../outside'.*leaves the data root"):
        cg.video_at(root, "../../outside")


def test_cg_resolvers_find_flat_and_foldered_media_but_keep_kinds_apart(tmp_path):
    from lmms_video_reasoning.cg_bench import data

    root = tmp_path / "root"
    (root / "anything" / "deeper").mkdir(parents=True)
    (root / "clue_chunks").mkdir()
    (root / "abc.mp4").write_bytes(b"full video")  # flat at the root (someone unzipped a new chunk there)
    (root / "42.mp4").write_bytes(b"flat clue?")  # a flat qid-named file is not taken for a clue clip
    (root / "clue_chunks" / "7.mp4").write_bytes(b"clip")
    (root / "anything" / "deeper" / "abc.srt").write_bytes(b"1\n00:00:01,000 --> 00:00:02,000\nhi\n")
    media_index.forget()
    assert data.video_at(root, "abc") == root / "abc.mp4"
    assert data.clue_clip_at(root, 42) is None and data.clue_clip_at(root, 7) == root / "clue_chunks" / "7.mp4"
    assert data.video_at(root, "7") is None  # a clue clip is never a full video
    assert data.subtitle_at(root, "abc") == root / "anything" / "deeper" / "abc.srt"


def test_ambiguous_names_are_an_error_not_a_guess(tmp_path):
    from lmms_video_reasoning.vcr_bench import data

    root = tmp_path / "root"
    for folder, content in (("x", b"one"), ("y", b"other!")):
        (root / folder).mkdir(parents=True)
        (root / folder / "clip.mp4").write_bytes(content)
    media_index.forget()
    with pytest.raises(MediaError, match="ambiguous.*x/clip.mp4, y/clip.mp4"):
        data.video_at(root, "video/src/clip.mp4")
    (root / "src").mkdir()
    (root / "src" / "clip.mp4").write_bytes(b"right")  # shares the record's folder: it wins
    media_index.forget()
    assert data.video_at(root, "video/src/clip.mp4") == root / "src" / "clip.mp4"


def test_index_is_built_once_per_root(tmp_path, monkeypatch):
    root = tmp_path / "root"
    (root / "a").mkdir(parents=True)
    (root / "a" / "f.mp4").write_bytes(b"1")
    (root / ".cache").mkdir()
    (root / ".cache" / "g.mp4").write_bytes(b"hidden: partial downloads live here")
    media_index.forget()
    builds = []
    real = media_index.files_by_name
    monkeypatch.setattr(media_index, "files_by_name", lambda r: builds.append(r) or real(r))
    for _ in range(3):
        assert media_index.locate(root, "f.mp4") == root / "a" / "f.mp4"
        assert media_index.locate(root, "g.mp4") is None
    assert len(builds) == 1


# ---------------------------------------------------------------------- verification and the command


@pytest.mark.parametrize("benchmark", ["vcr_bench", "vr_bench", "cg_bench"])
def test_prepare_verify_only_on_the_sample_layout(benchmark, tmp_path, capsys):
    from lmms_video_reasoning.utils.tools.cli import main
    from lmms_video_reasoning.utils.tools.sample import write_sample

    name = "vrbench" if benchmark == "vr_bench" else benchmark
    root = write_sample(tmp_path, (name,))[name]
    assert main(["prepare", benchmark, "--root", str(root), "--verify-only"]) == 0
    out = capsys.readouterr().out
    assert f"={root}" in out and "export " in out
    # break one required video: the status must say so, and name it
    victim = next(p for p in sorted(root.rglob("*.mp4")) if "clue" not in str(p))
    victim.write_bytes(b"garbage" * 10)
    assert main(["prepare", benchmark, "--root", str(root), "--verify-only"]) == 1
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("videos "))
    assert row.split()[2:6] == [row.split()[2], str(int(row.split()[2]) - 1), "0", "1"]
    assert f"videos unusable: {victim}" in out and "is incomplete" in out


def test_one_name_per_benchmark_in_what_prepare_and_doctor_print(tmp_path, capsys, monkeypatch):
    """Each benchmark has one canonical name (its registry name: vcr_bench, vrbench, cg_bench), the one
    every printed command uses; the task-style `vr_bench` is accepted by `prepare` and said to be an alias."""
    import re

    from lmms_video_reasoning.utils.core import registry
    from lmms_video_reasoning.utils.tools import doctor
    from lmms_video_reasoning.utils.tools.cli import build_parser, main
    from lmms_video_reasoning.utils.tools.sample import write_sample

    canonical = [b.name for b in registry.benchmarks()]
    for benchmark in registry.builtin():
        assert benchmark.data().SOURCE.benchmark == benchmark.name  # the name `prepare_command` prints
    assert registry.get("vr_bench").name == "vrbench"
    root = write_sample(tmp_path, ("vrbench",))["vrbench"]
    assert main(["prepare", "vr_bench", "--root", str(root), "--verify-only"]) == 0
    printed = capsys.readouterr().out
    assert "note: vr_bench is another name of vrbench: `lmms-vr prepare vrbench`" in printed, printed
    with pytest.raises(DataError, match=r"vrbench \(or vr_bench\)"):
        registry.get("vr-bench")
    for variable in ("VCR_BENCH_ROOT", "VRBENCH_ROOT", "CGBENCH_ROOT"):  # doctor's hint for a root not set ...
        monkeypatch.delenv(variable, raising=False)
    hints = [finding.fix for finding in doctor.check_data()]
    monkeypatch.setenv("VRBENCH_ROOT", str(tmp_path / "absent"))  # ... and for one that is not a folder
    hints += [finding.fix for finding in doctor.check_data()]
    named = re.findall(r"lmms-vr prepare ([\w-]+)", printed + "\n".join(hints))
    assert len(named) >= 7 and set(named) <= set(canonical), named
    prepare_help = next(action for action in build_parser()._subparsers._group_actions[0].choices["prepare"]._actions
                        if action.dest == "benchmark").help
    assert all(name in prepare_help for name in canonical) and "vr_bench" in prepare_help, prepare_help


def test_garbage_srt_is_reported_by_prepare_and_counted_at_run_time(tmp_path, capsys, monkeypatch):
    from lmms_video_reasoning.cg_bench import benchmark as binding, data, task
    from lmms_video_reasoning.cg_bench.sample import write_sample
    from lmms_video_reasoning.utils.tools.cli import main

    root = write_sample(tmp_path / "cg")
    srt = root / data.SUBTITLE_DIR / "cgsample_park.srt"
    srt.write_bytes(b"\x00\xff garbage, no timing line at all\n\nmore junk\n")
    assert main(["prepare", "cg_bench", "--root", str(root), "--verify-only", "--subset"]) == 0  # optional: reported, not fatal
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("subtitles "))
    assert row.split()[5] == "1" and "subtitles_unusable" in row
    assert f"subtitles unusable: {srt} (no subtitle line could be read from it (2 malformed block(s)))" in out

    monkeypatch.setenv("CGBENCH_ROOT", str(root))
    media_index.forget()
    docs = [d for d in task.build_docs(data.records_at(split="mini"), "long", "mini")]
    records = [binding.build_record(doc, "```json\n{\"result\": \"A\"}\n```") for doc in docs]
    park = [r for r in records if r["video_uid"] == "cgsample_park"]
    assert park and all("no subtitle line" in r["subtitles_unusable"] for r in park)
    assert all(r["subtitles_unusable"] is None for r in records if r["video_uid"] != "cgsample_park")
    scores = score_records(binding, records, {"judge": False})
    assert scores["subtitles_unusable"] == 1 and list(scores["breakdown"]["subtitles_unusable"]) == ["cgsample_park"]


def test_cg_meta_table_packaged_and_overridden_by_the_root(tmp_path):
    from lmms_video_reasoning.cg_bench import data, docs

    packaged = data.meta_table(None)
    assert len(packaged) == 1219 and packaged["JuBBIJ7adjM"].max_frame == 35140
    (tmp_path / docs.META_FILE).write_text(json.dumps({"JuBBIJ7adjM": {"duration": 10.0, "max_frame": 250, "fps": 25.0},
                                                        "mine": {"duration": 2.0, "max_frame": 50, "fps": 25.0}}))
    table = data.meta_table(tmp_path)
    assert table["JuBBIJ7adjM"].max_frame == 250 and table["mine"].fps == 25.0  # the root wins
    assert table["kenufFDfitQ"] == packaged["kenufFDfitQ"]  # others from the official table


def test_prepare_errors_are_messages_not_tracebacks(tmp_path, capsys):
    from lmms_video_reasoning.utils.tools.cli import main

    afile = tmp_path / "file"
    afile.write_text("x")
    assert main(["prepare", "vcr_bench", "--root", str(afile), "--verify-only"]) == 2
    assert "cannot use --root" in capsys.readouterr().err
    assert main(["prepare", "vcr_bench", "--root", str(tmp_path / "r"), "--keep-free", "lots", "--verify-only"]) == 2
    assert "--keep-free: not a size" in capsys.readouterr().err
    assert main(["prepare", "vcr_bench", "--root", str(tmp_path / "r"), "--verify-only"]) == 2
    assert "meta_info_video.json" in capsys.readouterr().err


def test_download_failure_offline_is_explained(tmp_path, monkeypatch):
    from lmms_video_reasoning.cg_bench.data import CG_BENCH

    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    with pytest.raises(DataError, match="download from CG-Bench/CG-Bench failed.*--skip-download"):
        prepare.download(CG_BENCH, ["cgbench_mini.json"], tmp_path)


def test_atomic_target_replaces_on_success_and_cleans_up_on_failure(tmp_path):
    from lmms_video_reasoning.utils.core.files import atomic_target

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


def test_verify_reports_videos_by_the_tasks_resolver(tmp_path):
    root = tmp_path / "root"
    (root / "nested").mkdir(parents=True)
    write_video(root / "nested" / "good.mp4", duration=1.0)
    (root / "junk.mp4").write_bytes(b"not a video at all" * 100)
    media_index.forget()
    items = {name: (lambda n=name: media_index.locate(root, n)) for name in ("good.mp4", "junk.mp4", "absent.mp4")}
    kind = media_index.MediaKind("videos", True, items, __import__("lmms_video_reasoning.utils.core.roots", fromlist=["x"]).video_problem,
                                 "error", "error")
    [report] = prepare.verify([kind])
    assert (report.present, report.missing, len(report.unusable), report.fails) == (1, ["absent.mp4"], 1, True)
    assert "videos  yes       3       1        1        1" in prepare.table([report])
    shutil.rmtree(root)


# ---------------------------------------------------------------------- issue 22: record counts, missing subtitles


def test_an_annotation_file_cut_at_a_record_boundary_is_a_count_mismatch(reference_dir, tmp_path):
    """The real mini split agrees with the release's counts; the same file cut in half at a record
    boundary still parses, and only the counts show it: an error naming both counts and --subset."""
    from lmms_video_reasoning.cg_bench import data

    records = data.validate_records(json.loads((reference_dir / "cg_bench" / "cgbench_mini.json").read_text()), "mini")
    line, ok = prepare.release_check(data, tmp_path, records, "mini")
    assert ok and line == "records: 3,000 questions on 1,118 videos, as the cg_bench mini release"
    line, ok = prepare.release_check(data, tmp_path, records[:1500], "mini")
    assert not ok and "1,500 questions" in line and "release has 3,000 questions on 1,118 videos" in line and "--subset" in line
    assert prepare.release_check(data, tmp_path, records[:1500], "mini", subset=True)[1]
    line, ok = prepare.release_check(data, tmp_path, records, "full")  # the mini file is not the full split
    assert not ok and "12,129 questions on 1,219 videos" in line


@pytest.mark.parametrize("benchmark", ["vcr_bench", "vr_bench", "cg_bench"])
def test_verify_only_checks_counts_unless_the_root_is_a_declared_subset(benchmark, tmp_path, capsys):
    from lmms_video_reasoning.utils.tools.cli import main
    from lmms_video_reasoning.utils.core.roots import SUBSET_MARKER
    from lmms_video_reasoning.utils.tools.sample import write_sample

    name = "vrbench" if benchmark == "vr_bench" else benchmark
    root = write_sample(tmp_path, (name,))[name]
    assert main(["prepare", benchmark, "--root", str(root), "--verify-only"]) == 0  # the sample says it is one
    assert "a subset: the generated sample benchmark" in capsys.readouterr().out
    (root / SUBSET_MARKER).unlink()
    assert main(["prepare", benchmark, "--root", str(root), "--verify-only"]) == 1
    out = capsys.readouterr().out
    assert "error: records:" in out and "looks cut" in out and "is incomplete" in out
    assert main(["prepare", benchmark, "--root", str(root), "--verify-only", "--subset"]) == 0
    assert "a subset: --subset" in capsys.readouterr().out


def test_missing_subtitles_are_listed(tmp_path, capsys):
    """A missing subtitle file drops the subtitles from its questions: --verify-only names it
    (optional, so not an error) and lists every one in a file."""
    from lmms_video_reasoning.cg_bench import data
    from lmms_video_reasoning.cg_bench.sample import write_sample
    from lmms_video_reasoning.utils.tools.cli import main

    root = write_sample(tmp_path / "cg")
    srts = sorted((root / data.SUBTITLE_DIR).glob("*.srt"))
    srts[0].unlink()
    assert main(["prepare", "cg_bench", "--root", str(root), "--verify-only", "--subset"]) == 0
    out = capsys.readouterr().out
    assert f"subtitles missing: {data.SUBTITLE_DIR}/{srts[0].name}" in out
    listing = root / prepare.STAMP_DIR / "missing_subtitles.txt"
    without = sorted(f"{data.SUBTITLE_DIR}/{uid}.srt" for uid in {r["video_uid"] for r in data.records_at(root)}
                     if not (root / data.SUBTITLE_DIR / f"{uid}.srt").is_file())
    assert f"{srts[0].name}" in " ".join(without)
    assert f"{len(without)} subtitles missing (prompt without subtitles (not every video has them)): all listed in {listing}" in out
    assert sorted(listing.read_text().splitlines()) == without


def test_a_missing_srt_is_counted_at_run_time(tmp_path, monkeypatch):
    """A video whose subtitle file is absent is asked without subtitles: counted and named, not silent."""
    from lmms_video_reasoning.cg_bench import benchmark as binding, data, task
    from lmms_video_reasoning.cg_bench.sample import write_sample

    root = write_sample(tmp_path / "cg")
    monkeypatch.setenv("CGBENCH_ROOT", str(root))

    def without_subtitles() -> tuple[set, dict]:
        media_index.forget()
        docs = task.build_docs(data.records_at(split="mini"), "long", "mini")
        records = [binding.build_record(doc, "```json\n{\"result\": \"A\"}\n```") for doc in docs]
        return {r["video_uid"] for r in records if r["subtitles_missing"]}, score_records(binding, records, {"judge": False})

    before, _scores = without_subtitles()  # the sample, like the release, has videos without an SRT
    assert "cgsample_park" not in before
    (root / data.SUBTITLE_DIR / "cgsample_park.srt").unlink()
    after, scores = without_subtitles()
    assert after == before | {"cgsample_park"}
    assert scores["subtitles_missing"] == len(after) and scores["breakdown"]["subtitles_missing"] == sorted(after)
