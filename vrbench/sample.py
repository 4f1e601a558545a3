"""The VRBench sample benchmark: synthetic "narrative" videos in the official layout.

`write_sample(root)` writes `root/VRBench_eval.jsonl` (the schema of the official `VRBench_debug.jsonl`)
and four videos (2 fps, 160x120, 2.5-4 minutes) in which coloured shapes act out a story with known
times: a circle (the "mover") enters at 0:10 and glides right to a square (the "target", on screen
from 0:20), which leaves when it is reached; a triangle flashes at 1 Hz mid-video; a second circle
(the "late" one) appears while it still flashes and sinks toward the centre until the end. Each video
has one question of each of the seven reasoning types with reference steps timed `[HH:MM:SS->HH:MM:SS]`
(none for hypothetical steps, as in the data). The data's `Counting Porblems` is spelled right in one
video; one summary is longer than the judge's 10,000-character cut; one video sits where a plain
extraction of the split zip puts it (`v001/<id>.mp4`), not at its record's path.

`demo_predictions(root)`: replay responses for every VRBench task, mostly right, some wrong, one
unextractable, one the test judge refuses to rate; two rounds each for the two-phase tasks.
`oracle_judge_reply(body)`: a deterministic stand-in for the DeepSeek judge (`judges.LocalJudgeServer`)
rating a response by how many reference steps it repeats.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from lmms_video_reasoning.judges.local_server import last_user_text
from lmms_video_reasoning.utils.media.synthetic import Clip, Shape
from lmms_video_reasoning.vrbench import prompts
from lmms_video_reasoning.vrbench.docs import ANNOTATIONS, flatten
from lmms_video_reasoning.vrbench.scoring import NON_UNIQUE, TAGS, UNIQUE, process_score

FPS, WIDTH, HEIGHT = 2, 160, 120
TWO_PHASE_TASKS = ("vr_bench_two_phase", "vr_bench_text_two_phase")
TASKS = ("vr_bench", "vr_bench_mcq", "vr_bench_text", "vr_bench_official", *TWO_PHASE_TASKS)
LETTERS = "ABCD"
# Markers in demo responses that the test judge reacts to.
JUDGE_REFUSAL_MARKER = "JUDGE-FAIL"


@dataclass(frozen=True)
class Story:
    video_id: str
    duration: int
    mover: str
    target: str
    flasher: str
    late: str
    counting_spelling: str = "Counting Porblems"
    summary_every: int = 30  # seconds between summary observations (small = long summary)
    zip_layout: bool = False  # stored at v001/<id>.mp4 instead of the record's path

    leave = property(lambda self: int(0.45 * self.duration))  # the target leaves when the mover reaches it
    flash = property(lambda self: (int(0.55 * self.duration), int(0.75 * self.duration)))  # the triangle's start and end
    late_start = property(lambda self: int(0.7 * self.duration))
    path = property(lambda self: f"VRBench/videos/v001/{self.video_id}.mp4")  # the record's `video_path` (the official form)

    @property
    def clip(self) -> Clip:
        return Clip(self.duration, FPS, WIDTH, HEIGHT, (
            Shape("circle", self.mover, 10, self.leave, pos0=(0.15, 0.5), pos1=(0.62, 0.5)),
            Shape("square", self.target, 20, self.leave, pos0=(0.78, 0.5)),
            Shape("triangle", self.flasher, *self.flash, pos0=(0.5, 0.3), flash_hz=1.0),
            Shape("circle", self.late, self.late_start, self.duration, pos0=(0.5, 0.1), pos1=(0.5, 0.6)),
        ))


STORIES = (
    Story("syn_story_01", 150, "red", "blue", "green", "yellow"),
    Story("syn_story_02", 180, "magenta", "cyan", "orange", "white", zip_layout=True),
    Story("syn_story_03", 210, "yellow", "green", "red", "blue", counting_spelling="Counting Problems"),
    Story("syn_story_04", 240, "cyan", "orange", "white", "magenta", summary_every=1),
)


def hms(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600:02d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def span(start: float, end: float) -> str:
    return f"[{hms(start)}->{hms(end)}]"


def summary(story: Story) -> str:
    """A narrative summary in the data's style: the plot, then timed observations."""
    lead, leave, (f0, f1), late = 10, story.leave, story.flash, story.late_start
    plot = (
        f"The video tells a short story of coloured shapes on a black stage. A {story.mover} circle enters on the left "
        f"at {hms(lead)} and glides to the right. A {story.target} square waits on the right from {hms(20)}. "
        f"When the {story.mover} circle reaches it at {hms(leave)}, both disappear. "
        f"In the middle of the video a {story.flasher} triangle flashes once per second from {hms(f0)} to {hms(f1)}. "
        f"While it is still flashing, a {story.late} circle appears at the top at {hms(late)} and sinks slowly toward "
        f"the centre until the video ends at {hms(story.duration)}."
    )
    notes = []
    for t in range(0, story.duration, story.summary_every):
        seen = ", ".join(f"a {s.label}" for s in story.clip.shapes if s.start <= t < s.end)
        notes.append(f"At {hms(t)} the frame shows {seen or 'nothing but the dark background'}.")
    return plot + " " + " ".join(notes)


