"""Build the differential tables: generated inputs -> what the OFFICIAL code outputs on them.

Run it by hand when the grammar changes; the tables it writes (`data/*.jsonl`) are committed
and `test_differential.py` checks this project's functions against them. The official code is
never copied into the project: this tool imports it, unchanged, from checkouts outside it.

    git -C <mirror of CG-Bench/CG-Bench> archive f826608 run | tar -x -C /tmp/official/cgbench
    git -C <mirror of OpenGVLab/VRBench> archive 47a22db evaluation | tar -x -C /tmp/official/vrbench
    git -C <mirror of zhishuifeiqian/VCR-Bench> archive 4e564b7 eval_code | tar -x -C /tmp/official/vcrbench
    python tests/differential/generate.py --cg /tmp/official/cgbench --vr /tmp/official/vrbench \\
        --vcr /tmp/official/vcrbench

Only imports unavailable here are stubbed (`pysubs2`, VRBench's `torch`, `jsonlines`,
`aiofiles`, `dataset`, `model_api`); the judge/API placeholders are replaced by functions
returning the reply under test (VCR-Bench's `get_output_wo_image` is an empty placeholder
officially; VRBench's judge is the `model` argument). CG-Bench's `stat_with_key.py` is a script
whose `result_keys` list is its configuration: it is run with that list set to the keys the
table needs, nothing else changed. Inputs come from a seeded grammar of answer forms
(thinking blocks, <answer> tags, fenced and malformed JSON, NaN/Infinity/true, prose and
m:ss times, nesting, empty, huge), so the same seed gives the same tables.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import os
import random
import sys
import tempfile
import types
from pathlib import Path

COMMITS = {"cg_bench": "CG-Bench/CG-Bench@f826608", "vrbench": "OpenGVLab/VRBench@47a22db",
           "vcr_bench": "zhishuifeiqian/VCR-Bench@4e564b7"}
DATA = Path(__file__).resolve().parent / "data"
HUGE_LIMIT = 300  # inputs longer than this are stored as {"unit", "times", "prefix", "suffix"}


# ------------------------------------------------------------------ the grammar of replies


def fence(body: str, lang: str = "json") -> str:
    return f"```{lang}\n{body}\n```"


THINK = ["", "<think>Let me look at the frames. The ball appears at 0:12.</think>\n",
         "<think>\nOption B seems wrong; maybe A. {\"result\": \"C\"}\n</think>\n", "Thinking... (A) or (B)?\n"]
PROSE_TIMES = ["0:10", "1:05", "12:30", "1:02:03", "10s", "10.5 seconds", "00:00:10", "t=7", "3 min", "90", "-5",
               "1e3", "0.5", ".5", "20.", "1,000", "٣"]
LETTERS = list("ABCDEFGH") + ["a", "b", "e", "I", "J"]


def mcq_reply(rng: random.Random) -> str:
    letter = rng.choice(LETTERS)
    other = rng.choice(LETTERS)
    forms = [
        lambda: fence(f'{{"result": "{letter}"}}'),
        lambda: fence(f'{{"result": {letter}}}'),  # bare word: quoted officially
        lambda: fence(f'{{"result":{letter}}}'),  # no space: not quoted, invalid JSON
        lambda: fence(f'{{"result": ["{letter}"]}}'),
        lambda: fence('{"result": null}'),
        lambda: fence('{"result": true}'),
        lambda: fence('{"answer": "B"}') + f" so {letter}",
        lambda: fence(f'{{"result": "{letter}",}}'),  # trailing comma
        lambda: fence(f"{{'result': '{letter}'}}"),
        lambda: fence(f'{{"result": "{letter}"}}', lang=""),
        lambda: fence(f'{{"result": "{letter}"}}', lang="JSON"),
        lambda: f"The answer is {letter}.",
        lambda: f"<answer>{letter}</answer>",
        lambda: f"{letter} or {other}",
        lambda: f"({letter}) {other.lower()} thing",
        lambda: f"I think it's {letter}{other}.",
        lambda: "I cannot tell from the video.",
        lambda: "",
        lambda: "   \n",
        lambda: "```json\n" + "[" * rng.choice([50, 3000]) + "\n```" + f" {letter}",
        lambda: "```json\n" + '{"result": ' * 1500 + "1" + "}" * 1500 + "\n```" + f" Final: {letter}",
        lambda: f"Use ``` here\n```json\n{{\"result\": \"{letter}\"}}\n```",
        lambda: fence(f'{{"result": "{letter}"}}') + "\n" + fence(f'{{"result": "{other}"}}'),
        lambda: f"```json\n{{\"result\": \"{letter}\"}}",  # unclosed
        lambda: fence(f'{{"result": "{letter}"}}')[:-3] + "`` trailing",
    ]
    return rng.choice(THINK) + rng.choice(forms)()


def number(rng: random.Random) -> str:
    return rng.choice([str(rng.randint(0, 120)), f"{rng.uniform(0, 120):.1f}", str(rng.randint(0, 3000)),
                       "NaN", "Infinity", "-Infinity", "true", "false", "null", '"10"', "1e2", "-3", "0"])


def interval_list(rng: random.Random) -> str:
    pairs = []
    for _ in range(rng.choice([0, 1, 1, 1, 2, 2, 3, 5, 7])):
        a, b = rng.randint(0, 100), rng.randint(0, 100)
        shape = rng.random()
        if shape < 0.55:
            pairs.append(f"[{min(a, b)}, {max(a, b)}]")
        elif shape < 0.65:
            pairs.append(f"[{max(a, b)}, {min(a, b)}]")  # reversed
        elif shape < 0.8:
            pairs.append(f"[{number(rng)}, {number(rng)}]")
        elif shape < 0.85:
            pairs.append(f"[{a}]")
        elif shape < 0.9:
            pairs.append(f"[{a}, {b}, {a + b}]")
        elif shape < 0.95:
            pairs.append(f'["{a // 60}:{a % 60:02d}", "{b // 60}:{b % 60:02d}"]')
        else:
            pairs.append(f'{{"start": {a}, "end": {b}}}')
    return "[" + ", ".join(pairs) + "]"


def prose_time(rng: random.Random) -> str:
    a, b = sorted((rng.randint(0, 200), rng.randint(0, 200)))
    forms = [f"From {a // 60}:{a % 60:02d} to {b // 60}:{b % 60:02d}.", f"{a}-{b}", f"{a} to {b} seconds",
             f"between {a}s and {b}s", f"[{a}, {b}]", f"({a}, {b}) and ({b + 5}, {b + 9})", f"about {a} seconds",
             f"{rng.choice(PROSE_TIMES)} to {rng.choice(PROSE_TIMES)}", f"{a}.5-{b}.25", f"{a} {b} {a} {b}",
             f"{b} {a}", "somewhere in the middle", f"at {a}"]
    return rng.choice(forms)


def grounding_reply(rng: random.Random) -> str:
    forms = [
        lambda: fence(f'{{"result": {interval_list(rng)}}}'),
        lambda: fence(f'{{"result": {interval_list(rng)}}}') + " " + prose_time(rng),
        lambda: prose_time(rng),
        lambda: fence(f'{{"result": {number(rng)}}}') + " " + prose_time(rng),
        lambda: fence(f'{{"result": "{prose_time(rng)}"}}'),
        lambda: fence(f'{{"result": {interval_list(rng)}'),  # malformed JSON: fallback
        lambda: fence(f'{{"intervals": {interval_list(rng)}}}'),
        lambda: f"<answer>{interval_list(rng)}</answer>",
        lambda: "```json\n" + "[" * rng.choice([40, 3000]) + "]" * 10 + "\n``` " + prose_time(rng),
        lambda: "",
        lambda: " ".join(str(rng.randint(0, 99)) for _ in range(rng.choice([2, 4, 6]))),
        lambda: f"{rng.randint(0, 99)} {rng.randint(0, 99)} " * rng.choice([3, 400]),  # huge
    ]
    return rng.choice(THINK) + rng.choice(forms)()


def open_reply(rng: random.Random) -> str:
    value = rng.choice(['"a red ball"', '""', '"   "', "null", "true", "false", "0", "1.0", "1e400", "NaN",
                        '["a", "b"]', '{"obj": "ball", "n": 2}', "[]", "{}", '"It\'s \\"quoted\\""', "[[1, 2], null]"])
    forms = [lambda: fence(f'{{"result": {value}}}'), lambda: "A red ball rolls left.", lambda: "", lambda: "  \n\t",
             lambda: fence(f'{{"result": {value}'), lambda: f"<answer>{value}</answer>",
             lambda: "```json\n" + "[" * 3000 + "\n```", lambda: fence(f'{{"answer": {value}}}')]
    return rng.choice(THINK) + rng.choice(forms)()


def verdict_reply(rng: random.Random) -> str:
    value = rng.choice(["0", "1", "2", "-1", "10", '"1"', '"0"', "true", "false", "null", "1.0", "0.0", "NaN",
                        "[1]", '{"v": 1}', '"yes"', "3", "1e0"])
    forms = [lambda: fence(f'{{"result": {value}}}'), lambda: f"The answer is {value}.", lambda: "Score: 1",
             lambda: "I would say 2, maybe 1", lambda: "no digits here", lambda: "",
             lambda: fence(f'{{"result": {value}') + " 0", lambda: f'{{"result": {value}}}',
             lambda: "```json\n" + "{" * 3000 + "\n``` 1", lambda: fence(f'{{"verdict": {value}}}') + " so 2"]
    return rng.choice(forms)()


def vrbench_reply(rng: random.Random) -> str:
    letter = rng.choice(list("ABCDEabcde") + ["F", "X"])
    forms = [
        lambda: f"<Step 1> The man enters [00:01:10->00:01:20]. <Step 2> He leaves. <Answer> {letter}",
        lambda: f"<Answer>{letter}</Answer>", lambda: f"\\boxed{{{letter}}}", lambda: f"{letter}. The red car\nB. other",
        lambda: f"Answer: {letter}", lambda: f"The answer is {letter}, because", lambda: f"final {letter}",
        lambda: f"Therefore: {letter}.", lambda: f"In conclusion {letter}", lambda: f"{letter}) the house",
        lambda: f"({letter}) the house.", lambda: f"{letter}: yes", lambda: f"I pick {letter} Because",
        lambda: f"it is {letter}", lambda: "the house.", lambda: "A house, a car and a dog. " * rng.randint(1, 3),
        lambda: "", lambda: "I don't know", lambda: f"Option {letter}" + " filler" * rng.choice([1, 20]),
        lambda: f"<think>A or B? {letter}</think>\n<answer>{letter}</answer>", lambda: f"Assistant: {letter}",
        lambda: f"1,000 people; {letter}-{letter}", lambda: f"{letter}\t", lambda: f"e.g. {letter}",
    ]
    text = rng.choice(forms)()
    if rng.random() < 0.3:
        text = rng.choice(forms)() + "\n" + text
    return text


VR_TAGS = {"unique": ("step_matching", "logical_consistency", "factual_accuracy", "process_clarity"),
           "non_unique": ("relevance", "logical_consistency", "factual_accuracy", "clarity")}


def tag_reply(rng: random.Random, kind: str) -> str:
    parts = []
    for tag in VR_TAGS[kind]:
        shape = rng.random()
        value = rng.choice(["7", "10", "0", "8.5", " 6 ", "7/10", "Score: 9", "+3", "-2", ".5", "11", "1e1", "nan",
                            "inf", "seven", "", "5\n", "4.5.6"])
        if shape < 0.8:
            parts.append(f"<{tag}>{value}</{tag}>")
        elif shape < 0.88:
            parts.append(f"<{tag}>\n{value}\n</{tag}>")  # across lines: official re.search misses it
        elif shape < 0.94:
            parts.append(f"<{tag}>3</{tag}> then <{tag}>{value}</{tag}>")
        # else: the tag is missing
    rng.shuffle(parts)
    return "<rationale>because</rationale>\n" + "\n".join(parts)


VCR_GT_TIME = ["[13, 54]", "[0, 10]", "[5.5, 20]", "[100, 130]", "[30, 20]"]
VCR_GT_BOX = ["[446,125,550,359]", "[0,0,100,100]", "[10, 20, 30, 40]", "[50,50,10,10]", "[5,5,5,5]", "[0,0,0,10]"]


def vcr_answer(rng: random.Random, gt: str) -> str:
    nums = [int(x) if x.strip().lstrip("-").isdigit() else float(x) for x in gt.strip("[]").split(",")]
    jitter = lambda v: v + rng.choice([0, 0, 1, -2, 5, 0.5, 10])  # noqa: E731
    moved = [jitter(v) for v in nums]
    forms = [
        lambda: "[" + ", ".join(str(v) for v in moved) + "]",
        lambda: gt,  # exactly the reference (a zero-area box then divides by zero officially)
        lambda: "[" + ",".join(str(v) for v in moved) + "]",
        lambda: "[" + ", ".join(str(v) for v in reversed(moved)) + "]",
        lambda: "[" + ", ".join(rng.choice([".5", "20.", "2e0", "1e999", "0x10", "1_0", "+5", "-0", "True", "7"])
                                for _ in moved) + "]",
        lambda: "[" + ", ".join(str(float(v)) for v in moved) + "]",
        lambda: " [" + ", ".join(str(v) for v in moved) + "] ",
        lambda: "(" + ", ".join(str(v) for v in moved) + ")",
        lambda: "The interval is [" + ", ".join(str(v) for v in moved) + "]",
        lambda: "[" + ", ".join(str(v) for v in moved[:2]) + "]",
        lambda: "[" + ", ".join(str(v) for v in moved) + ", 5]",
        lambda: "B", lambda: "", lambda: "None", lambda: "[" * 300 + "]" * 300, lambda: "[0, 0, 0, 0]",
        lambda: "[" + ", ".join("٣" for _ in moved) + "]", lambda: str(moved[0]) + " to " + str(moved[-1]),
        lambda: "[1:02, 1:30]", lambda: "[a, b]",
    ]
    return rng.choice(forms)()


def scoring_reply(rng: random.Random) -> str:
    return rng.choice(["1", "0", "1.", "**1**", "Output: 1", "1\n", " 1", "0\n", "Output: 0", "10", "The answer is 1",
                       "consistent", "", "1 (consistent)", "0 1", "`1`", '"1"', "１"])


STEP_TYPES = ["Video Description Steps", "Logical Inference Steps", "Background Review Steps"]


def random_steps(rng: random.Random, labels: list[str]) -> list[list[str]]:
    return [[rng.choice(STEP_TYPES), rng.choice(labels)] for _ in range(rng.choice([1, 1, 2, 3, 4, 6, 9]))]


def steps_reply(steps: list[list[str]]) -> str:
    """The judge reply holding these [step_type, judgment] pairs (test_differential.py builds the same)."""
    return "```json\n" + json.dumps([{"step": f"step {i}", "step_type": t, "judgment": j} for i, (t, j) in enumerate(steps)]) + "\n```"


# ------------------------------------------------------------------ storage helpers


def pack(text: str):
    """Short inputs as text; long ones run-length encoded as {"runs": [[unit, times], ...]}
    (`expand` in test_differential.py joins unit * times)."""
    if len(text) <= HUGE_LIMIT:
        return text
    runs, literal, index = [], [], 0
    while index < len(text):
        best = (1, 1)
        for size in range(1, 21):
            unit, times = text[index:index + size], 1
            while text.startswith(unit, index + times * size):
                times += 1
            if times * size > best[0] * best[1] and times > 1:
                best = (size, times)
        size, times = best
        if size * times >= 40:
            if literal:
                runs.append(["".join(literal), 1])
                literal = []
            runs.append([text[index:index + size], times])
            index += size * times
        else:
            literal.append(text[index])
            index += 1
    if literal:
        runs.append(["".join(literal), 1])
    packed = {"runs": runs}
    if len(json.dumps(packed)) > 2 * HUGE_LIMIT:
        raise ValueError(f"cannot pack a {len(text)}-character input; keep huge inputs repetitive")
    return packed


def write(name: str, benchmark: str, rows: list[dict], note: str) -> int:
    DATA.mkdir(parents=True, exist_ok=True)
    with open(DATA / f"{name}.jsonl", "w", encoding="utf-8") as out:
        out.write(json.dumps({"table": name, "official": COMMITS[benchmark], "note": note, "rows": len(rows)}) + "\n")
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")
    return len(rows)


def stub_module(name: str, **attributes) -> None:
    module = types.ModuleType(name)
    module.__dict__.update(attributes)
    sys.modules.setdefault(name, module)


def jsonable(value):
    """An official output as JSON (NaN/Infinity kept by Python's json; tuples as lists)."""
    return json.loads(json.dumps(value, default=repr))


# ------------------------------------------------------------------ CG-Bench


def cg_tables(root: Path, rng: random.Random) -> dict[str, int]:
    try:
        import pysubs2  # noqa: F401
    except ImportError:
        stub_module("pysubs2")  # subtitles only; not used by the functions run here
    sys.path.insert(0, str(root / "run"))
    import utils as cg  # the official run/utils.py

    def args(mode, **extra):
        return types.SimpleNamespace(task_mode=mode, **extra)

    def post(mode, anno, response):
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # post_process prints every JSON error
                return {"result": jsonable(cg.post_process(args(mode), anno, response)), "raised": None}
        except Exception as error:  # the runner (`process_single_file`) catches it and saves nothing
            return {"result": None, "raised": type(error).__name__}

    counts = {}
    rows = []
    for _ in range(1800):
        reply, right = mcq_reply(rng), rng.choice("ABCDE")
        rows.append({"input": pack(reply), "right_answer": right, **post("long_acc", {"right_answer": right}, reply)})
    counts["cg_bench_mcq"] = write("cg_bench_mcq", "cg_bench", rows,
                                   "post_process(long_acc): result 1/0, null = no result saved (left out)")

    truths = [[[8, 30]], [[0, 5], [40, 60]], [[100.5, 130]], [[10, 20], [15, 25]], [[5, 5]], [[30, 90]]]
    rows = []
    for _ in range(3000):
        reply, truth = grounding_reply(rng), rng.choice(truths)
        rows.append({"input": pack(reply), "truth": truth, **post("miou", {"clue_intervals": json.loads(json.dumps(truth))}, reply)})
    counts["cg_bench_grounding"] = write("cg_bench_grounding", "cg_bench", rows,
                                         "post_process(miou): tIoU; null or raised = no result saved (left out)")

    rows = []
    open_key = "open_m_s_32_True_True_True"
    for _ in range(900):
        reply = open_reply(rng)
        prediction = None
        with contextlib.redirect_stdout(io.StringIO()):
            saved = cg.post_process(args("open"), {}, reply)
        if saved is not None:
            if True:
                # The runner saves the result to the question's JSON file and the judge run reads
                # it back; get_prompt then shows it to the step-1 judge.
                anno = {"question": "Q?", "answer": "A", "results": {open_key: {"result": json.loads(json.dumps(saved))}}}
                step_args = args("eval_open_step_1", sub=False, frame_time=False, open_model_name="m", open_model_size="s",
                                 open_num_segment=32, open_sub=True, open_sub_time=True, open_frame_time=True)
                text = cg.get_prompt(step_args, anno, [])
                marker = "The model's prediction is '"
                prediction = text[text.index(marker) + len(marker):-3]
        rows.append({"input": pack(reply), "prediction_shown": None if prediction is None else pack(prediction)})
    counts["cg_bench_open"] = write("cg_bench_open", "cg_bench", rows,
                                    "post_process(open) + save + get_prompt(eval_open_step_1): the prediction the judge sees; null = none saved")

    rows = []
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "q.json")
        for _ in range(1400):
            reply, step = verdict_reply(rng), rng.choice([1, 1, 2])
            mode = f"eval_open_step_{step}"
            with contextlib.redirect_stdout(io.StringIO()):
                result = cg.post_process(args(mode), {}, reply)
            final = None
            if result is not None:
                anno = {"results": {open_key: {"version": 1, "result": "x", "step_1": {"version": 1, "result": 2}}}}
                save_args = args(mode, open_model_name="m", open_model_size="s", open_num_segment=32, open_sub=True,
                                 open_sub_time=True, open_frame_time=True)
                if step == 1:
                    del anno["results"][open_key]["step_1"]
                cg.save_result(save_args, anno, result, path)
                saved = cg.load_json(path)["results"][open_key]
                # stat_with_key.py: a question counts when it has step_2; right iff step_2 result == 1
                final = "step2" if "step_2" not in saved else int(saved["step_2"]["result"] == 1)
            rows.append({"input": pack(reply), "step": step, "final": final})
    counts["cg_bench_verdicts"] = write("cg_bench_verdicts", "cg_bench", rows,
                                        "post_process(eval_open_step_N) + save_result + the stat rule: final 0/1, "
                                        "'step2' = step 1 not final, null = no result saved (the step is re-run)")

    counts["cg_bench_aggregation"] = cg_aggregation(root, rng)
    return counts


