"""The start-up check of an lmms-eval run (utils/lmms/preflight.py `start`), through lmms-eval's own CLI.

Every run uses the replay model on the generated sample. Where the check must come before the
model loads, the replay model is given a predictions file that does not exist: loading the model
would fail with "predictions file not found", so its absence shows the model was never loaded.
Each test prints how long the rejected run took (the process start included: lmms-eval indexes
its hundreds of tasks first); no time is asserted.
"""

from __future__ import annotations

import glob
import json
import subprocess
import sys
from pathlib import Path

import pytest

from lmms_cli import lmms_eval_process, metric

PREFIX = "lmms-video-reasoning: cannot start: "
TASKS = "vcr_cot,vr_bench,cg_bench_mcq"  # one task of each benchmark
MODEL_NEVER_LOADED = "predictions file not found"
# An invalid value for each kind of setting that has a validator (text settings take anything).
INVALID = {"bool": "maybe", "choice": "not-a-choice", "int": "lots", "float": "nan"}

_LIST_SETTINGS = """
import json, sys
from lmms_video_reasoning.utils.core import registry, settings
invalid = json.loads(sys.argv[1])
found = []
for setting in registry.declare_all_settings():
    if setting.kind in invalid:
        try:
            setting.parse(invalid[setting.kind])
        except settings.SettingError as error:
            found.append([setting.name, invalid[setting.kind], str(error)])
print(json.dumps(found))
"""


