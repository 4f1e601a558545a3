"""The wheel holds only `lmms_video_reasoning/...` (plus its metadata)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_wheel_contents(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path), str(REPO)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    wheels = list(tmp_path.glob("lmms_video_reasoning-*.whl"))
    assert len(wheels) == 1
    names = zipfile.ZipFile(wheels[0]).namelist()
    top = {name.split("/")[0] for name in names}
    dist_info = {t for t in top if t.endswith(".dist-info")}
    # plus the .pth that starts lmms_autoload (lmms-eval's `tasks`/`power`/`serve` see our tasks)
    assert top - dist_info == {"lmms_video_reasoning", "lmms_video_reasoning.pth"}, f"unexpected top-level entries: {sorted(top - dist_info)}"
    pth = zipfile.ZipFile(wheels[0]).read("lmms_video_reasoning.pth").decode()
    assert pth.startswith("import ") and "lmms_video_reasoning.utils.lmms.autoload" in pth
    # every sub-package, the task YAMLs and the official prompts are shipped
    for sub in ("utils", "judges", "tasks", "vcr_bench", "vrbench", "cg_bench"):
        assert f"lmms_video_reasoning/{sub}/__init__.py" in names
    assert "lmms_video_reasoning/tasks/doc_source.json" in names
    assert any(n.startswith("lmms_video_reasoning/tasks/") and n.endswith(".yaml") for n in names)
    for bench in ("vcr_bench", "vrbench", "cg_bench"):
        assert any(n.startswith(f"lmms_video_reasoning/{bench}/prompts/") and n.endswith(".txt") for n in names), bench
        assert f"lmms_video_reasoning/{bench}/reference_tables.json" in names, "the papers' tables are package data"
    assert "lmms_video_reasoning/cg_bench/video_meta_info.json" in names  # the official frame table (not on the Hub)
    assert not any("/tests/" in n or n.startswith("tests/") for n in names)
    for bench in ("vcr_bench", "vrbench", "cg_bench"):  # what `lmms-vr upstream` reads from an install
        for name in ("pr.json", "PR.md", "README.md"):
            assert f"lmms_video_reasoning/{bench}/upstream/{name}" in names, (bench, name)
        assert any(n.startswith(f"lmms_video_reasoning/{bench}/upstream/test_") for n in names), bench
    assert any(n.startswith("lmms_video_reasoning/utils/tools/host_pr_files/") and n.endswith(".py") for n in names)
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheels[0]).read(entry_points).decode()
    assert "lmms-vr = lmms_video_reasoning.utils.tools.cli:main" in text
    assert "lmms_video_reasoning = lmms_video_reasoning.utils.lmms.plugin:register" in text