def cg_aggregation(root: Path, rng: random.Random) -> int:
    source = (root / "run" / "stat_with_key.py").read_text(encoding="utf-8")
    start = source.index("result_keys = [")
    end = source.index("]", start) + 1
    keys = {"long": "long_acc_gpt-4o_2024-08-06_50_True_True_True", "miou": "miou_gpt-4o_2024-08-06_50_True_True_True",
            "open": "open_gpt-4o_2024-08-06_32_True_True_True"}
    result_keys = ["long_acc_gpt-4o_2024-08-06_50_True_True_True", "rec@iou_gpt-4o_2024-08-06",
                   "acc@iou_gpt-4o_2024-08-06", "open_gpt-4o_2024-08-06_32_True_True_True"]
    configured = source[:start] + f"result_keys = {result_keys!r}" + source[end:]
    code = compile(configured, str(root / "run" / "stat_with_key.py"), "exec")
    rows = []
    for _ in range(300):
        questions = []
        for qid in range(rng.choice([0, 1, 2, 3, 5, 8, 13])):
            question = {"qid": qid}
            if rng.random() < 0.8:
                question["long"] = rng.choice([0, 1])
            if rng.random() < 0.8:
                question["miou"] = rng.choice([0.0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.45, 0.5, 0.7, 1.0, round(rng.random(), 3)])
            if rng.random() < 0.8:
                question["open_final"] = rng.choice([0, 1, 1, None])  # None: no step_2 (no final verdict)
            questions.append(question)
        with tempfile.TemporaryDirectory() as folder:
            annotations = Path(folder) / "cg_annotations"
            annotations.mkdir()
            for question in questions:
                results = {}
                if "long" in question:
                    results[keys["long"]] = {"result": question["long"]}
                if "miou" in question:
                    results[keys["miou"]] = {"result": question["miou"]}
                if "open_final" in question:
                    results[keys["open"]] = {"result": "x", "step_1": {"result": 2}}
                    if question["open_final"] is not None:
                        results[keys["open"]]["step_2"] = {"result": question["open_final"]}
                (annotations / f"{question['qid']}.json").write_text(json.dumps({"results": results}))
            printed = io.StringIO()
            cwd = os.getcwd()
            os.chdir(folder)
            try:
                with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(io.StringIO()):
                    exec(code, {"__name__": "__main__"})
            finally:
                os.chdir(cwd)
        accuracies = [float(line.split("Accuracy: ")[1]) for line in printed.getvalue().splitlines() if "Accuracy: " in line]
        rows.append({"questions": questions, "long_acc": accuracies[0], "rec_at_iou": accuracies[1],
                     "acc_at_iou": accuracies[2], "oe_acc": accuracies[3]})
    return write("cg_bench_aggregation", "cg_bench", rows,
                 "stat_with_key.py (result_keys set to long_acc, rec@iou, acc@iou, open): printed Accuracy, 0-1")


