"""The VCR-Bench sample benchmark: synthetic videos in the official layout, with known truth.

`write_sample(root)`: the official annotation file and four videos of coloured shapes that appear, move,
flash and leave at known times (40 s to 330 s); 21 questions over the seven dimensions and three duration
buckets, grounding answers computed from the shapes. `demo_predictions`: replay responses for the four
tasks (some wrong, unparseable, empty, one bare letter), their verdicts in `DEMO_CORRECT`.
`oracle_judge_reply(body)`: a local judge answering the four official prompts from the known truth.
"""

from __future__ import annotations

import ast
import json
import re
import zlib
from pathlib import Path

from lmms_video_reasoning.judges.local_server import last_user_text
from lmms_video_reasoning.utils.media.synthetic import Clip, Shape, shape_box
from lmms_video_reasoning.vcr_bench import prompts
from lmms_video_reasoning.vcr_bench.docs import ANNOTATION, VIDEO_DIR
from lmms_video_reasoning.vcr_bench.scoring import BACKGROUND, DIMENSIONS, PERCEPTION, REASONING

SOURCE = "synthetic"  # the videos' source folder, `video/<source>/` as in the official layout


def video_path(video: str) -> str:
    """A sample video's `video_path` (relative to the annotations' video folder)."""
    return f"video/{SOURCE}/shapes_{video}.mp4"


VIDEOS = {
    "short_a": Clip(40, 10, 320, 240, (
        Shape("circle", "red", 2, 12, (0.25, 0.5), size=0.2),
        Shape("square", "blue", 8, 30, (0.2, 0.3), (0.8, 0.7), size=0.2),
        Shape("triangle", "yellow", 15, 25, (0.75, 0.25), size=0.15, flash_hz=1),
        Shape("circle", "green", 28, 38, (0.5, 0.5), size=0.15),
    )),
    "short_b": Clip(55, 10, 320, 240, (
        Shape("square", "white", 5, 20, (0.3, 0.3), size=0.15),
        Shape("circle", "magenta", 18, 45, (0.8, 0.2), (0.2, 0.8), size=0.15),
        Shape("triangle", "cyan", 30, 34, (0.7, 0.7), size=0.15, flash_hz=2),
        Shape("square", "orange", 47, 53, (0.5, 0.5), size=0.2),
    )),
    "medium": Clip(150, 2, 320, 240, (
        Shape("square", "orange", 10, 60, (0.3, 0.5), size=0.2),
        Shape("triangle", "red", 70, 130, (0.7, 0.3), size=0.2, flash_hz=0.1),
        Shape("circle", "blue", 100, 140, (0.1, 0.8), (0.9, 0.8), size=0.15),
    )),
    "long": Clip(330, 1, 160, 120, (
        Shape("square", "green", 20, 100, (0.3, 0.5), size=0.2),
        Shape("circle", "yellow", 150, 250, (0.2, 0.2), (0.8, 0.8), size=0.2),
        Shape("square", "red", 280, 320, (0.7, 0.3), size=0.2),
    )),
}


def span(video: str, label: str) -> str:
    """"0:08-0:30" for the time a shape is on screen (as the annotations write times)."""
    shape = VIDEOS[video].shape(label)
    return "-".join(f"{round(t) // 60}:{round(t) % 60:02d}" for t in (shape.start, shape.end))


def box_answer(video: str, label: str, t: float, shift: int = 0) -> str:
    """TSG answer in the official format, "[446,125,550,359]" (absolute pixels), optionally shifted."""
    clip = VIDEOS[video]
    box = shape_box(clip.shape(label), t, clip.width, clip.height)
    return "[" + ",".join(str(v + shift) for v in box) + "]"


