"""The papers' reference rows (each benchmark's `reference_tables.json`, package data read through the
registry) against the papers' texts where a developer has them (not part of a clone: skipped
otherwise), and their structure and sources everywhere."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lmms_video_reasoning.utils.core import registry
from reference_data import upstream_seeds

SEED_FILES = {"vcr_bench": "vcr_bench_paper.txt", "vrbench": "vrbench_paper.txt", "cg_bench": "cg_bench_paper.txt"}
# Where each table's rows start in the seed text (its caption or header line).
TABLE_ANCHORS = {
    ("vcr_bench", "table2"): "Table 2: **CoT Evaluation",
    ("vcr_bench", "table3"): "Table 3: **Accuracy Evaluation",
    ("vcr_bench", "table4"): "Table 4: Accuracy Evaluation Results for Different Durations",
    ("vcr_bench", "table5"): "Table 5: Accuracy Evaluation Results under Different Settings",
    ("vrbench", "table2"): "Model\tOverall",
    ("cg_bench", "table3"): "Table 3: Performance of various open-source",
    ("cg_bench", "table4"): "Table 4: Impact of different prompts and modalities.",
    ("cg_bench", "table10"): "Table 10: Impact of different prompts and modalities on the full test set.",
}
TAG = re.compile(r"<[^>]+>")
REFERENCE_ROWS = {name: registry.get(name).reference_tables() for name in SEED_FILES}


def seed_row(text: str, anchor: str, model: str, occurrence: int = 0) -> list[str]:
    """The tab-separated cells (tags stripped) of `model`'s row number `occurrence` after `anchor`."""
    start = text.index(anchor)
    for line in text[start:].splitlines():
        cells = [TAG.sub("", cell).strip() for cell in line.split("\t")]
        if cells[0] == model and len(cells) > 1:
            if occurrence == 0:
                return cells[1:]
            occurrence -= 1
    raise AssertionError(f"{model!r} not found after {anchor!r}")


DELTA = re.compile(r"\s*\([+-]\d+(\.\d+)?\)$")  # CG-Bench Tables 4 and 10 print each value's difference to the F row


def number(cell: str) -> float | None:
    return None if cell == "-" else float(DELTA.sub("", cell).replace("57/12", "57.12"))  # the one typo, documented in the table note


@pytest.mark.parametrize("benchmark,table", sorted(TABLE_ANCHORS))
def test_reference_rows_match_the_paper_text(benchmark, table):
    text = (upstream_seeds() / SEED_FILES[benchmark]).read_text(encoding="utf-8")
    spec = REFERENCE_ROWS[benchmark]["tables"][table]
    skip = len(spec.get("extra_columns", ()))
    assert spec["rows"] and spec["columns"]
    for index, row in enumerate(spec["rows"]):
        earlier = sum(other["model"] == row["model"] for other in spec["rows"][:index])  # VRBench lists GPT-4o as LLM and VLM
        cells = seed_row(text, TABLE_ANCHORS[(benchmark, table)], row["model"], earlier)
        assert [number(c) for c in cells[skip: skip + len(spec["columns"])]] == row["values"], row["model"]
        assert [row[name] for name in spec.get("extra_columns", ())] == cells[:skip]


def test_every_reference_row_names_its_source():
    """Paper title, arXiv id and table number on every row; no path of this repository's setup."""
    for benchmark, data in REFERENCE_ROWS.items():
        paper = data["paper"]
        assert re.fullmatch(r"\d{4}\.\d{5}", paper["arxiv"]) and paper["title"] and data["tables"]
        assert data["citation"] == f"{paper['title']} ({paper['authors']}, {paper['year']}; arXiv:{paper['arxiv']})"
        for name, table in data["tables"].items():
            assert table["title"].startswith(f"Table {table['number']}:") and name == f"table{table['number']}"
            for row in table["rows"]:
                assert row["source"] == {"paper": paper["title"], "arxiv": paper["arxiv"], "table": table["number"]}
                assert len(row["values"]) == len(table["columns"])
        shipped = (Path(registry.__file__).resolve().parents[2] / benchmark / "reference_tables.json").read_text(encoding="utf-8")
        assert "seeds" not in shipped and "shared/" not in shipped