# ------------------------------------------------------------------ VRBench


def vr_tables(root: Path, rng: random.Random) -> dict[str, int]:
    for name in ("torch", "torch.utils", "torch.utils.data", "jsonlines", "aiofiles"):
        stub_module(name, DataLoader=object)
    stub_module("dataset", ReasoningEvaluationDatasetVLM=object, ReasoningEvaluationDatasetLLM=object)
    stub_module("model_api", AsyncBaseModel=object)
    sys.path.insert(0, str(root / "evaluation"))
    import batch_evaluation_api_mp_time_async as judge_script
    import calculate_scores

    counts = {}
    rows = [{"input": pack(text), "letter": calculate_scores.extract_mcq_answer(text)}
            for text in (vrbench_reply(rng) for _ in range(3000))]
    counts["vrbench_mcq"] = write("vrbench_mcq", "vrbench", rows, "calculate_scores.extract_mcq_answer")

    class ReplyingJudge:
        """The `model` argument of async_process_sample: answers with the reply under test."""

        def __init__(self, reply):
            self.reply, self.seen = reply, None

        async def evaluate_unique_answer_response(self, question, response, procedure, answer):
            self.seen = response
            return self.reply

        async def evaluate_non_unique_answer_response(self, summary, question, response, procedure, answer):
            self.seen = response
            return self.reply

    async def rate(kind, reply, response):
        judge = ReplyingJudge(reply)
        sample = {"id": ["v_1"], "question": ["Q"], "steps_and_answer": [response], "answer": ["A"], "procedure": ["P"],
                  "type": ["Event Attribution" if kind == "unique" else "Event Prediction"]}
        try:
            result = await judge_script.async_process_sample(sample, judge, {}, True, asyncio.Semaphore(1))
            return {"rate": result["rate"], "raised": None, "response_seen": judge.seen}
        except Exception as error:
            return {"rate": None, "raised": type(error).__name__, "response_seen": judge.seen}

    rows = []
    for _ in range(1500):
        kind = rng.choice(["unique", "non_unique"])
        reply = tag_reply(rng, kind)
        response = rng.choice(["Assistant: <Step 1> x <Answer> A", "The answer is A.", "Assistant:", "tsA", "  A  "])
        rows.append({"kind": kind, "input": pack(reply), "response": response, **asyncio.run(rate(kind, reply, response))})
    counts["vrbench_tags"] = write("vrbench_tags", "vrbench", rows,
                                   "async_process_sample(separate=True): rate = weighted 0-10 string; raised = the sample crashed")
    return counts