@pytest.fixture(scope="module")
def invalid_settings() -> list[list[str]]:
    """[name, invalid value, the error it must give] for every setting the package declares with a
    validator, as a fresh process sees them (`registry.declare_all_settings`)."""
    proc = subprocess.run([sys.executable, "-c", _LIST_SETTINGS, json.dumps(INVALID)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(found) >= 15 and {"LMMS_VR_CG_STRICT", "LMMS_VR_VIDEO_INPUT"} <= {name for name, _, _ in found}, found
    return found


def rejected_at_start(proc, seconds: float, output: Path, what: str) -> str:
    """The run stopped with our message before the model loaded and before generation; the message."""
    log = proc.stdout + proc.stderr
    assert proc.returncode != 0, f"the run went on:\n{log[-3000:]}"
    assert PREFIX in log, log[-3000:]
    assert MODEL_NEVER_LOADED not in log, f"the model was loaded before the check:\n{log[-3000:]}"
    assert "Traceback" not in log, log[-3000:]
    assert not glob.glob(str(output / "**" / "*_samples_*.jsonl"), recursive=True), "samples were generated"
    print(f"{what}: rejected at start-up in {seconds:.1f} s (process start included)")
    return log[log.index(PREFIX):]


def test_every_invalid_setting_is_rejected_at_once_before_the_model_loads(tmp_path, sample_env, invalid_settings):
    env = {**sample_env, **{name: value for name, value, _error in invalid_settings}}
    proc, seconds = lmms_eval_process(TASKS, tmp_path / "out", env=env,
                                      model_args=f"predictions={tmp_path / 'never_read.jsonl'}")
    message = rejected_at_start(proc, seconds, tmp_path / "out", f"all {len(invalid_settings)} invalid settings")
    assert message.startswith(f"{PREFIX}{len(invalid_settings)} problems, nothing was generated:"), message[:500]
    missing = [name for name, _value, error in invalid_settings if f"\n  - {error}" not in message]
    assert not missing, f"not named ({seconds:.1f} s): {missing}\n{message}"


@pytest.mark.parametrize("name, value, allowed", [
    ("LMMS_VR_CG_STRICT", "maybe", "use one of 1, true, yes, on, 0, false, no, off"),  # was: NaN metrics after generation
    ("LMMS_VR_VIDEO_INPUT", "fsat", "use one of fast, path"),  # was: a traceback once the model had loaded
])
def test_an_invalid_setting_is_rejected_before_the_model_loads(tmp_path, sample_env, name, value, allowed):
    proc, seconds = lmms_eval_process("cg_bench_mcq", tmp_path / "out", env={**sample_env, name: value},
                                      model_args=f"predictions={tmp_path / 'never_read.jsonl'}")
    message = rejected_at_start(proc, seconds, tmp_path / "out", f"{name}={value}")
    assert message.splitlines()[0].startswith(f"{PREFIX}{name}={value!r} is not accepted: {allowed} ("), f"({seconds:.1f} s) {message}"


def test_every_data_root_that_is_not_a_folder_is_reported_at_once(tmp_path, sample_env):
    env = {**sample_env, **{variable: str(tmp_path / "missing" / variable) for variable in ("VCR_BENCH_ROOT", "VRBENCH_ROOT", "CGBENCH_ROOT")}}
    proc, seconds = lmms_eval_process(TASKS, tmp_path / "out", env=env,
                                      model_args=f"predictions={tmp_path / 'never_read.jsonl'}")
    message = rejected_at_start(proc, seconds, tmp_path / "out", "three missing data roots")
    assert message.startswith(f"{PREFIX}3 problems"), message
    for variable, benchmark in (("VCR_BENCH_ROOT", "vcr_bench"), ("VRBENCH_ROOT", "vrbench"), ("CGBENCH_ROOT", "cg_bench")):
        assert f"{variable}={tmp_path / 'missing' / variable} is not a directory" in message, message
        assert f"lmms-vr prepare {benchmark} --root DIR && export {variable}=DIR" in message, message


def test_every_benchmark_whose_data_is_missing_is_reported_at_once(tmp_path, sample_dir, sample_env):
    """Roots that exist but hold no annotations: found when the tasks load (after the model), each named."""
    env = dict(sample_env)
    for variable in ("VCR_BENCH_ROOT", "VRBENCH_ROOT", "CGBENCH_ROOT"):
        (tmp_path / variable).mkdir()
        env[variable] = str(tmp_path / variable)
    proc, seconds = lmms_eval_process(TASKS, tmp_path / "out", env=env,
                                      model_args=f"predictions={sample_dir / 'predictions.jsonl'}")
    log = proc.stdout + proc.stderr
    assert proc.returncode != 0 and PREFIX in log and "Traceback" not in log, log[-3000:]
    assert not glob.glob(str(tmp_path / "out" / "**" / "*_samples_*.jsonl"), recursive=True)
    message = log[log.index(PREFIX):]
    assert message.startswith(f"{PREFIX}3 problems"), message
    for variable in ("VCR_BENCH_ROOT", "VRBENCH_ROOT", "CGBENCH_ROOT"):
        assert f"under {variable}={tmp_path / variable}" in message, message
    print(f"three empty data roots: rejected when the tasks loaded, in {seconds:.1f} s (process start included)")


def test_tasks_cg_bench_from_a_folder_holding_cg_bench(tmp_path, sample_dir, sample_env):
    """The clone's root holds the package folder ./cg_bench: lmms-eval reads `--tasks cg_bench` as
    that folder, finds no YAML in it and stops ("No tasks specified, or no tasks found")."""
    clone = tmp_path / "clone"
    (clone / "cg_bench").mkdir(parents=True)
    (clone / "cg_bench" / "__init__.py").write_text("")
    proc, _seconds = lmms_eval_process("cg_bench", tmp_path / "out", env=sample_env,
                                       model_args=f"predictions={sample_dir / 'predictions.jsonl'}", cwd=clone,
                                       extra=["--limit", "2"])
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "Traceback" not in log, log[-3000:]
    assert f"the current folder holds a folder {clone / 'cg_bench'}" in log and "run from another folder" in log, log[-3000:]
    results = json.loads(Path(glob.glob(str(tmp_path / "out" / "**" / "*_results.json"), recursive=True)[0]).read_text())
    # the group runs mcq, open and blind: mcq generates once and reports long_acc (no answer generated twice)
    assert set(results["results"]) == {"cg_bench", "cg_bench_mcq", "cg_bench_open", "cg_bench_blind"}, results["results"].keys()
    assert metric(results, "cg_bench_mcq", "long_acc") >= 0, results["results"].keys()
