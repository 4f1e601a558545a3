"""`lmms-vr doctor`: whether lmms-eval evaluates here, which integrations are active, and the fix for each that is not.

Every line is measured here (docs/internals.md): the install and its start-up .pth; one document
of the sample benchmark (`EVALUATED_TASK`, no judge) through `python -m lmms_eval` in a child
process, since listing tasks is not enough (a dependency release can fail on the first document:
the traceback's last line is then the finding); the tasks as `python -m lmms_eval` and as
`lmms-eval tasks list` / `serve` see them; each touchpoint of utils/lmms/host.py; fast video inputs
per known model; every setting; each benchmark's judge (`--no-network`: not contacted) and data.
States: ok, OFF (a run would miss it; exit status 1), warn (judged metrics would be NaN), info.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

from lmms_video_reasoning.utils.core import registry, settings
from lmms_video_reasoning.utils.lmms import autoload, host, preflight
from lmms_video_reasoning.utils.lmms.preflight import INFO, OFF, OK, WARN, Finding

# The document `doctor` evaluates: multiple choice, scored without a judge.
EVALUATED_TASK = "cg_bench_mcq"

# Run in a child process: lmms-eval loaded as `python -m lmms_eval` loads it (argv[2] "run": models
# first, then the evaluator), or as `lmms-eval tasks list` / `serve` do (a TaskManager, no models).
_PROBE = """
import json, sys
if sys.argv[2] == "run":
    import lmms_eval.models, lmms_eval.evaluator
from lmms_eval.tasks import TaskManager
from lmms_video_reasoning.utils.lmms import host
missing = sorted(set(json.loads(sys.argv[1])) - set(TaskManager().all_tasks))
print(json.dumps({"missing": missing, "touchpoints": {t.name: t.state for t in host.TOUCHPOINTS.values()}}))
"""


def install_kind() -> tuple[str, bool]:
    """("regular" | "editable" | "not installed", whether the start-up .pth is in site-packages), from
    site-packages only (a checkout's `*.egg-info` is not an install)."""
    import site

    folders = [*site.getsitepackages(), *([site.getusersitepackages()] if site.ENABLE_USER_SITE else [])]
    dists = [d for d in importlib.metadata.distributions(path=folders)
             if (d.metadata["Name"] or "").lower().replace("_", "-") == "lmms-video-reasoning"]
    if not dists:
        return "not installed", False
    direct = dists[0].read_text("direct_url.json")
    editable = bool(direct and json.loads(direct).get("dir_info", {}).get("editable"))
    pth = any((Path(folder) / "lmms_video_reasoning.pth").is_file() for folder in folders)
    return ("editable" if editable else "regular"), pth


def _child(mode: str, tasks: list[str]) -> dict:
    proc = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(tasks), mode], capture_output=True, text=True, timeout=300)
    if proc.returncode != 0 or not proc.stdout.strip():
        return {"error": (proc.stderr.strip().splitlines() or ["no output"])[-1]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def check_install() -> list[Finding]:
    kind, pth = install_kind()
    version = host.host_version()
    findings = [Finding("install", OK if kind != "not installed" else OFF, f"{kind} install of lmms-video-reasoning",
                        "pip install ." if kind == "not installed" else "")]
    verified = version in host.VERIFIED
    findings.append(Finding("lmms-eval", OK if verified else OFF,
                            f"lmms-eval {version}" + ("" if verified else f" (touchpoints verified on {', '.join(host.VERIFIED)})"),
                            "" if verified else f"pip install 'lmms-eval=={host.VERIFIED[-1]}', or LMMS_VR_HOST_UNVERIFIED=1"))
    try:
        no_autoload, why = autoload.NO_AUTOLOAD.read(), "LMMS_VR_NO_AUTOLOAD is set"
    except settings.SettingError:  # the start-up hook stays off (its setting's line names the value)
        no_autoload, why = True, "LMMS_VR_NO_AUTOLOAD has a value that is not accepted"
    active = pth and not no_autoload
    findings.append(Finding("autoload", OK if active else OFF, "start-up hook active" if active else
                            why if no_autoload else "the start-up .pth is not installed",
                            "" if active else "unset LMMS_VR_NO_AUTOLOAD" if no_autoload else "reinstall with `pip install .`"))
    return findings


def _tasks_finding(topic: str, child: dict, missing_text: str, ok_text: str) -> Finding:
    """Whether a child found every task (`missing_text` formats the missing `names`)."""
    if "error" in child:
        return Finding(topic, OFF, child["error"])
    missing = child["missing"]
    if not missing:
        return Finding(topic, OK, ok_text)
    return Finding(topic, OFF, f"{len(missing)} " + missing_text.format(names=", ".join(missing[:5])), host.TASK_PATH.workaround)


def check_host() -> list[Finding]:
    tasks = sorted(registry.task_names())  # what lmms-eval must find
    run = _child("run", tasks)
    if "error" in run:
        return [Finding("python -m lmms_eval", OFF, f"lmms-eval could not be loaded: {run['error']}", "pip install '.[test]'")]
    findings = [_tasks_finding("tasks: python -m lmms_eval", run, "tasks not found: {names}", "every task of every benchmark found"),
                _tasks_finding("tasks: lmms-eval tasks list / serve", _child("list", tasks),
                               "tasks not listed (only the start-up .pth reaches these commands)", "every task listed")]
    for point in host.TOUCHPOINTS.values():
        state = run["touchpoints"].get(point.name, "not installed")
        if point.name in ("task-path", "fast-inputs"):
            continue  # measured above / below, by what they do
        if state == "not installed":  # used at run time: what can be known now is the version
            state = f"off: {host.unverified()}" if host.unverified() else "on"
        findings.append(Finding(point.name, OK, point.gives) if state == "on" else
                        Finding(point.name, OFF, f"{state}; you lose: {point.lost}", point.workaround))
    return findings


def check_evaluation() -> list[Finding]:
    """One document of the sample benchmark through `python -m lmms_eval` with the replay model."""
    import tempfile
    import time

    from lmms_video_reasoning.utils.lmms.cli_run import Evaluation
    from lmms_video_reasoning.utils.tools.demo import ensure_sample, sample_settings

    topic = "evaluation: python -m lmms_eval"
    try:
        sample = ensure_sample()
    except Exception as error:  # noqa: BLE001 - reported as the finding
        return [Finding(topic, OFF, f"the sample benchmark could not be written: {type(error).__name__}: {error}", "lmms-vr sample --out DIR")]
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="lmms-vr-doctor-") as output_path:
        evaluation = Evaluation(EVALUATED_TASK, Path(output_path), model_args=f"predictions={sample / 'predictions.jsonl'}",
                                extra=("--limit", "1", "--verbosity", "WARNING"))
        _results, cause = evaluation.run({**os.environ, **sample_settings(sample)}, echo=False, timeout=600)
    if cause:
        return [Finding(topic, OFF, f"lmms-eval cannot evaluate: {cause}",
                        "install the tested dependency set (`pip install -c constraints.txt .` in the repository); "
                        f"`lmms-vr demo --tasks {EVALUATED_TASK}` shows lmms-eval's whole output")]
    return [Finding(topic, OK, f"one document of {EVALUATED_TASK} (sample benchmark, vr_replay) evaluated in {time.time() - started:.0f} s")]


