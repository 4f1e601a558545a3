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
    from lmms_video_reasoning.cg_bench import task as cg_task
    from lmms_video_reasoning.judges import failure_share
    from lmms_video_reasoning.utils.lmms import autoload, proxy_clips

    with pytest.raises(settings.SettingError, match="LMMS_VR_NO_AUTOLOAD"):  # was: any value but "0" disabled the hooks
        autoload.NO_AUTOLOAD.read({"LMMS_VR_NO_AUTOLOAD": "maybe"})
    assert autoload.NO_AUTOLOAD.read({"LMMS_VR_NO_AUTOLOAD": "false"}) is False
    for raw in ("nan", "inf", "-5"):  # was: accepted
        with pytest.raises(settings.SettingError, match="LMMS_VR_PROXY_CACHE_MB"):
            proxy_clips.CACHE_MB.read({"LMMS_VR_PROXY_CACHE_MB": raw})
    with pytest.raises(settings.SettingError, match="LMMS_VR_CG_STRICT"):
        settings.chosen_values(cg_task.VARIABLES, {}, {"LMMS_VR_CG_STRICT": "strict"})
    assert failure_share.FAILED_SHARE_VARIABLE.read({"LMMS_VR_JUDGE_FAILED_SHARE": "0.1"}) == 0.1


def test_an_option_is_immutable():
    """No side channel: a declared option (or its variable) cannot be rebound or given an override."""
    from lmms_video_reasoning.judges import failure_share

    for option in (failure_share.FAILED_SHARE, failure_share.FAILED_SHARE_VARIABLE):
        with pytest.raises(AttributeError):
            option.default = 0.5
        with pytest.raises(AttributeError):
            option.override = failure_share.FAILED_SHARE_VARIABLE
    assert failure_share.FAILED_SHARE.value({"judge_failed_share": 0.2}) == 0.2 and failure_share.FAILED_SHARE.value() == 0.05


def test_a_typo_in_a_vcr_bench_scoring_switch_is_an_error_not_off(monkeypatch):
    from lmms_video_reasoning.vcr_bench import scoring

    monkeypatch.setenv("VCR_BENCH_LENIENT_VERDICT", "ture")
    with pytest.raises(settings.SettingError, match="VCR_BENCH_LENIENT_VERDICT='ture'"):
        settings.task_settings(scoring.VARIABLES)  # what the plugin hands the scoring


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
    if "settings.declare(" in path.read_text(encoding="utf-8") or "settings.variable(" in path.read_text(encoding="utf-8"):
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


def test_the_setting_findings_list_every_invalid_value(monkeypatch):
    from lmms_video_reasoning.utils.lmms.preflight import OFF, setting_findings

    for name, value in {"LMMS_VR_TEST_FLAG": "ture", "LMMS_VR_TEST_SHARE": "2", "LMMS_VR_TEST_MODE": "path"}.items():
        monkeypatch.setenv(name, value)
    found = [finding.detail for finding in setting_findings() if finding.state == OFF and "LMMS_VR_TEST_" in finding.detail]
    assert [text.split("=")[0] for text in found] == ["LMMS_VR_TEST_FLAG", "LMMS_VR_TEST_SHARE"], found


# ---------------------------------------------------------------- settings that change a score: a task's options

def _cg_doc(qid: int) -> dict:
    return {"sample_id": str(qid), "task_kind": "long", "mode": "long", "qid": qid, "video_uid": "v", "question": "Q",
            "answer": "Red", "right_answer": "B", "clue_intervals": [[10.0, 20.0]], "domain": "GUI",
            "sub_category": "Entity Perception", "duration": 700}


def test_a_task_declares_its_score_changing_settings_and_its_yaml_carries_them():
    """Each option of the benchmark has the task's value (the setting's default unless the task
    declares one) in `metadata.settings`, which lmms-eval copies into its results' config block."""
    from lmms_video_reasoning.utils.core import registry, task_yaml

    vr = registry.get("vrbench")
    assert task_yaml.task_config(vr, vr.task("vr_bench_official"))["metadata"]["settings"] == {
        "protocol": "official", "judged_reply": "full", "think_prefilled": False, "judge_failed_share": 0.05}
    assert vr.task_options(vr.task("vr_bench"))["protocol"] == "default"
    cg = registry.get("cg_bench")
    assert set(cg.task_options(cg.task("cg_bench_mcq"))) == {"strict", "official_reversed", "judged_reply", "think_prefilled",
                                                            "judge_failed_share"}
    # every score-changing setting of a benchmark's scoring is one of its options
    scoring_settings = {s.name for b in registry.builtin() for s in b.options}
    assert {"VCR_BENCH_LENIENT_VERDICT", "VCR_BENCH_INCLUDE_BACKGROUND", "VCR_BENCH_OFFICIAL_REVERSED", "LMMS_VR_CG_STRICT",
            "LMMS_VR_CG_OFFICIAL_REVERSED", "VRBENCH_PROTOCOL", "LMMS_VR_REASONING", "LMMS_VR_THINK_PREFILLED",
            "LMMS_VR_JUDGE_FAILED_SHARE"} <= scoring_settings
    with pytest.raises(ValueError, match=r"task x sets \['strictly'\], not options of the benchmark"):
        registry.Benchmark(name="x", title="X", package="x", task_dirs=cg.task_dirs, build_record=cg.build_record,
                           scoring=cg.scoring, options=cg.options, tasks=(registry.Task("x", ("long_acc",), settings={"strictly": True}),))


