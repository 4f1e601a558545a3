#!/usr/bin/env python3
"""Install this package with today's newest releases into a fresh venv, run it, say what broke.

    python3 .ci/newest.py                     newest releases pyproject.toml allows: doctor + demo
    python3 .ci/newest.py --unbounded         also lift the upper bounds pyproject.toml sets (is a bound still needed?)
    python3 .ci/newest.py --tests             ... and the test suite (about 17 minutes)
    python3 .ci/newest.py --tests --write-lock   ... and, when all passed, write constraints.txt from that venv

"What broke" is found, not guessed: every package whose version differs from constraints.txt
(the tested set) is put back to its tested version alone (`pip install --no-deps`), and the demo
runs again; a package whose rollback makes the demo pass is named. The run ends with the
versions of the packages the README's support table lists, tested against newest, and exit 0
only when everything passed. Needs only the standard library (run it with any Python >= 3.10).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LOCK = REPO / "constraints.txt"
# the packages the README's support table names
WATCHED = ("lmms-eval", "torch", "transformers", "datasets", "huggingface-hub", "filelock")
SELF = "lmms-video-reasoning"


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_pins(text: str) -> dict[str, str]:
    """`name==version` lines (pip freeze, constraints.txt) as {canonical name: version}."""
    pins = {}
    for line in text.splitlines():
        match = re.match(r"\s*([A-Za-z0-9._-]+)\s*==\s*([^\s;#]+)", line)
        if match:
            pins[canonical(match.group(1))] = match.group(2)
    return pins


def upper_bounded() -> list[str]:
    """Dependencies pyproject.toml gives an upper bound (`<`, `<=`, `!=`), as pip requirement names."""
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    block = text.split("dependencies = [", 1)[1].split("]", 1)[0]
    names = []
    for requirement in re.findall(r'"([^"]+)"', block):
        name = re.match(r"[A-Za-z0-9._-]+", requirement).group()
        if re.search(r"(<|!=)", requirement) and canonical(name) != "lmms-eval":  # the host's minor series is the contract
            names.append(name)
    return names


def _failure_cause():
    """`utils/lmms/cli_run.failure_cause` (standard library only), read from this checkout: this
    script runs outside the venvs it makes, where the package is not installed."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_lmms_vr_cli_run", REPO / "utils" / "lmms" / "cli_run.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module.failure_cause


failure_cause = _failure_cause()


def last_line(text: str) -> str:
    """The cause a failed command printed: its last traceback's exception line (`failure_cause`),
    else doctor's `[OFF]` findings, else its last line."""
    cause = failure_cause(text)
    if cause:
        return cause[:300]
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    off = [line for line in lines if line.startswith("[OFF]")]
    return "; ".join(off)[:600] if off else (lines or ["(no output)"])[-1][:300]


def run(cmd: list[str], log: Path, **kwargs) -> tuple[int, str, float]:
    started = time.monotonic()
    with log.open("w") as out:
        code = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, text=True, **kwargs).returncode
    return code, log.read_text(errors="replace"), time.monotonic() - started


class Venv:
    def __init__(self, folder: Path, logs: Path):
        self.folder, self.logs = folder, logs
        self.python = folder / "bin" / "python"

    def pip(self, *args: str, log: str) -> tuple[int, str, float]:
        return run([str(self.python), "-m", "pip", "--disable-pip-version-check", *args], self.logs / log)

    def freeze(self) -> dict[str, str]:
        out = subprocess.run([str(self.python), "-m", "pip", "freeze", "--all"], capture_output=True, text=True).stdout
        return {name: version for name, version in parse_pins(out).items() if name != SELF}

    def demo(self, work: Path, log: str) -> tuple[bool, str, float]:
        """`lmms-vr demo` on the generated sample, in folders of this run (the user's cache is left alone)."""
        code, text, seconds = run([str(self.folder / "bin" / "lmms-vr"), "demo", "--out", str(work / "sample"),
                                   "--output_path", str(work / "demo_results")], self.logs / log)
        return code == 0, last_line(text), seconds


def newest_on_index(venv: Venv, name: str) -> str:
    """The newest release the package index offers (`pip index versions`), whatever pyproject.toml's
    range or this machine's pip constraints let the install take."""
    out = subprocess.run([str(venv.python), "-m", "pip", "index", "versions", name], capture_output=True, text=True).stdout
    match = re.match(r"\S+ \(([^)]+)\)", out.strip())
    return match.group(1) if match else "?"