def _question(qid, video, dimension, text, answer, steps, options=None) -> dict:
    # a multiple-choice question has its options in its text too, as in the official file
    choices = dict(zip("ABCD", options)) if options else dict.fromkeys("ABCD", "")
    question = text + "\n" + "\n".join(f"{letter}. {option}" for letter, option in choices.items()) + "\n" if options else text
    return {"id": qid, "video_path": video_path(video), "duration": VIDEOS[video].duration, "dimension": dimension,
            "question": question, "multiple-choice": bool(options), "choices": choices, "answer": answer,
            "reasoning": [f"{n}. {step}" for n, step in enumerate(steps, 1)]}


FTR, VTC, VTG, VKR, TSR, VPA, TSG = DIMENSIONS  # their names, in the paper's order


def _grounding(qid, video, label, event, enters, leaves) -> dict:
    """A VTG question: when `event` (the shape `label` on screen) starts and ends, answered in the
    official format, "[13, 54]" (seconds)."""
    shape, (start, end) = VIDEOS[video].shape(label), span(video, label).split("-")
    return _question(qid, video, VTG, f"Give the start and end time, in seconds, of the event '{event}'.",
                     f"[{shape.start:g}, {shape.end:g}]", [f"{start}, {enters}.", f"{end}, {leaves}.",
                                                     f"Therefore, the event lasts from {shape.start:g} to {shape.end:g} seconds."])


def _box(qid, video, label, t, seen) -> dict:
    """A TSG question: the box of the shape `label` at `t` seconds."""
    box = box_answer(video, label, t)
    return _question(qid, video, TSG, f"Give the absolute pixel coordinates [x1, y1, x2, y2] of the {label} at {t} s.", box,
                     [f"{span(video, label)}, {seen}.", f"Therefore, at {t} s the {label} is at {box}."])