def check_inputs() -> list[Finding]:
    from lmms_video_reasoning.utils.lmms import model_readings

    findings = []
    for model in sorted(set(model_readings.KNOWN_MODELS.values())):
        unverified = ", ".join(model_readings.unverified_versions(model))
        findings.append(Finding(f"fast inputs: {model}", OFF, f"installed {unverified} not verified: the model reads the original "
                                "video", "run tests/test_model_equivalence.py on this version") if unverified else
                        Finding(f"fast inputs: {model}", OK, "proxy clips of the frames it keeps"))
    return findings


def check_data() -> list[Finding]:
    return [preflight.data_finding(bench) for bench in registry.benchmarks() if bench.data_module is not None]


def diagnose(network: bool) -> list[Finding]:
    from concurrent.futures import ThreadPoolExecutor

    from lmms_video_reasoning.utils.lmms import launcher

    registry.declare_all_settings()  # settings are declared where they are used
    launcher.register_judge_settings()  # lmms-eval's API_TYPE=local, as a run would resolve it
    with ThreadPoolExecutor(1) as pool:  # the evaluation's child runs beside the probes' children
        evaluation = pool.submit(check_evaluation)
        found = [*check_install(), *check_host()]
        found += evaluation.result()
    judges = [preflight.judge_finding(bench.judge, network) for bench in registry.benchmarks() if bench.judge is not None]
    return [*found, *check_inputs(), *preflight.setting_findings(), *judges, *check_data()]


def main(args: argparse.Namespace) -> int:
    findings = diagnose(network=not args.no_network)
    if args.json:
        print(json.dumps([asdict(f) for f in findings], indent=2))
    else:
        mark = {OK: "[ok] ", OFF: "[OFF]", WARN: "[ ! ]", INFO: "[ - ]"}
        for f in findings:
            print(f"{mark[f.state]} {f.topic}: {f.detail}" + (f"\n        fix: {f.fix}" if f.fix and f.state != OK else ""))
    return 1 if any(f.state == OFF for f in findings) else 0
