"""One rule for every environment variable (utils/core/settings.py), and the settings in use."""

from __future__ import annotations

import pytest

from lmms_video_reasoning.utils.core import settings
from lmms_video_reasoning.utils.core.memo import BoundedMemo

FLAG = settings.declare("LMMS_VR_TEST_FLAG", "bool", False, "a test flag", scoring=True)
SHARE = settings.declare("LMMS_VR_TEST_SHARE", "float", 0.05, "a test share", minimum=0.0, maximum=1.0)
MODE = settings.declare("LMMS_VR_TEST_MODE", "choice", "fast", "a test mode", choices=("fast", "path"))


@pytest.mark.parametrize("raw, value", [("", False), ("1", True), ("TRUE", True), ("yes", True), ("on", True),
                                        ("0", False), ("false", False), ("No", False), ("off", False), ("  ", False)])
def test_one_boolean_rule(raw, value):
    assert FLAG.read({"LMMS_VR_TEST_FLAG": raw}) is value


@pytest.mark.parametrize("raw", ["ture", "2", "enabled", "y"])
def test_a_typo_is_an_error_naming_the_variable_and_the_values(raw):
    with pytest.raises(settings.SettingError, match=rf"LMMS_VR_TEST_FLAG='{raw}' is not accepted: use one of 1, true, yes, on, 0"):
        FLAG.read({"LMMS_VR_TEST_FLAG": raw})


@pytest.mark.parametrize("raw", ["nan", "inf", "-0.5", "1.5", "lots"])
def test_numbers_are_finite_and_bounded(raw):
    with pytest.raises(settings.SettingError, match="LMMS_VR_TEST_SHARE=.*from 0 to 1"):
        SHARE.read({"LMMS_VR_TEST_SHARE": raw})
    assert SHARE.read({"LMMS_VR_TEST_SHARE": "0.2"}) == 0.2 and SHARE.read({}) == 0.05


def test_choices_any_case():
    assert MODE.read({"LMMS_VR_TEST_MODE": "PATH"}) == "path"
    with pytest.raises(settings.SettingError, match="use one of fast, path"):
        MODE.read({"LMMS_VR_TEST_MODE": "slow"})


def test_the_suites_own_settings_follow_the_rule():
    from lmms_video_reasoning.cg_bench import outcomes
    from lmms_video_reasoning.judges import failure_share
    from lmms_video_reasoning.utils.lmms import autoload, model_video

    with pytest.raises(settings.SettingError, match="LMMS_VR_NO_AUTOLOAD"):  # was: any value but "0" disabled the hooks
        autoload.NO_AUTOLOAD.read({"LMMS_VR_NO_AUTOLOAD": "maybe"})
    assert autoload.NO_AUTOLOAD.read({"LMMS_VR_NO_AUTOLOAD": "false"}) is False
    for raw in ("nan", "inf", "-5"):  # was: accepted
        with pytest.raises(settings.SettingError, match="LMMS_VR_PROXY_CACHE_MB"):
            model_video.CACHE_MB.read({"LMMS_VR_PROXY_CACHE_MB": raw})
    with pytest.raises(settings.SettingError, match="LMMS_VR_CG_STRICT"):
        outcomes.STRICT.read({"LMMS_VR_CG_STRICT": "strict"})
    assert failure_share.failed_share_limit({"LMMS_VR_JUDGE_FAILED_SHARE": "0.1"}) == 0.1


def test_a_typo_in_a_vcr_bench_scoring_switch_is_an_error_not_off(monkeypatch):
    from lmms_video_reasoning.vcr_bench import scoring

    monkeypatch.setenv("VCR_BENCH_LENIENT_VERDICT", "ture")
    with pytest.raises(settings.SettingError, match="VCR_BENCH_LENIENT_VERDICT='ture'"):
        scoring.resolve_settings()


def test_resolved_records_scoring_settings_and_reports_invalid_ones():
    env = {"LMMS_VR_TEST_FLAG": "1", "LMMS_VR_TEST_SHARE": "9"}
    scoring = settings.resolved(env, scoring_only=True)
    assert scoring["LMMS_VR_TEST_FLAG"] is True and "LMMS_VR_TEST_SHARE" not in scoring  # not a scoring setting
    everything = settings.resolved(env)
    assert everything["LMMS_VR_TEST_SHARE"].startswith("invalid: LMMS_VR_TEST_SHARE='9'")
    assert everything["LMMS_VR_TEST_MODE"] == "fast"


def test_a_conflicting_declaration_is_refused():
    assert settings.declare("LMMS_VR_TEST_FLAG", "bool", False, "a test flag", scoring=True) == FLAG
    with pytest.raises(ValueError, match="declared twice differently"):
        settings.declare("LMMS_VR_TEST_FLAG", "bool", True, "a test flag", scoring=True)


def test_judge_accounting_records_the_scoring_settings(tmp_path, monkeypatch):
    import json

    from lmms_video_reasoning.judges import CacheOnlyJudge

    monkeypatch.setenv("LMMS_VR_TEST_FLAG", "on")
    judge = CacheOnlyJudge("vcr_bench", model="m", cache_path=tmp_path / "c.sqlite")
    judge.write_accounting(tmp_path / "a.json")
    assert json.loads((tmp_path / "a.json").read_text())["settings"]["LMMS_VR_TEST_FLAG"] is True


def test_bounded_memo_drops_the_least_recently_used():
    memo = BoundedMemo(2)
    memo["a"], memo["b"] = 1, 2
    assert memo.get("a") == 1  # a is now the most recent
    memo["c"] = 3
    assert "b" not in memo and memo.get("a") == 1 and memo.get("c") == 3 and len(memo) == 2
    calls = []
    assert memo.get_or_make("d", lambda: calls.append(1) or 4) == 4 and memo.get_or_make("d", lambda: 5) == 4 and calls == [1]


_EVERY_DECLARATION = """
import importlib, json, pathlib
import lmms_video_reasoning.utils
from lmms_video_reasoning.utils.core import registry, settings
reached = {s.name for s in registry.declare_all_settings()}
root = pathlib.Path(lmms_video_reasoning.utils.__file__).parents[1]
modules = []
for path in sorted(root.rglob("*.py")):
    rel = path.relative_to(root)
    if set(rel.parts) & {"tests", "benchmarks", "build", "dev"} or rel.parts[0].startswith("."):
        continue
    if "settings.declare(" in path.read_text(encoding="utf-8"):
        modules.append(".".join(rel.with_suffix("").parts))
        importlib.import_module("lmms_video_reasoning." + modules[-1])
print(json.dumps({"modules": modules, "missed": sorted({s.name for s in settings.declared()} - reached)}))
"""


def test_declare_all_reaches_every_setting_the_package_declares():
    """The start-up check validates what `declare_all_settings` declares: a module declaring a setting that
    neither SUITE_MODULES nor a benchmark's hooks reach would go unchecked."""
    import json
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", _EVERY_DECLARATION], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(found["modules"]) >= 10 and found["missed"] == [], found


def test_problems_lists_every_invalid_value():
    env = {"LMMS_VR_TEST_FLAG": "ture", "LMMS_VR_TEST_SHARE": "2", "LMMS_VR_TEST_MODE": "path"}
    found = [str(error) for error in settings.problems(env) if "LMMS_VR_TEST_" in str(error)]
    assert [text.split("=")[0] for text in found] == ["LMMS_VR_TEST_FLAG", "LMMS_VR_TEST_SHARE"], found
