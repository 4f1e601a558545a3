"""The repository carries the protocol data its tests need (`tests/reference/`, the package's
official prompts), each file pinned by the sha256 recorded with its source; no document points
outside the repository for it."""

from __future__ import annotations

import hashlib
import re
import subprocess

import pytest

from reference_data import MANIFEST, PROTOCOL_DATA, REPO, manifest, prompt_dir, upstream_reference

OFFICIAL_PROMPTS = {  # the package's prompt files that are official copies (cg_bench's blind_mcq.txt is transcribed from the paper)
    "vcr_bench": 6, "vrbench": 8, "cg_bench": 6,
}


def test_every_committed_copy_has_its_recorded_sha256_and_source():
    entries = manifest()
    assert len({e["path"] for e in entries}) == len(entries)
    for entry in entries:
        path = REPO / entry["path"]
        assert path.is_file(), entry["path"]
        data = path.read_bytes()
        assert (hashlib.sha256(data).hexdigest(), len(data)) == (entry["sha256"], entry["bytes"]), \
            f"{entry['path']} differs from the official copy recorded in {MANIFEST.relative_to(REPO)}"
        source = entry["source"]
        assert re.fullmatch(r"[\w.-]+/[\w.-]+", source["repo"]) and re.fullmatch(r"[0-9a-f]{40}", source["commit"]) and source["path"]


def test_the_manifest_covers_every_official_prompt_and_every_data_file():
    listed = {e["path"] for e in manifest()}
    for benchmark, count in OFFICIAL_PROMPTS.items():
        prompts = {f"{benchmark}/prompts/{p.name}" for p in prompt_dir(benchmark).glob("*.txt")}
        assert len(prompts & listed) == count, benchmark
    data = {p.relative_to(REPO).as_posix() for p in PROTOCOL_DATA.rglob("*") if p.is_file() and p.name not in ("README.md", "manifest.json")}
    assert data and data <= listed
    readme = (PROTOCOL_DATA / "README.md").read_text(encoding="utf-8")
    for entry in manifest():
        assert entry["source"]["repo"] in readme and entry["source"]["commit"][:7] in readme


def test_committed_copies_equal_the_developers_reference_folder():
    """Where the developers' read-only reference folder exists (development machines, CI), each
    committed copy equals its file there byte for byte, and no official prompt or data file the
    folder holds is missing from the manifest. A clone has no such folder: skipped there."""
    reference = upstream_reference()
    entries = manifest()
    for entry in entries:
        assert (REPO / entry["path"]).read_bytes() == (reference / entry["reference_name"]).read_bytes(), entry["path"]
    names = {e["reference_name"] for e in entries}
    held = {p.relative_to(reference).as_posix() for p in reference.rglob("*") if p.is_file() and p.suffix in (".txt", ".json", ".jsonl")}
    assert held <= names, f"reference files with no committed copy: {sorted(held - names)}"


def _tracked_text_files():
    try:
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout (git ls-files failed): the tracked files cannot be listed")
    for name in filter(None, listed.decode().split("\0")):
        path = REPO / name
        if path.is_file() and path.suffix in (".py", ".md", ".txt", ".toml", ".yaml", ".yml", ".cfg", ".json", "") and path.stat().st_size < 1_000_000:
            yield name, path.read_text(encoding="utf-8", errors="replace")


def test_no_file_points_outside_the_repository_for_protocol_data():
    """READMEs, docstrings and messages name the committed copy or the public source, never the
    developers' reference folder beside the checkout (a user's clone has none)."""
    outside = re.compile(r"\.\./" + "shared|shared/" + "reference|shared/" + "seeds|" + "PROTOCOL" + r"\.md|HUB_" + r"LAYOUTS\.md|LMMS_EVAL_" + r"NOTES\.md")
    found = [f"{name}: {line.strip()}" for name, text in _tracked_text_files() for line in text.splitlines()
             if outside.search(line) and " not in " not in line]  # a check that a path is absent names it

    assert found == []