def test_a_record_carries_its_settings_and_its_scoring_uses_them(monkeypatch):
    """The run's settings travel with its records: scored later without the variable they still
    apply; a variable set then overrides them, and the settings used say so."""
    import dataclasses

    from lmms_video_reasoning.utils.core import registry

    cg = registry.get("cg_bench")
    long = cg.task("cg_bench_long")
    fenced = "```json\n{\"result\": \"B\"}\n```"
    for name in ("LMMS_VR_CG_STRICT", "LMMS_VR_CG_OFFICIAL_REVERSED", "LMMS_VR_JUDGE_FAILED_SHARE", "LMMS_VR_REASONING"):
        monkeypatch.delenv(name, raising=False)

    def scores(records):
        return cg.scoring.score(records, cg.scoring.settings(records), None).metrics  # long answers: no judge

    plain = [cg.record(long, _cg_doc(1), fenced), cg.record(long, _cg_doc(2), "no idea")]
    assert plain[0]["settings"]["strict"] is False and plain[0]["settings"][settings.FROM_ENV] == {}
    assert scores(plain)["long_acc"] == pytest.approx(100.0)  # official parsing: the unparseable reply is left out

    monkeypatch.setenv("LMMS_VR_CG_STRICT", "1")  # at the run: an override, recorded with every record
    made = [cg.record(long, _cg_doc(1), fenced), cg.record(long, _cg_doc(2), "no idea")]
    assert made[0]["settings"]["strict"] is True and made[0]["settings"][settings.FROM_ENV] == {"LMMS_VR_CG_STRICT": True}
    monkeypatch.delenv("LMMS_VR_CG_STRICT")  # scored later, elsewhere: the run's settings
    assert scores(made)["long_acc"] == pytest.approx(50.0) and scores(made)["parse_failed"] == 1
    monkeypatch.setenv("LMMS_VR_CG_STRICT", "off")  # an override when scoring wins, and is said
    used = cg.settings_of(made)
    assert used["strict"] is False and used[settings.FROM_ENV] == {"LMMS_VR_CG_STRICT": False}
    assert scores(made)["long_acc"] == pytest.approx(100.0)
    monkeypatch.delenv("LMMS_VR_CG_STRICT")

    declared = dataclasses.replace(long, settings={"strict": True})  # a task declaring it, no variable
    assert scores([cg.record(declared, _cg_doc(1), fenced), cg.record(declared, _cg_doc(2), "no idea")])["long_acc"] == pytest.approx(50.0)
    with pytest.raises(ValueError, match=r"made with different settings: strict \(LMMS_VR_CG_STRICT\)"):
        cg.settings_of(plain + made)
    legacy = [{key: value for key, value in record.items() if key != "settings"} for record in made]
    assert cg.settings_of(legacy)["strict"] is False  # made before records carried them: the defaults


def test_the_reply_fields_follow_the_tasks_settings(monkeypatch):
    """`judged_reply` and `think_prefilled` are task options: the record's reply fields are made with them."""
    import dataclasses

    from lmms_video_reasoning.utils.core import registry

    monkeypatch.delenv("LMMS_VR_REASONING", raising=False)
    monkeypatch.delenv("LMMS_VR_THINK_PREFILLED", raising=False)
    cg = registry.get("cg_bench")
    task = dataclasses.replace(cg.task("cg_bench_long"), settings={"judged_reply": "stripped", "think_prefilled": True})
    record = cg.record(task, _cg_doc(1), "thinking without an end")
    assert record["judged_reply"] == "stripped" and record["reasoning_truncated"] is True
    assert cg.record(cg.task("cg_bench_long"), _cg_doc(1), "thinking without an end")["reasoning_truncated"] is False


def test_the_report_names_settings_that_differ_from_the_tasks_declared_ones(tmp_path):
    """`lmms-vr report` reads each task's settings from the results file (lmms-eval's config block,
    or what `lmms-vr score` recorded, overrides included) and names those not as declared."""
    import json

    from lmms_video_reasoning.utils.results.report import settings_summary
    from lmms_video_reasoning.utils.results.report_runs import load_runs

    declared = {"lenient_verdict": False, "include_background": False}
    lmms_eval_run = {"results": {"vcr_cot": {"accuracy,none": 50.0}, "vcr_direct": {"accuracy,none": 40.0}},
                     "configs": {"vcr_cot": {"metadata": {"settings": {**declared, "lenient_verdict": True}}},
                                 "vcr_direct": {"metadata": {"settings": declared}}}}
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x_results.json").write_text(json.dumps(lmms_eval_run))
    scored = {"results": {"vr_bench": {"overall,none": 1.0}},
              "lmms_vr": {"settings": {"vr_bench": {"protocol": "official", "from_env": {"VRBENCH_PROTOCOL": "official"}}}}}
    (tmp_path / "b.json").write_text(json.dumps(scored))
    [first] = load_runs([f"m={tmp_path / 'a' / 'x_results.json'}"])
    assert first.settings["vcr_cot"]["lenient_verdict"] is True
    assert settings_summary(first) == "vcr_cot: lenient_verdict=True"  # vcr_direct is as declared: not named
    [second] = load_runs([f"n={tmp_path / 'b.json'}"])
    assert settings_summary(second) == "vr_bench: protocol=official, from the environment VRBENCH_PROTOCOL=official"
