"""SRT parsing edge cases and the CG-Bench subtitle-line selection."""

from __future__ import annotations

import pytest
from lmms_video_reasoning.utils.media import synthetic as syn
from lmms_video_reasoning.utils.media.subtitles import (
    Cue,
    lines_for_times,
    parse_srt,
    srt_problem,
    subtitle_prompt,
)

MESSY = (
    "\ufeff1\r\n00:00:01,000 --> 00:00:04,000\r\n<i>Hello</i> there\r\nsecond line\r\n\r\n"
    # missing index, overlapping the first cue, dot as decimal separator
    "00:00:03.500 --> 00:00:06,250\r\nOverlap\r\n\r\n"
    # malformed: no timing line
    "3\r\nthis block has no times\r\n\r\n"
    # malformed: end before start
    "4\r\n00:00:09,000 --> 00:00:08,000\r\nbackwards\r\n\r\n"
    # malformed: garbage times
    "5\r\n00:xx:09,000 --> 00:00:10,000\r\nbad digits\r\n\r\n"
    # wrong index number is fine; one-digit fraction means tenths
    "99\r\n01:02:03,5 --> 01:02:04,000\r\nlate\r\n"
)


def srt(tmp_path, content, name="a.srt"):
    """`content` (text: UTF-8, line ends kept) as an SRT file."""
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    return path


def test_parse_messy_srt(tmp_path):
    parsed = parse_srt(srt(tmp_path, MESSY))
    assert parsed.skipped == 3
    assert parsed.cues == [
        Cue(1.0, 4.0, "Hello there\nsecond line"),
        Cue(3.5, 6.25, "Overlap"),
        Cue(3723.5, 3724.0, "late"),
    ]


def test_parse_bytes_and_paths_in_other_encodings(tmp_path):
    text = "1\n00:00:01,000 --> 00:00:02,000\nCafé crème\n"
    for encoding in ("utf-8", "utf-8-sig", "cp1252", "utf-16"):
        path = tmp_path / f"{encoding}.srt"
        path.write_bytes(text.encode(encoding))
        assert parse_srt(path).cues == [Cue(1.0, 2.0, "Café crème")], encoding
        assert parse_srt(str(path)).cues[0].text == "Café crème"
    # bytes that are valid in no tried encoding strictly still parse (replacement characters)
    bad = b"1\n00:00:01,000 --> 00:00:02,000\nabc \x81\x8d\x90 def\n"
    (cue,) = parse_srt(srt(tmp_path, bad)).cues
    assert cue.text.startswith("abc") and cue.text.endswith("def")


def test_parse_empty_and_missing(tmp_path):
    assert parse_srt(srt(tmp_path, "\n\n")).cues == [] and parse_srt(srt(tmp_path, b"", "b.srt")).skipped == 0
    with pytest.raises(FileNotFoundError, match="nope.srt"):
        parse_srt("/no/such/dir/nope.srt")


def test_round_trip_with_write_srt(tmp_path):
    cues = [(0.0, 1.5, "one"), (61.25, 3700.001, "two\nlines")]
    parsed = parse_srt(syn.write_srt(tmp_path / "a.srt", cues))
    assert parsed.skipped == 0
    assert [(c.start, c.end, c.text) for c in parsed.cues] == cues


def test_lines_for_times_strict_once_official_format(tmp_path):
    cues = parse_srt(srt(tmp_path, MESSY)).cues
    # 1.0 equals a start (not strictly inside); 2.0 and 3.9 both hit cue 1 (listed once);
    # 3.9 also hits the overlapping cue; 6.25 equals an end (excluded).
    lines = lines_for_times(cues, [1.0, 2.0, 3.9, 6.25, 3723.9])
    assert lines == [
        "[1.0, 4.0] Hello there second line",
        "[3.5, 6.25] Overlap",
        "[3723.5, 3724.0] late",
    ]
    assert lines_for_times(cues, [2.0], with_times=False) == ["Hello there second line"]
    assert lines_for_times(cues, [100.0]) == []


def test_lines_compare_in_milliseconds():
    cues = [Cue(1.0, 2.0, "a")]
    assert lines_for_times(cues, [1.0004]) == []  # rounds to 1000 ms: not strictly after the start
    assert lines_for_times(cues, [1.0006]) == ["[1.0, 2.0] a"]


def test_subtitle_prompt():
    assert subtitle_prompt([]) == ""
    assert subtitle_prompt(["[1.0, 2.0] a", "[3.0, 4.5] b"]) == (
        "The subtitles of the video are as follows:\n\n[1.0, 2.0] a\n[3.0, 4.5] b\n\n"
    )


def test_srt_problem_says_why_a_file_yields_no_line(tmp_path):
    assert srt_problem(srt(tmp_path, MESSY)) is None
    assert srt_problem(srt(tmp_path, "", "empty.srt")) == "the file is empty"
    garbage = srt(tmp_path, "1\nno times here\n\n2\n00:xx:01,000 --> 00:00:02,000\nbad\n", "garbage.srt")
    assert srt_problem(garbage) == "no subtitle line could be read from it (2 malformed block(s))"
    assert srt_problem(tmp_path / "gone.srt") == f"it cannot be read (subtitle file not found: {tmp_path / 'gone.srt'})"
