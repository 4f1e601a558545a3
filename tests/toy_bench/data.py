"""ToyBench data (what `lmms-vr prepare` checks): `annotations.json` lists the questions; each
`pictures/<sample_id>.txt` must be present and non-empty. Root: `TOY_BENCH_ROOT`."""

from __future__ import annotations

from pathlib import Path

from lmms_video_reasoning.utils.core.roots import DataSource, data_root, read_json
from lmms_video_reasoning.utils.data import media_index

SOURCE = DataSource("toy_bench", "nobody/toy-bench", "TOY_BENCH_ROOT")
HUB_ANNOTATIONS, HUB_MEDIA_PATTERNS = ["annotations.json"], ["pictures.zip"]


def extraction_target(archive: str, member: str) -> str:
    return member


def records_at(root, split: str = "mini") -> list[dict]:
    return read_json(Path(root) / "annotations.json")


def load_records() -> list[dict]:
    return records_at(data_root(SOURCE))


def media_kinds(root, records: list[dict]) -> list:
    paths = {f"pictures/{r['sample_id']}.txt": Path(root) / "pictures" / f"{r['sample_id']}.txt" for r in records}
    items = {label: (lambda path=path: path if path.is_file() else None) for label, path in paths.items()}
    return [media_index.MediaKind("pictures", True, items, lambda path: None if path.stat().st_size else "empty file",
                                  "error: the question cannot run", "error: the question cannot run")]
