"""The layer rule of the package: every import points down (or sideways within a package).

    core 0 < media, data 1 < judges 2 < lmms 3 < results 4 < benchmarks 5 < tools 6

Every import counts, also those inside functions: a lazy import is still a dependency. The
benchmarks never import one another, and media and data (same level) stay apart.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NS = "lmms_video_reasoning"
BENCHMARKS = ("vcr_bench", "vrbench", "cg_bench")
LEVEL = {"utils.core": 0, "utils.media": 1, "utils.data": 1, "judges": 2, "utils.lmms": 3,
         "utils.results": 4, **{b: 5 for b in BENCHMARKS}, "utils.tools": 6, "utils": 0}


def package_of(module: str) -> str:
    """'utils.results.report' -> 'utils.results'; 'cg_bench.task' -> 'cg_bench'."""
    parts = module.split(".")
    if parts[0] == "utils" and len(parts) > 1 and f"utils.{parts[1]}" in LEVEL:
        return f"utils.{parts[1]}"
    return parts[0]


def imports_of(path: Path, module: str) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the module's package
                base = module.split(".")[: -node.level]
                target = ".".join(base + ([node.module] if node.module else []))
            elif node.module and node.module.startswith(NS + "."):
                target = node.module[len(NS) + 1:]
            else:
                continue
            names = [f"{target}.{a.name}" for a in node.names]
            found += [(node.lineno, n if package_of(n) != package_of(target) or target in LEVEL else target) for n in names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name[len(NS) + 1:]) for a in node.names if a.name.startswith(NS + ".")]
    return found


def modules():
    for package in LEVEL:
        folder = ROOT / package.replace(".", "/")
        for path in sorted(folder.glob("*.py")):
            yield path, f"{package}.{path.stem}"


def violations() -> list[str]:
    bad = []
    for path, module in modules():
        source = package_of(module)
        for line, target in imports_of(path, module):
            to = package_of(target)
            where = f"{path.relative_to(ROOT)}:{line} imports {target}"
            if to == source or to not in LEVEL:
                continue
            if LEVEL[to] > LEVEL[source]:
                bad.append(f"{where}: upward ({source} is level {LEVEL[source]}, {to} level {LEVEL[to]})")
            elif LEVEL[to] == LEVEL[source]:
                bad.append(f"{where}: sideways between {source} and {to}")
    return bad


def test_every_import_points_down():
    assert violations() == []


def test_the_rule_sees_a_violation(tmp_path, monkeypatch):
    # The check itself: an upward import inside a function is found.
    fake = tmp_path / "utils" / "core"
    fake.mkdir(parents=True)
    (fake / "x.py").write_text("def f():\n    from lmms_video_reasoning.utils.results import report\n")
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    assert any("upward" in v for v in violations())


@pytest.mark.parametrize("package", sorted(LEVEL))
def test_every_layer_exists(package):
    assert (ROOT / package.replace(".", "/") / "__init__.py").is_file()