def build_records() -> list[dict]:
    """The 21 sample questions (three per dimension), answers computed from the shapes."""
    a, b, m, l = "short_a", "short_b", "medium", "long"  # noqa: E741 (l: the long video)
    return [
        _question(0, a, FTR, "Which shape appears first in the video?", "B", [
            f"{span(a, 'red circle')}, a red circle is on screen on the left.",
            f"{span(a, 'blue square')}, a blue square moves from the upper left to the lower right.",
            "Therefore, the red circle appears first."], ["the blue square", "the red circle", "the yellow triangle", "the green circle"]),
        _question(1, a, VTC, "How many times does the yellow triangle flash?", "10", [
            f"{span(a, 'yellow triangle')}, a yellow triangle flashes in the upper right, once per second.",
            "Therefore, the yellow triangle flashes 10 times."]),
        _grounding(2, a, "blue square", "a blue square moves across the screen", "a blue square appears in the upper left",
                   "the blue square leaves the screen at the lower right"),
        _box(3, a, "red circle", 5.0, "a red circle stays still on the left of the frame"),
        _question(4, b, TSR, "In which direction does the magenta circle move?", "A", [
            f"{span(b, 'magenta circle')}, a magenta circle moves from the upper right to the lower left.",
            "Therefore, it moves from the upper right to the lower left.",
        ], ["from the upper right to the lower left", "from left to right", "from the bottom to the top", "it does not move"]),
        _question(5, b, VPA, "What is on screen when the cyan triangle starts flashing?", "the magenta circle", [
            "The question asks about the moment the cyan triangle starts flashing.",
            f"{span(b, 'magenta circle')}, a magenta circle moves from the upper right to the lower left.",
            f"{span(b, 'cyan triangle')}, a cyan triangle flashes in the lower right.",
            "Therefore, the magenta circle is on screen when the cyan triangle starts flashing."]),
        _question(6, b, VKR, "The last shape to appear has how many corners?", "C", [
            f"{span(b, 'orange square')}, an orange square appears in the centre.",
            "A square has four corners, so the last shape has 4 corners."], ["0", "3", "4", "5"]),
        _question(7, b, VTC, "How many times does the cyan triangle flash?", "C", [
            f"{span(b, 'cyan triangle')}, a cyan triangle flashes twice per second.",
            "Therefore, the cyan triangle flashes 8 times."], ["4", "6", "8", "10"]),
        _question(8, b, FTR, "Which shape appears right after the white square?", "the magenta circle", [
            f"{span(b, 'white square')}, a white square is on screen in the upper left.",
            f"{span(b, 'magenta circle')}, a magenta circle enters at the upper right.",
            "Therefore, the magenta circle appears right after the white square."]),
        _grounding(9, m, "orange square", "an orange square is on screen", "an orange square appears on the left",
                   "the orange square disappears"),
        _question(10, m, VTC, "How many times does the red triangle flash?", "6", [
            f"{span(m, 'red triangle')}, a red triangle flashes in the upper right, once every ten seconds.",
            "Therefore, the red triangle flashes 6 times."]),
        _question(11, m, TSR, "Does the blue circle move left, right, up or down?", "right", [
            f"{span(m, 'blue circle')}, a blue circle moves along the bottom from the left edge to the right edge.",
            "Therefore, the blue circle moves right."]),
        _box(12, m, "blue circle", 120.0, "a blue circle moves along the bottom from left to right"),
        _question(13, m, VPA, "What happens after the orange square leaves?", "A", [
            f"{span(m, 'orange square')}, an orange square is on screen on the left.",
            f"{span(m, 'red triangle')}, a red triangle flashes in the upper right.",
            "Therefore, after the orange square leaves, the red triangle starts flashing.",
        ], ["the red triangle starts flashing", "a green circle appears", "the screen turns white", "the video ends"]),
        _question(14, m, VKR, "How many sides does the flashing shape have?", "3", [
            f"{span(m, 'red triangle')}, the flashing shape is a red triangle.",
            "A triangle has three sides, so the flashing shape has 3 sides."]),
        _question(15, l, FTR, "In what order do the shapes appear?", "A", [
            f"{span(l, 'green square')}, a green square is on screen.",
            f"{span(l, 'yellow circle')}, a yellow circle moves diagonally.",
            f"{span(l, 'red square')}, a red square is on screen in the upper right.",
            "Therefore, the order is green square, yellow circle, red square.",
        ], ["green square, yellow circle, red square", "red square, green square, yellow circle",
            "yellow circle, red square, green square", "green square, red square, yellow circle"]),
        _grounding(16, l, "yellow circle", "a yellow circle moves diagonally", "a yellow circle appears in the upper left",
                   "the yellow circle leaves at the lower right"),
        _box(17, l, "red square", 300.0, "a red square stays still in the upper right"),
        _question(18, l, VPA, "Which shape is on screen for the longest time?", "the yellow circle", [
            f"{span(l, 'green square')}, a green square is on screen for 80 seconds.",
            f"{span(l, 'yellow circle')}, a yellow circle is on screen for 100 seconds.",
            f"{span(l, 'red square')}, a red square is on screen for 40 seconds.",
            "Therefore, the yellow circle is on screen for the longest time."]),
        _question(19, l, VKR, "The shape on screen at 1:00 has how many corners?", "C", [
            f"{span(l, 'green square')}, a green square is on screen.",
            "A square has four corners, so the shape has 4 corners."], ["0", "3", "4", "6"]),
        _question(20, l, TSR, "Where is the red square located?", "A", [
            f"{span(l, 'red square')}, a red square is on screen in the upper right.",
            "Therefore, the red square is located in the upper right."], ["upper right", "lower left", "centre", "upper left"]),
    ]


