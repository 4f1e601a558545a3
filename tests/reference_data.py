"""Where the tests find protocol data: the committed copies (`tests/reference/`, the package's
`<benchmark>/prompts/`), pinned by `tests/reference/manifest.json`; and, only for cross-checks
that a clone cannot run, the developers' read-only reference folder when it exists."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PROTOCOL_DATA = REPO / "tests" / "reference"
MANIFEST = PROTOCOL_DATA / "manifest.json"

# The read-only reference folder kept beside the checkout on development machines and CI (not
# part of the repository, so a clone has none): `LMMS_VR_REFERENCE_DIR`, else its usual place
# beside the checkout (below). The seed texts of the papers sit next to it.
UPSTREAM_REFERENCE = Path(os.environ.get("LMMS_VR_REFERENCE_DIR") or REPO.parent / "shared" / "reference")
UPSTREAM_SEEDS = UPSTREAM_REFERENCE.parent / "seeds"
NO_UPSTREAM = ("needs the developers' reference folder (LMMS_VR_REFERENCE_DIR), which is not part of a clone and "
               "is absent here; the committed copies are still checked against their recorded sha256")


def prompt_dir(benchmark: str) -> Path:
    """The committed official prompts of `benchmark` (the files the package ships)."""
    return REPO / benchmark / "prompts"


def manifest() -> list[dict]:
    return json.loads(MANIFEST.read_text(encoding="utf-8"))["files"]


def upstream_reference() -> Path:
    """The developers' reference folder, or skip the calling test (a clone has none)."""
    if not UPSTREAM_REFERENCE.is_dir():
        pytest.skip(NO_UPSTREAM)
    return UPSTREAM_REFERENCE


def upstream_seeds() -> Path:
    """The papers' texts beside the reference folder, or skip the calling test."""
    if not UPSTREAM_SEEDS.is_dir():
        pytest.skip("needs the papers' texts (kept beside the developers' reference folder, LMMS_VR_REFERENCE_DIR), "
                    "which are not part of a clone; the rows in each reference_tables.json are checked without them")
    return UPSTREAM_SEEDS