def check(venv: Venv, work: Path, tests: bool) -> list[dict]:
    """doctor, demo, and the test suite when asked: one entry each, with the cause of a failure."""
    steps = []
    code, text, seconds = run([str(venv.folder / "bin" / "lmms-vr"), "doctor", "--no-network"], venv.logs / "doctor.log")
    steps.append({"step": "lmms-vr doctor", "ok": code == 0, "cause": "" if code == 0 else last_line(text), "seconds": round(seconds)})
    ok, cause, seconds = venv.demo(work, "demo.log")
    steps.append({"step": "lmms-vr demo", "ok": ok, "cause": "" if ok else cause, "seconds": round(seconds)})
    if tests:
        code, text, seconds = run([str(venv.python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "3", "--dist", "worksteal"],
                                  venv.logs / "tests.log", cwd=REPO)
        summary = last_line(text) if code else (text.strip().splitlines() or [""])[-1]
        steps.append({"step": "tests", "ok": code == 0, "cause": "" if code == 0 else summary, "seconds": round(seconds)})
    return steps


def culprits(venv: Venv, work: Path, changed: dict[str, tuple[str, str]]) -> list[dict]:
    """Each changed package rolled back alone to its tested version: does the demo pass then?"""
    found = []
    for name, (tested, newest) in sorted(changed.items()):
        if tested is None or newest is None:
            continue  # added or dropped by the resolution: nothing to roll back to
        if venv.pip("install", "-q", "--no-deps", f"{name}=={tested}", log=f"rollback-{name}.log")[0]:
            continue
        ok, cause, _ = venv.demo(work, f"demo-rollback-{name}.log")
        venv.pip("install", "-q", "--no-deps", f"{name}=={newest}", log=f"restore-{name}.log")
        print(f"  {name} {newest} -> {tested}: demo {'passes' if ok else 'still fails: ' + cause}", flush=True)
        if ok:
            found.append({"package": name, "breaking": newest, "tested": tested})
    return found


def write_lock(pins: dict[str, str]) -> None:
    header = [line for line in LOCK.read_text(encoding="utf-8").splitlines() if line.startswith("#")] if LOCK.exists() else []
    body = [f"{name}=={version}" for name, version in sorted(pins.items()) if name not in ("pip", "setuptools", "wheel")]
    LOCK.write_text("\n".join(header + body) + "\n", encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--unbounded", action="store_true", help="also install the newest releases pyproject.toml excludes")
    parser.add_argument("--tests", action="store_true", help="run the test suite too (needs chromium and zip, as .ci/run installs)")
    parser.add_argument("--write-lock", action="store_true", help="when everything passed, write constraints.txt from the new venv")
    parser.add_argument("--keep", metavar="DIR", help="build the venv and logs in DIR and keep them (default: a temporary folder)")
    parser.add_argument("--json", metavar="FILE", help="also write the result as JSON")
    args = parser.parse_args()
    if args.write_lock and (args.unbounded or not args.tests):
        parser.error("--write-lock needs --tests and the bounds pyproject.toml sets (no --unbounded): the lock is what passed")

    scratch = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="lmms-vr-newest-"))
    logs = scratch / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    venv = Venv(scratch / "venv", logs)
    print(f"fresh venv in {venv.folder} (logs: {logs})", flush=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv.folder)], check=True)
    code, text, seconds = venv.pip("install", f"{REPO}[test]", log="install.log")
    steps = [{"step": "pip install .[test]", "ok": code == 0, "cause": "" if code == 0 else last_line(text), "seconds": round(seconds)}]
    if code == 0 and args.unbounded:
        names = upper_bounded()
        code, text, _ = venv.pip("install", "-U", *names, log="unbounded.log")
        steps.append({"step": f"pip install -U {' '.join(names)}", "ok": code == 0, "cause": "" if code == 0 else last_line(text), "seconds": 0})
    if all(step["ok"] for step in steps):
        steps += check(venv, scratch, args.tests)

    tested = parse_pins(LOCK.read_text(encoding="utf-8")) if LOCK.exists() else {}
    newest = venv.freeze() if venv.python.exists() else {}
    changed = {name: (tested.get(name), newest.get(name)) for name in set(tested) | set(newest)
               if tested.get(name) != newest.get(name) and name not in ("pip", "setuptools", "wheel")}
    passed = all(step["ok"] for step in steps)
    found = []
    if not passed and newest and any(step["step"] == "lmms-vr demo" and not step["ok"] for step in steps):
        print(f"the demo failed: rolling back each of {len(changed)} changed packages alone", flush=True)
        found = culprits(venv, scratch, changed)

    print(f"\n{'step':<40} result")
    for step in steps:
        print(f"{step['step']:<40} {'ok' if step['ok'] else 'FAILED: ' + step['cause']} ({step['seconds']} s)")
    offered = {name: newest_on_index(venv, name) for name in WATCHED} if venv.python.exists() else {}
    print(f"\n{'package':<18} {'tested':<12} {'installed':<12} newest on the index")
    for name in WATCHED:
        held = "" if offered.get(name) in (newest.get(name), None) else "  (held back: pyproject.toml's range or pip's constraints here)"
        print(f"{name:<18} {tested.get(name, '-'):<12} {newest.get(name, '-'):<12} {offered.get(name, '?')}{held}")
    print(f"\n{len(changed)} packages differ from constraints.txt" + (": " + ", ".join(
        f"{name} {old or '-'} -> {new or '-'}" for name, (old, new) in sorted(changed.items())) if changed else ""))
    if found:
        print("what broke: " + "; ".join(f"{f['package']} {f['breaking']} (the demo passes with the tested {f['tested']})" for f in found))
    elif not passed:
        print("what broke: no single rollback makes the demo pass (see the logs)" if changed else "what broke: see the logs")
    if args.json:
        Path(args.json).write_text(json.dumps({"date": time.strftime("%Y-%m-%d"), "unbounded": args.unbounded, "passed": passed,
                                               "steps": steps, "watched": {n: {"tested": tested.get(n), "installed": newest.get(n), "index": offered.get(n)} for n in WATCHED},
                                               "changed": {n: list(v) for n, v in sorted(changed.items())}, "culprits": found}, indent=2))
    if passed and args.write_lock:
        write_lock(newest)
        print(f"constraints.txt written ({len(newest)} packages)")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
