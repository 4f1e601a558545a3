"""The upstream host PR "filelock-public-api": its test under each filelock release, before and after.

Not a test. For each filelock (a version, installed from PyPI, or a wheel file), a scratch venv
holding this venv's dependencies (``upstream_validate.clean_venv``: symlinks, no lmms_eval, no
lmms_video_reasoning) with that filelock installed in place of this venv's; in it, the PR's test
(``test/eval/test_filelock_public_api.py``, lmms-eval's tree) against a copy of the
installed lmms-eval 0.7.3:

- ``before``: the copy as installed;
- ``after``: the copy with the PR applied (``host_prs.patched_copy``).

The PR's description quotes the table (``host_prs.NUMBERS_FILELOCK``).

    python benchmarks/filelock_public_api.py [--json] [--filelock 3.16.1 4.2.12 4.3.1 | FILE.whl ...]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "dev"))  # host_prs, upstream_validate: the PR series' tool

SLUG = "filelock-public-api"
TEST = "test/eval/test_filelock_public_api.py"


def venv_with_filelock(spec: str, path: Path) -> tuple[Path, str]:
    """A scratch venv with this venv's dependencies and filelock `spec`; its python and filelock version."""
    from upstream_validate import clean_venv

    python = clean_venv(path)
    site = next(path.glob("lib/python*/site-packages"))
    for entry in site.iterdir():  # symlinks into this venv: removed, never uninstalled through
        if re.match(r"^filelock([-.].*)?$", entry.name):
            entry.unlink()
    requirement = spec if spec.endswith(".whl") else f"filelock=={spec}"
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-warn-script-location", requirement], check=True)
    version = subprocess.run([str(python), "-c", "import filelock, sys; assert sys.prefix in filelock.__file__; print(filelock.__version__)"],
                             check=True, capture_output=True, text=True).stdout.strip()
    return python, version


def trees(work: Path) -> dict[str, Path]:
    """The installed lmms-eval without and with the PR, each with the PR's test beside it."""
    import lmms_eval
    import host_prs

    package = Path(lmms_eval.__file__).parent
    before = work / "before" / "tree"
    shutil.copytree(package, before / "lmms_eval", ignore=shutil.ignore_patterns("__pycache__"))
    after = host_prs.patched_copy(SLUG, package, work / "after")
    for tree in (before, after):
        (tree / TEST).parent.mkdir(parents=True)
        shutil.copyfile(host_prs.HERE / SLUG / TEST, tree / TEST)
    return {"before": before, "after": after}


def run_test(python: Path, tree: Path, work: Path) -> str:
    from upstream_validate import base_env

    proc = subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tree), TEST],
                          check=False, cwd=tree, env={**base_env(work), "PYTHONPATH": str(tree)}, capture_output=True, text=True, timeout=900)
    if proc.returncode == 0 and re.search(r"\b1 passed\b", proc.stdout):
        return "pass"
    missing = re.search(r"(ModuleNotFoundError: [^\n\\]*)", proc.stdout)
    private = re.findall(r"'private': (\[(?:'[^']*',? ?)+\])", proc.stdout)
    reason = missing.group(1) if missing else f"it imports {private[-1]}" if private else proc.stdout.strip().splitlines()[-1]
    others = re.search(r"Omitting (\d+) identical items", proc.stdout)
    if private and not missing and others:
        reason += f"; its {others.group(1)} lock checks pass"
    return f"FAIL ({reason})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--filelock", nargs="+", default=["3.16.1", "4.2.12", "4.3.1"], help="versions (from PyPI) or wheel files")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    import datasets

    rows = []
    with tempfile.TemporaryDirectory(prefix="filelock_public_api_") as tmp:
        work = Path(tmp)
        built = trees(work)
        for index, spec in enumerate(args.filelock):
            python, version = venv_with_filelock(spec, work / f"venv{index}")
            rows.append({"filelock": version, **{label: run_test(python, tree, work) for label, tree in built.items()}})
    if args.json:
        print(json.dumps({"datasets": datasets.__version__, "python": sys.version.split()[0], "rows": rows}, indent=2))
        return
    print("| filelock | without this PR | with this PR |\n|---|---|---|")
    for row in rows:
        print(f"| {row['filelock']} | {row['before']} | {row['after']} |")


if __name__ == "__main__":
    main()