def test_protocol_anchors_are_in_the_reference_rows():
    """The anchors the benchmarks' protocol notes quote (GPT-4o rows) are the rows the report shows."""
    def row(benchmark, table, model, group=""):
        return next(r for r in REFERENCE_ROWS[benchmark]["tables"][table]["rows"] if r["model"].startswith(model) and (r["group"] or "").startswith(group))

    assert row("cg_bench", "table3", "GPT-4o-08-06")["values"] == [58.3, 45.2, 5.62, 8.30, 4.38, 77.5, 39.5]
    assert row("vrbench", "table2", "GPT-4o", "VLMs")["values"][:3] == [70.68, 83.25, 58.10]
    assert row("vcr_bench", "table2", "o1")["values"][-1] == 62.8 and row("vcr_bench", "table3", "o1")["values"][-1] == 56.7


def test_the_typo_note_names_the_column_the_paper_prints_it_in():
    """VRBench's '57/12' (InternLM3-8B-Instruct): the table note names the column of the paper's
    header it sits under, and the stored 57.12 is in that column."""
    text = (upstream_seeds() / SEED_FILES["vrbench"]).read_text(encoding="utf-8")
    anchor = TABLE_ANCHORS[("vrbench", "table2")]
    lines = text[text.index(anchor):].splitlines()
    labels = ["Overall"] + [cell.strip() for cell in lines[1].split("\t") if cell.strip()]  # second header line: MCQ-O ... LL
    cells = seed_row(text, anchor, "InternLM3-8B-Instruct [3]")
    column = cells.index("57/12")
    spec = REFERENCE_ROWS["vrbench"]["tables"]["table2"]
    assert labels[column] == "HR"
    assert "HR value" in spec["note"] and "II value" not in spec["note"]
    row = next(r for r in spec["rows"] if r["model"].startswith("InternLM3"))
    assert row["values"][column] == 57.12 and spec["columns"][column] == "type_hypothetical_reasoning"


def test_every_reference_table_states_its_data_and_protocol():
    """Each table's `provenance` (shown under it by the report): the data and protocol of its rows."""
    for benchmark, data in REFERENCE_ROWS.items():
        for name, table in data["tables"].items():
            provenance = table["provenance"]
            assert provenance["data"] and provenance["protocol"], (benchmark, name)
            assert provenance["questions"] is None or isinstance(provenance["questions"], int)
    assert REFERENCE_ROWS["vrbench"]["tables"]["table2"]["provenance"]["questions"] == 9468
    assert REFERENCE_ROWS["cg_bench"]["tables"]["table3"]["provenance"]["questions"] is None  # the paper does not say


def test_vcr_bench_tables_9_and_10_match_the_paper_text():
    """Table 9 is printed transposed (frames across, one accuracy row); Table 10 in two model columns."""
    text = (upstream_seeds() / SEED_FILES["vcr_bench"]).read_text(encoding="utf-8")
    tables = REFERENCE_ROWS["vcr_bench"]["tables"]
    frames, accuracy = (seed_row(text, "Table 9: Effect of different input frame counts", label) for label in ("Frames", "Accuracy (%)"))
    assert [f"vcr_cot_frames{count}:accuracy" for count in frames] == tables["table9"]["columns"]
    [row] = tables["table9"]["rows"]
    assert row["model"] == "Qwen2.5-VL-7B" and row["values"] == [float(cell) for cell in accuracy]
    printed = {}
    for line in text[text.index("Table 10: Probability (%)"):].splitlines()[3:]:  # caption, blank line, header
        cells = line.split("\t")
        if len(cells) != 4:
            break
        printed.update({model: [float(value)] for model, value in (cells[:2], cells[2:]) if model != "-"})
    assert {row["model"]: row["values"] for row in tables["table10"]["rows"]} == printed and len(printed) == 19