def questions(story: Story, video_index: int) -> dict:
    """The seven questions of one video (`mcq` field of the record)."""
    s, leave, (f0, f1), late = story, story.leave, story.flash, story.late_start
    specs = [
        ("Event Attribution", f"Why does the {s.target} square leave the screen?",
            f"Because the {s.mover} circle moves across the screen and reaches it.",
            [f"Because the {s.flasher} triangle starts flashing.", f"Because the {s.late} circle pushes it off the top.", "Because the video ends."],
            {"1": f"The {s.target} square appears on the right {span(20, 25)}", "2": f"The {s.mover} circle moves from the left toward the {s.target} square {span(10, leave)}", "3": f"The {s.target} square leaves as soon as the {s.mover} circle reaches it {span(leave - 5, leave)}"}),
        (s.counting_spelling, "How many different shapes appear in the video?",
            "Four shapes appear in total.",
            ["Two shapes appear in total.", "Three shapes appear in total.", "Five shapes appear in total."],
            {"1": f"A {s.mover} circle appears {span(10, 15)}", "2": f"A {s.target} square appears {span(20, 25)}", "3": f"A {s.flasher} triangle appears {span(f0, f0 + 5)}", "4": f"A {s.late} circle appears {span(late, late + 5)}"}),
        ("Event Prediction", f"The {s.late} circle is still sinking when the video ends. What will most likely happen next?",
            f"It will reach the centre of the screen, where the {s.flasher} triangle flashed.",
            [f"It will turn into a {s.target} square.", "It will fly back to the top corner.", f"It will split into two {s.mover} circles."],
            {"1": f"The {s.late} circle appears at the top {span(late, late + 5)}", "2": f"It keeps moving down toward the centre {span(late, s.duration)}", "3": "At that pace it will soon reach the centre, where the triangle flashed"}),
        ("Hypothetical Reasoning", f"What would have happened if the {s.mover} circle had never moved?",
            f"The {s.target} square would have stayed on the screen.",
            [f"The {s.flasher} triangle would have stopped flashing.", f"The {s.late} circle would have appeared earlier.", "The video would have been shorter."],
            {"1": f"The {s.target} square leaves only when the {s.mover} circle reaches it", "2": f"If the {s.mover} circle stayed on the left, it would never reach the square", "3": f"So the {s.target} square would have stayed on the screen"}),
        ("Implicit Inference", f"What does the flashing of the {s.flasher} triangle announce?",
            f"The arrival of the {s.late} circle, which appears while the triangle is still flashing.",
            [f"The departure of the {s.target} square.", "The end of the video.", f"The return of the {s.mover} circle."],
            {"1": f"The {s.flasher} triangle starts flashing in the middle of the video {span(f0, f0 + 5)}", "2": f"While it still flashes, the {s.late} circle appears {span(late, late + 5)}", "3": f"The flashing stops once the {s.late} circle is on screen {span(f1 - 5, f1)}"}),
        ("Logical Linkage", f"What do the {s.mover} circle and the {s.late} circle have in common?",
            "Both are circles that move steadily across the screen.",
            ["Both flash once per second.", "Both stay in the same place.", "Both are squares that leave early."],
            {"1": f"The {s.mover} circle glides from left to right {span(10, leave)}", "2": f"The {s.late} circle sinks from the top toward the centre {span(late, s.duration)}", "3": "Both are circles and both move steadily"}),
        ("Event Summarization", "What is the main story of this video?",
            f"A {s.mover} circle reaches a {s.target} square and both vanish; then a flashing {s.flasher} triangle announces a {s.late} circle that sinks toward the centre.",
            ["A single square stays still for the whole video.", "Two triangles chase each other around the edges.", "The screen stays dark except for a scrolling text."],
            {}),
    ]
    mcq = {}
    for number, (rtype, question, correct, wrong, steps) in enumerate(specs, 1):
        position = (video_index + number) % 4
        mcq[f"qa{number}"] = {"question": question, "options": dict(zip(LETTERS, wrong[:position] + [correct] + wrong[position:])),
                              "answer": LETTERS[position], "original_question": question, "original_answer": correct,
                              "reasoning_process": steps, "reasoning_type": rtype}
    return mcq


def records() -> list[dict]:
    return [{"video_id": story.video_id, "video_path": story.path, "video_summary": summary(story),
             "mcq": questions(story, index), "video_read_type": "decord" if index % 2 else "av"}
            for index, story in enumerate(STORIES)]


