"""The CG-Bench sample benchmark: synthetic long videos whose every answer and clue is known.

`write_sample(root)` writes the official layout under `root` (a `$CGBENCH_ROOT`): both splits, the video
table, videos of 3 to 65 minutes (1-2 fps, 160x120: generated in seconds), SRTs for some videos and pre-cut
clue clips for some single-interval questions. Coloured shapes appear, move, flash and leave at known times;
the questions cover every question kind, several domains and four duration buckets. `demo_predictions(root)`:
replay replies for every task (mostly right, some wrong, some lenient, some unparseable);
`oracle_judge_reply(request)` answers the open-ended judge's prompts from the known truth.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

from lmms_video_reasoning.cg_bench import data, docs, prompts
from lmms_video_reasoning.judges.local_server import last_user_text
from lmms_video_reasoning.utils.data import media_index
from lmms_video_reasoning.utils.media.synthetic import Clip, Shape, write_srt

WIDTH, HEIGHT = 160, 120


@dataclass(frozen=True)
class SampleVideo:
    uid: str
    domain: str
    clip: Clip  # duration in whole seconds
    cues: tuple[tuple[float, float, str], ...] = ()


VIDEOS = (
    SampleVideo("cgsample_park", "Life Record", Clip(180, 2, WIDTH, HEIGHT, (
        Shape("circle", "red", 20.0, 40.0, pos0=(0.3, 0.5)),
        Shape("square", "blue", 60.0, 90.0, pos0=(0.2, 0.5), pos1=(0.8, 0.5)),
        Shape("triangle", "green", 120.0, 135.0, flash_hz=1.0),
    )), ((18, 42, "Look, a ball rolls in"), (58, 92, "Now something slides across"), (118.5, 136, "Watch it blink"))),
    SampleVideo("cgsample_screen", "GUI", Clip(840, 1, WIDTH, HEIGHT, (
        Shape("square", "white", 100.0, 160.0),
        Shape("circle", "magenta", 400.0, 430.0, pos0=(0.5, 0.2), pos1=(0.5, 0.8)),
        Shape("triangle", "cyan", 500.0, 520.0),
        Shape("triangle", "cyan", 600.0, 620.0),
    )), ((95, 165, "The window opens"), (395, 435, "A notification drops down"))),
    SampleVideo("cgsample_match", "Sports & Exercise", Clip(1320, 1, WIDTH, HEIGHT, (
        Shape("circle", "orange", 300.0, 360.0, pos0=(0.8, 0.5), pos1=(0.2, 0.5)),
        Shape("triangle", "blue", 900.0, 960.0, flash_hz=0.5),
    ))),
    SampleVideo("cgsample_drive", "Driving", Clip(3900, 1, WIDTH, HEIGHT, (
        Shape("square", "yellow", 1000.0, 1100.0, pos0=(0.2, 0.5), pos1=(0.8, 0.5)),
        Shape("circle", "red", 3000.0, 3060.0),
    ))),
)

COLOR_WORDS = ("Red", "Blue", "Green", "Yellow", "White", "Magenta", "Cyan", "Orange")
MOTIONS = ("It moves from left to right", "It moves from right to left", "It moves from top to bottom",
           "It flashes on and off", "It stays still", "It grows larger")
PADDING = ("It is not shown", "None of these", "All of these", "It cannot be determined")  # options when a pool runs short
# Open-ended answers the sample judge treats as "a different description of the same scene".
SYNONYMS = {"Red": "Crimson", "Blue": "Navy", "Magenta": "Pink", "Orange": "Amber", "Yellow": "Golden"}


def _motion(shape: Shape) -> str:
    if shape.flash_hz or shape.pos1 is None:
        return MOTIONS[3 if shape.flash_hz else 4]
    dx = shape.pos1[0] - shape.pos0[0]  # left to right, right to left, else top to bottom
    return MOTIONS[0 if dx > 0 else 1 if dx < 0 else 2]


@lru_cache(maxsize=1)
def build_questions() -> tuple[dict, ...]:
    """All sample questions in the official schema (deterministic; the truth of the sample)."""
    questions: list[dict] = []

    def add(video: SampleVideo, question: str, answer: str, pool, intervals, sub_category: str) -> None:
        qid = 9000 + len(questions)
        count = 5 + qid % 4  # 5 to 8 options, as in the dataset; the answer's place varies with the qid
        choices = [option for option in (*pool, *PADDING) if option != answer][: count - 1]
        choices.insert(qid % count, answer)
        questions.append({"qid": qid, "video_uid": video.uid, "question": question, "answer": answer, "choices": choices,
                          "right_answer": chr(ord("A") + qid % count), "clue_intervals": [list(i) for i in intervals],
                          "domain": video.domain, "sub_category": sub_category, "duration": video.clip.duration})

    for video in VIDEOS:
        about = f"In the {video.uid.split('_')[1]} video,"
        kinds = [s.kind for s in video.clip.shapes]
        for shape in (s for s in video.clip.shapes if kinds.count(s.kind) == 1):  # a kind seen once: "the <kind>" is unambiguous
            span = [[shape.start, shape.end]]
            add(video, f"{about} what color is the {shape.kind}?", shape.color.capitalize(), COLOR_WORDS, span, "Entity Perception")
            add(video, f"{about} what does the {shape.label} do while it is on screen?", _motion(shape), MOTIONS, span, "Event Perception")
        first, last = video.clip.shapes[0], video.clip.shapes[-1]
        first_name, last_name, seconds = first.label, last.label, int(first.end - first.start)
        add(video, f"{about} which appears first: the {last_name} or the {first_name}?", f"The {first_name}",
            [f"The {last_name}", "They appear together", "Neither appears", "Both appear twice"],
            [[first.start, first.end], [last.start, last.end]], "Event Cognition")
        add(video, f"{about} for how many seconds is the {first_name} visible?", f"{seconds} seconds",
            [f"{n} seconds" for n in (5, 10, 15, 20, 30, 45, 60, 100) if n != seconds], [[first.start, first.end]], "Time Perception")
        add(video, f"{about} what color is the star?", "There is no star in the video",
            ["Red", "Blue", "Green", "Yellow", "White", "Orange"], [[first.start, first.end]], "Hallucination")
        for start, end, text in video.cues[:2]:
            add(video, f"{about} what does the subtitle say at {int(start) + 3} seconds?",
                text, [c[2] for c in video.cues if c[2] != text] + ["Nothing is said", "Goodbye"], [[start, end]], "Text Perception")
    screen = VIDEOS[1]
    add(screen, "In the screen video, how many times does the cyan triangle appear?", "Twice",
        ["Once", "Three times", "Never", "Four times"], [[500, 520], [600, 620]], "Entity Cognition")
    add(screen, "In the screen video, how long after the cyan triangle first leaves does it come back?", "80 seconds",
        ["20 seconds", "40 seconds", "120 seconds", "200 seconds"], [[500, 520], [600, 620]], "Time Cognition")
    return tuple(questions)


MINI_EXCLUDED = 2  # the last questions are only in the full split (cgbench.json)


def write_sample(root) -> Path:
    """Write the sample benchmark under `root` (idempotent: existing videos are kept)."""
    root = Path(root)  # its folders are made by Clip.write
    questions = list(build_questions())
    meta = {}
    for video in VIDEOS:
        clip = video.clip
        clip.write(root / data.VIDEO_DIR / f"{video.uid}.mp4", gop=clip.fps * 60)
        # The official metadata's max_frame is the container's frame count minus one.
        meta[video.uid] = {"duration": float(clip.duration), "max_frame": clip.duration * clip.fps - 1, "fps": float(clip.fps)}
        if video.cues:
            write_srt(root / data.SUBTITLE_DIR / f"{video.uid}.srt", video.cues)
        # Pre-cut clue clips for every other single-interval question; the rest use cut_clip.
        for question in questions:
            if question["video_uid"] == video.uid and len(question["clue_intervals"]) == 1 and question["qid"] % 2 == 0:
                [(start, end)] = question["clue_intervals"]
                inside = tuple(replace(s, start=s.start - start, end=s.end - start) for s in clip.shapes if s.start >= start and s.end <= end)
                replace(clip, duration=end - start, shapes=inside).write(root / data.CLUE_DIR / f"{question['qid']}.mp4")
    (root / docs.META_FILE).write_text(json.dumps(meta, indent=1))
    (root / docs.SPLIT_FILES["mini"]).write_text(json.dumps(questions[:-MINI_EXCLUDED], indent=1, ensure_ascii=False))
    (root / docs.SPLIT_FILES["full"]).write_text(json.dumps(questions, indent=1, ensure_ascii=False))
    media_index.forget()  # the root has new files
    return root


# --- Replay predictions
def _fenced(value) -> str:
    return "```json\n" + json.dumps({"result": value}, ensure_ascii=False) + "\n```"


def mcq_reply(question: dict, variant: int) -> str:
    """A multiple-choice reply: right (fenced JSON) mostly; some wrong, with no JSON (the official letter
    fallback), a bare word (quoted by the parser) or unparseable."""
    right = question["right_answer"]
    return {3: _fenced("A" if right != "A" else "B"), 5: f"The answer is {right}.", 6: "```json\n{\"result\": " + right + "}\n```",
            7: "I cannot tell from these frames."}.get(variant % 9, _fenced(right))


def grounding_reply(question: dict, variant: int) -> str:
    """A grounding reply: the true intervals, a half-overlapping guess (tIoU 1/3), a miss (tIoU 0), a reversed
    interval in prose (number fallback), no numbers (official tIoU 0) or one number (unparseable)."""
    truth = question["clue_intervals"]
    (start, end), half = truth[0], (truth[0][1] - truth[0][0]) / 2
    return {1: _fenced([[start + half, end + half]]), 2: _fenced([[0, 5]]), 3: f"The clue is between {int(end)} and {int(start)} seconds.",
            4: "Around the middle of the video.", 5: "At about 12 seconds."}.get(variant % 6, _fenced(truth))


def open_reply(question: dict, variant: int) -> str:
    """An open-ended reply: the answer, a synonym (judge step 2), a wrong answer, nothing, or no JSON (the whole reply)."""
    answer = question["answer"]
    if answer in SYNONYMS and variant % 2:
        return _fenced(SYNONYMS[answer])
    return {2: _fenced("A purple hexagon"), 3: answer, 4: ""}.get(variant % 5, _fenced(answer))


def demo_predictions(root=None) -> list[dict]:
    """Replay lines for every CG-Bench task on the sample (mini split)."""
    blind_reply = lambda q, variant: "A" if variant % 4 else q["right_answer"]  # noqa: E731 - a bare letter, as the paper's prompt asks
    replies = (("cg_bench_long", "", mcq_reply, 0), ("cg_bench_clue", "", mcq_reply, 4), ("cg_bench_grounding", "", grounding_reply, 0),
               ("cg_bench_open", "", open_reply, 0), ("cg_bench_blind", "", blind_reply, 0), ("cg_bench_mcq", ":long", mcq_reply, 0),
               ("cg_bench_mcq", ":clue", mcq_reply, 4), ("cg_bench_mcq", ":grounding", grounding_reply, 0))
    return [{"task": task, "id": f"{q['qid']}{suffix}", "response": reply(q, i + shift)}
            for i, q in enumerate(build_questions()[:-MINI_EXCLUDED]) for task, suffix, reply, shift in replies]


# --- Sample judge
_QUOTED = re.compile(r"^Question: (?P<question>.*?)\n\n(?:The ground truth answer is '(?P<answer>.*?)'\n\n)?The model's prediction is '(?P<prediction>.*?)'\n\n\Z", re.S)


def oracle_judge_reply(request: dict) -> str | None:
    """The sample judge of CG-Bench's two open-ended prompts (None for any other). Step 1: 1 if the prediction
    equals the reference (case-insensitive), 2 if it is the sample's synonym of it, else 0. Step 2: 1 if images
    were sent and the prediction is the synonym of the question's true answer, else 0."""
    text = last_user_text(request)
    images = sum(part.get("type") == "image_url" for message in request.get("messages", []) if message.get("role") == "user"
                 and isinstance(message.get("content"), list) for part in message["content"])
    step1, step2 = prompts.load_prompt("eval_open_step_1"), prompts.load_prompt("eval_open_step_2")
    if text.startswith(step1):
        match = _QUOTED.search(text[len(step1):])
        if not match:
            return _fenced(0)
        answer, prediction = match["answer"] or "", match["prediction"]
        return _fenced(1 if prediction.lower() == answer.lower() else 2 if SYNONYMS.get(answer) == prediction else 0)
    if text.startswith(step2):
        match = _QUOTED.search(text[text.rfind("Question: "):])
        truth = {q["question"]: q["answer"] for q in build_questions()}
        return _fenced(int(bool(match) and images > 0 and SYNONYMS.get(truth.get(match["question"], "")) == match["prediction"]))
    return None