# ------------------------------------------------------------------ VCR-Bench


def vcr_tables(root: Path, rng: random.Random) -> dict[str, int]:
    sys.path.insert(0, str(root / "eval_code"))
    try:
        import openai  # noqa: F401
    except ImportError:
        stub_module("openai", OpenAI=object)
    import cau_acc
    import cau_total
    import eval as vcr

    judge_reply = {"text": None}
    vcr.get_output_wo_image = lambda prompt, max_tokens=2048: judge_reply["text"]  # the official placeholder
    counts = {}

    rows = []
    with contextlib.redirect_stdout(io.StringIO()):
        for _ in range(2000):
            gt = rng.choice(VCR_GT_TIME + VCR_GT_BOX + ["B", "a red ball"])
            answer = vcr_answer(rng, gt if gt.startswith("[") else rng.choice(VCR_GT_TIME + VCR_GT_BOX))
            judge_reply["text"] = "<JUDGE>"
            scored = vcr.match_answer({"question": "Q", "answer": gt, "extract_answer": answer})["answer_scoring"]
            rows.append({"answer": gt, "extracted": pack(answer), "answer_scoring": scored})
    counts["vcr_bench_iou_rule"] = write("vcr_bench_iou_rule", "vcr_bench", rows,
                                         "match_answer: '1'/'0' by the IoU rule, 0 (int) = it raised, '<JUDGE>' = sent to the scoring judge")

    rows = []
    with contextlib.redirect_stdout(io.StringIO()):
        for _ in range(600):
            judge_reply["text"] = scoring_reply(rng)
            item = vcr.match_answer({"question": "Q", "answer": "a red ball", "extract_answer": "red ball"})
            item.update(dimension="Video Plot Analysis", duration=30)
            accuracy = cau_acc.calculate_accuracy([item])["overall_accuracy"]
            rows.append({"input": judge_reply["text"], "correct": accuracy})
    counts["vcr_bench_verdict"] = write("vcr_bench_verdict", "vcr_bench", rows,
                                        "match_answer (scoring judge) + cau_acc.calculate_accuracy: 1.0 correct, 0.0 wrong")

    rows = []
    with contextlib.redirect_stdout(io.StringIO()):
        for _ in range(400):
            samples, items = [], []
            for _sample in range(rng.choice([0, 1, 1, 2, 3, 5, 8])):
                recall_steps = random_steps(rng, ["Matched", "Unmatched"])
                precision_steps = random_steps(rng, ["Matched", "Wrong", "Redundant"])
                judge_reply["text"] = steps_reply(recall_steps)
                item = vcr.recall({"question": "Q", "answer": "A", "response": "R", "reasoning": ["1. x"]})
                judge_reply["text"] = steps_reply(precision_steps)
                item = vcr.precision(item)
                samples.append({"recall": recall_steps, "precision": precision_steps})
                items.append(item)
            metrics = cau_total.calculate_metrics(items)["overall_metrics"]
            rows.append({"samples": samples, "metrics": metrics})
    counts["vcr_bench_cot"] = write("vcr_bench_cot", "vcr_bench", rows,
                                    "recall + precision (judge replies: the [step_type, judgment] lists in a ```json block) + "
                                    "cau_total.calculate_metrics: P/R/F1 (0-1) per Video/logic/overall; a metric absent = no sample")
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cg", type=Path, required=True, help="folder holding CG-Bench's run/ at f826608")
    parser.add_argument("--vr", type=Path, required=True, help="folder holding VRBench's evaluation/ at 47a22db")
    parser.add_argument("--vcr", type=Path, required=True, help="folder holding VCR-Bench's eval_code/ at 4e564b7")
    parser.add_argument("--seed", type=int, default=15)
    args = parser.parse_args()
    counts = {}
    counts.update(cg_tables(args.cg, random.Random(args.seed)))
    counts.update(vr_tables(args.vr, random.Random(args.seed + 1)))
    counts.update(vcr_tables(args.vcr, random.Random(args.seed + 2)))
    for name, count in counts.items():
        print(f"{name}: {count} rows, {(DATA / f'{name}.jsonl').stat().st_size} bytes")
    print(f"total: {sum(counts.values())} rows")


if __name__ == "__main__":
    main()