def write_sample(root) -> Path:
    """Write the sample under `root` (videos skipped when present); returns the annotation file."""
    root = Path(root)
    for video, clip in VIDEOS.items():
        clip.write(root / VIDEO_DIR / video_path(video))
    path = root / ANNOTATION
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(build_records(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


# ---------------------------------------------------------------- replay predictions

NO_VIDEO = "I cannot see the video, so I cannot tell."


def step_body(step: str) -> str:
    """A reference step without its "N. " number."""
    return re.sub(r"^\s*\d+\.\s*", "", step)


def cot_response(record: dict, answer: str | None = None, drop: tuple = (), wrong_steps: tuple = (), last: str | None = None) -> str:
    """A chain of thought built from the reference steps, ending in "So the answer is X."."""
    bodies = [step_body(s) for i, s in enumerate(record["reasoning"]) if i not in drop]
    bodies[-1] = bodies[-1] if last is None else last
    return "\n".join([*wrong_steps, *bodies, f"So the answer is {record['answer'] if answer is None else answer}."])


def demo_table(records: list[dict] | None = None) -> dict[str, dict[int, tuple[str, bool]]]:
    """{task: {id: (response, intended verdict)}} for the four tasks."""
    r = {rec["id"]: rec for rec in records or build_records()}
    cot = {
        2: (cot_response(r[2], answer="[9, 30]"), True),  # time IoU 21/22 > 0.7
        3: (cot_response(r[3], answer=box_answer("short_a", "red circle", 5.0, shift=2)), True),  # box IoU > 0.5
        4: ("A", True),  # bare letter: official issue #2
        5: (cot_response(r[5], drop=(1,)), True),  # misses one perception step
        6: (cot_response(r[6], answer="B", wrong_steps=("0:47-0:53, an orange triangle appears in the centre.",),
                         last="A triangle has three corners, so the last shape has 3 corners."), False),
        8: ("I cannot tell from the video.", False),  # no answer to extract
        9: (cot_response(r[9], answer="[35, 60]"), False),  # time IoU 0.5
        12: (cot_response(r[12], answer="[10,10,40,40]"), False),  # box IoU 0
        15: ("", False),  # empty response
        18: (cot_response(r[18], answer="the green square",
                          last="Therefore, the green square is on screen for the longest time."), False),
    }
    direct_wrong = {6: "B", 8: "Not sure.", 12: "[10,10,40,40]", 18: "the green square"}

    def reduced_input(right: set[int]) -> dict[int, tuple[str, bool]]:  # without the video: right only where it is not needed
        return {qid: (f"So the answer is {rec['answer']}." if qid in right else NO_VIDEO, qid in right) for qid, rec in r.items()}

    return {"vcr_cot": {qid: cot.get(qid) or (cot_response(rec), True) for qid, rec in r.items()},
            "vcr_direct": {qid: (direct_wrong.get(qid, rec["answer"]), qid not in direct_wrong) for qid, rec in r.items()},
            "vcr_text_only": reduced_input({14, 19}), "vcr_one_frame": reduced_input({0, 6, 11, 14, 19, 20})}


DEMO_CORRECT = {task: sorted(i for i, (_r, ok) in rows.items() if ok) for task, rows in demo_table().items()}


def demo_predictions(root) -> list[dict]:
    """Replay lines {"task", "id", "response"} for every task and sample question."""
    return [{"task": task, "id": qid, "response": response}
            for task, rows in demo_table().items() for qid, (response, _ok) in sorted(rows.items())]


# ---------------------------------------------------------------- a judge that knows the truth

_TIME = re.compile(r"\b\d+:\d\d\b")
_TRUTH = {record["question"].strip(): record for record in build_records()}


def _norm(text: str) -> str:
    return re.sub(r"^the ", "", " ".join(str(text).lower().split()).strip(" ."))


def step_type(text: str) -> str:
    """The sample's step typing: a timestamp -> perception, "The question..." -> background."""
    return PERCEPTION if _TIME.search(text) else BACKGROUND if _norm(text).startswith("question asks") else REASONING


def answers_match(model: str, standard: str, question: str) -> bool:
    """The scoring rule of the answer-scoring prompt, for the sample's simple answers."""
    record, answer, letter = _TRUTH.get(question.strip()), _norm(model), standard.strip().upper()
    if not (record and record["multiple-choice"]):
        return answer == _norm(standard)
    if len(answer) == 1 and answer.upper() in "ABCD":  # a bare letter
        return answer.upper() == letter
    return answer == _norm(record["choices"].get(letter, ""))


def extract_answer(response: str) -> str:
    """What the extraction judge returns: after the last "answer is", a short reply itself, else Z."""
    found = re.findall(r"answer is\s*:?\s*(.+)", response, flags=re.IGNORECASE)
    if found:
        return found[-1].strip().rstrip(".")
    text = response.strip()
    if text and "\n" not in text and len(text) <= 60 and "not sure" not in text.lower() and "cannot" not in text.lower():
        return text.rstrip(".")
    return "Z"


def _between(text: str, start: str, end: str | None) -> str:
    begin = text.rindex(start) + len(start)
    return text[begin:text.rindex(end)] if end else text[begin:]


def _json_reply(items: list[dict], key: str) -> str:
    """Fenced for some prompts, bare for others (both shapes the official judges produce)."""
    body = json.dumps(items, indent=2)
    return f"```json\n{body}\n```" if zlib.crc32(key.encode()) % 2 else body


def _steps_reply(content: str, precision: bool) -> str:
    """The recall judge's reply (each reference step found in the solution or not) or the precision judge's
    (each solution line matching a reference step, the final answer checked against the truth)."""
    question = _between(content, "[Problem]\n", "\n\n[Solution]\n" if precision else "\n\n[Answer]\n")
    solution = _between(content, "\n[Solution]\n", "\n\n[Ground Truth Information]\n")
    steps = ast.literal_eval(_between(content, "[Ground Truth Information]\n", None))
    if not precision:
        items = [{"step": step, "step_type": step_type(step),
                  "judgment": "Matched" if _norm(step_body(step)) in _norm(solution) else "Unmatched"} for step in steps]
        return _json_reply(items, question)
    references, truth = [_norm(step_body(s)) for s in steps], _TRUTH[question.strip()]
    items = []
    for line in filter(None, (step_body(line).strip() for line in solution.splitlines())):
        kind = step_type(line)
        if kind == BACKGROUND:
            verdict = "Redundant"
        elif re.match(r"so the answer is", line, re.IGNORECASE):
            verdict = "Matched" if answers_match(extract_answer(line), truth["answer"], truth["question"]) else "Wrong"
        else:
            verdict = "Matched" if _norm(line) in references else "Wrong"
        # The precision prompt itself spells the verdict both "Match" and "Matched".
        verdict = "Match" if verdict == "Matched" and zlib.crc32(line.encode()) % 3 == 0 else verdict
        items.append({"step": line, "step_type": kind, "reasons_for_judgment": "sample truth", "judgment": verdict})
    return _json_reply(items, question)


def oracle_judge_reply(body: dict) -> str | None:
    """Reply to one of the four official VCR-Bench judge prompts from the sample's truth; None for a prompt
    that is not VCR-Bench's (the demo routes one local judge server across the three benchmarks)."""
    content = last_user_text(body)
    extraction_head = prompts.official_prompt("Answer_Extraction_Prompt_part1")
    scoring_head = prompts.official_prompt("Answer_Scoring_Prompt_part1")
    if content.startswith(extraction_head):
        return extract_answer(_between(content, "\nAnswer: ", "\nYour output:"))
    if content.startswith(scoring_head):
        question = _between(content, scoring_head + "\nQuestion: ", "\n[Model Answer]: ")
        model = _between(content, "\n[Model Answer]: ", "\n[Standard Answer]: ")
        standard = _between(content, "\n[Standard Answer]: ", "\nYour output:")
        return "1" if answers_match(model, standard, question) else "0"
    if content.startswith(prompts.official_prompt("Recall_Evaluation_Prompt")[:60]):
        return _steps_reply(content, precision=False)
    if content.startswith(prompts.official_prompt("Precision_Evaluation_Prompt")[:60]):
        return _steps_reply(content, precision=True)
    return None