def write_sample(root: Path) -> Path:
    """Write the sample benchmark under `root` (a VRBENCH_ROOT)."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    for story in STORIES:
        stored = f"v001/{story.video_id}.mp4" if story.zip_layout else story.path
        story.clip.write(root / stored)
    (root / ANNOTATIONS).write_text("".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records()), encoding="utf-8")
    return root


# --- Replay predictions and the test judge

_TIMES = re.compile(r"\s*\[\d\d:\d\d:\d\d->\d\d:\d\d:\d\d\]\.?")


def step_texts(texts) -> list[str]:
    """Reference step texts without their timestamps."""
    return [_TIMES.sub("", text).strip() for text in texts]


def demo_letter(doc: dict, index: int) -> str:
    """The letter the `index`-th replay response names: a wrong one where index % 8 == 3, else the right one."""
    return LETTERS[(LETTERS.index(doc["answer"]) + 1) % 4] if index % 8 == 3 else doc["answer"]


def demo_response(doc: dict, index: int, named: str | None = None) -> str:
    """The replay response for the `index`-th question: a design mixing right, wrong, odd.

    index % 8 == 3: a wrong letter with one step (one per type family); index 5: no letter at all; index 9: the
    test judge refuses to rate it; index 12: `\\boxed{X}`; index 16: an "Assistant:" prefix;
    otherwise the reference steps and `<Answer> X`. `named`: an `<Answer>` line naming it in place of the letter.
    """
    steps = step_texts(text for _number, text in doc["steps"]) or [doc["original_answer"]]
    body = "\n".join(f"<Step {n}> {text}" for n, text in enumerate(steps, 1))
    answer = f"<Answer> {named or demo_letter(doc, index)}"
    if index == 5:
        return "Sorry, I cannot tell from this video."
    if index % 8 == 3:
        return f"<Step 1> {steps[0]}\n{answer}"
    if index == 9:
        return f"{body}\n{JUDGE_REFUSAL_MARKER}\n{answer}"
    if index == 12:
        return f"{body}\nSo the answer is " + (answer if named else f"\\boxed{{{doc['answer']}}}")
    if index == 16:
        return f"Assistant: {body}\n{answer}"
    return f"{body}\n{answer}"


def two_phase_replies(doc: dict, index: int) -> list[str]:
    """`demo_response` as the two rounds of the paper's protocol: the reasoning concluding in the
    reference answer's words where it named a letter, then that letter (`<Answer> X`, or the
    reply itself when it named none)."""
    if index == 5:
        return [demo_response(doc, index)] * 2
    return [demo_response(doc, index, named=doc["original_answer"]), f"<Answer> {demo_letter(doc, index)}"]


def demo_predictions(root: Path) -> list[dict]:
    """Replay lines `{"task", "id", "response"}` for every VRBench task."""
    docs = flatten(json.loads(line) for line in (Path(root) / ANNOTATIONS).read_text(encoding="utf-8").splitlines() if line.strip())
    return [{"task": task, "id": doc["sample_id"], "response": (two_phase_replies if task in TWO_PHASE_TASKS else demo_response)(doc, index)}
            for task in TASKS for index, doc in enumerate(docs)]


_STEP_LINE = re.compile(r"^<Step \d+> (.*)$", re.MULTILINE)
REFUSAL = "I am unable to rate this response."
# lmms-eval 0.7.3's own `vrbench_process` asks for one 0-10 score in this tag (its single-prompt judge).
SINGLE_SCORE_PROMPT = "<rate>the score (0-10)</rate>"


def _ratings(user: str) -> tuple[int, ...] | None:
    """The test judge's four ratings, in weight order (None: a response carrying `JUDGE-FAIL`):
    matching/relevance = factual = round(10 x repeated reference steps / steps); logical = 8 with an
    `<Answer>` line, else 2; clarity = 7. The steps are found wherever the prompt puts them (both protocols)."""
    response = user.split("# Model's reasoning process and Answer\n", 1)[-1].split("\n# Correct reasoning step and Answer", 1)[0]
    if JUDGE_REFUSAL_MARKER in response:
        return None
    steps = step_texts(_STEP_LINE.findall(user.split("# Correct reasoning step and Answer", 1)[-1]))
    match = round(10 * sum(1 for step in steps if step in response) / len(steps)) if steps else 5
    return match, 8 if "<Answer>" in response else 2, match, 7


def oracle_judge_reply(body: dict) -> str | None:
    """The deterministic test judge for VRBench's judge prompts: the official four-tag ones, rating the response
    by the reference steps it repeats (`_ratings`), and lmms-eval 0.7.3's single-score one (the weighted sum in a
    `<rate>` tag); None for any other prompt (the demo routes one local judge server across the three benchmarks)."""
    messages, user = body.get("messages") or [], last_user_text(body)
    system = messages[0].get("content") if messages else None
    if SINGLE_SCORE_PROMPT not in user and system not in (prompts.load(prompts.UNIQUE_SYSTEM), prompts.load(prompts.NON_UNIQUE_SYSTEM)):
        return None
    ratings = _ratings(user)
    if ratings is None:
        return REFUSAL
    if SINGLE_SCORE_PROMPT in user:
        return f"<rate>{process_score(ratings):.1f}</rate>\n<reason>test judge</reason>"
    tags = TAGS[UNIQUE if system == prompts.load(prompts.UNIQUE_SYSTEM) else NON_UNIQUE]
    return "".join(f"<{tag}>{value}</{tag}>\n" for tag, value in zip(tags, ratings)) + "<rationale>\n    test judge\n</rationale>"
