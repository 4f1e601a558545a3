"""Local OpenAI-compatible servers for end-to-end tests: a model server and a sample judge.

Both are `judges.LocalJudgeServer` (a real HTTP server on 127.0.0.1 that records every
request body and injects faults from a `FaultPlan`) with a different responder:

- `model_responder` stands in for a model server behind lmms-eval's `openai` model: it
  answers every request deterministically from what it received (the number of images,
  a hash of the text), so a one-rank and a two-rank run get the same answers.
- `SampleJudge` answers judge prompts from the sample benchmark's known truth, by asking
  each benchmark's own sample responder, and records prompts that none recognised.

`image_parts` / `decoded_images` let a test check that video frames really reached the
server (base64 images that decode to frames of the sample videos, not placeholders).
"""

from __future__ import annotations

import base64
import importlib
import io
import threading
import zlib

from judge_faults import FaultPlan  # noqa: F401 (re-exported for tests)
from lmms_video_reasoning.judges import LocalJudgeServer as _LocalJudgeServer

SAMPLE_JUDGE_MODEL = "sample-oracle"  # the judge model the end-to-end tests name (LMMS_VR_JUDGE_MODEL)


class LocalJudgeServer(_LocalJudgeServer):
    """The local judge serving (and listing at GET /v1/models) the model the tests name, as a real
    server must for the run's preflight to accept it."""

    def __init__(self, *args, model: str = SAMPLE_JUDGE_MODEL, **kwargs) -> None:
        super().__init__(*args, model=model, **kwargs)

# VRBench's sample judge rates any prompt, so it is asked last.
BENCHMARKS = ("vcr_bench", "cg_bench", "vrbench")
LETTERS = "ABCD"


def user_parts(body: dict) -> list[dict]:
    """Content parts of every user message of a chat request (a string becomes one text part)."""
    parts: list[dict] = []
    for message in body.get("messages", []):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        parts.extend([{"type": "text", "text": content}] if isinstance(content, str) else content or [])
    return parts


def image_parts(body: dict) -> list[str]:
    """The image URLs (data URLs for local frames) in a chat request."""
    return [part["image_url"]["url"] for part in user_parts(body) if part.get("type") == "image_url"]


def request_text(body: dict) -> str:
    return "\n".join(part.get("text", "") for part in user_parts(body) if part.get("type") == "text")


def decoded_images(body: dict):
    """The request's images as PIL images (raises if one is not a decodable image)."""
    from PIL import Image

    images = []
    for url in image_parts(body):
        header, _, payload = url.partition(",")
        if not header.startswith("data:image/"):
            raise ValueError(f"image part is not a data URL: {header[:40]!r}")
        images.append(Image.open(io.BytesIO(base64.b64decode(payload))).convert("RGB"))
    return images


def model_responder(body: dict) -> str:
    """A deterministic stand-in for a video model: the answer depends only on the request.

    It names how many frames it saw (so a test can tell a frame-less request) and picks a
    letter and an interval from a hash of the question, in the formats the benchmarks parse.
    """
    text = request_text(body)
    digest = zlib.crc32(text.encode("utf-8", "surrogatepass"))
    letter = LETTERS[digest % len(LETTERS)]
    start = digest % 20
    return (
        f"I watched {len(image_parts(body))} frames. A shape appears and moves across the screen.\n"
        f"The relevant interval is [{start}, {start + 10}].\n"
        f'So the answer is ({letter}).\n```json\n{{"result": "{letter}"}}\n```'
    )


class SampleJudge:
    """A judge responder answering from the sample benchmark's truth (each benchmark's own oracle).

    A benchmark's sample module offers `oracle_judge_reply(body) -> str | None` or
    `judge_responder(body) -> str` (raising ValueError for a prompt that is not its own).
    Prompts no benchmark recognises are kept in `unrecognised` and answered "0".
    """

    def __init__(self, benchmarks=BENCHMARKS) -> None:
        self.responders = []
        for name in benchmarks:
            try:
                module = importlib.import_module(f"lmms_video_reasoning.{name}.sample")
            except ImportError:
                continue
            for attribute in ("oracle_judge_reply", "judge_responder"):
                if hasattr(module, attribute):
                    self.responders.append(getattr(module, attribute))
                    break
        self.unrecognised: list[dict] = []
        self._lock = threading.Lock()

    def __call__(self, body: dict) -> str:
        for responder in self.responders:
            try:
                reply = responder(body)
            except (ValueError, KeyError, TypeError, AttributeError, IndexError):
                continue  # not this benchmark's prompt
            if reply is not None:
                return reply
        with self._lock:
            self.unrecognised.append(body)
        return "0"


class PersistentFaults(FaultPlan):
    """Every attempt of the requests `fails(body)` selects gets fault `kind`, retries included.

    (`FaultPlan` faults are transient: a retried request eventually succeeds. A model server
    that keeps failing some requests is what makes lmms-eval give up and return its failure
    string; the openai SDK's own retries and lmms-eval's cannot get past it.)
    """

    def __init__(self, fails, kind: str = "500") -> None:
        super().__init__(kinds=(kind,))
        self.fails = fails
        self.kind = kind
        self.failed_bodies: list[dict] = []

    def decide(self, number: int, body: dict) -> str | None:
        if self.fails(body):
            with self._lock:
                self.failed_bodies.append(body)
            return self.kind
        return None


def every_nth_question(n: int):
    """A `PersistentFaults` selector: the requests whose question text hashes to 0 modulo n."""
    return lambda body: zlib.crc32(request_text(body).encode("utf-8", "surrogatepass")) % n == 0
