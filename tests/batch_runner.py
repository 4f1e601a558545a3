"""A stand-in for `vllm run-batch`: reads a batch input JSONL, answers each line with a judge
function (the sample oracle by default), writes the output JSONL in the format `vllm run-batch`
and the OpenAI Batch API share. Usage counted with a real tokenizer and a ChatML chat template,
as a vLLM server counts a Qwen judge's prompt (not the estimate's formula).

    python tests/batch_runner.py -i requests.jsonl -o results.jsonl [--model NAME] [--faults SPEC]
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from pathlib import Path
from typing import Callable


def chatml_prompt_tokens(messages: list[dict], encode: Callable[[str], list]) -> int:
    """Prompt tokens as a ChatML template renders them (`<|im_start|>role\\ncontent<|im_end|>\\n` per
    message, then `<|im_start|>assistant\\n`); each image part counts 85 tokens."""
    total = 0
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            text, images = content, 0
        else:
            text = "".join(part.get("text", "") for part in content or [] if part.get("type") == "text")
            images = sum(part.get("type") == "image_url" for part in content or [])
        total += len(encode(f"<|im_start|>{message.get('role', 'user')}\n{text}<|im_end|>\n")) + 85 * images
    return total + len(encode("<|im_start|>assistant\n"))


def answer_file(source: Path, target: Path, responder: Callable[[dict], str], model: str | None = None,
                faults: dict[str, str] | None = None, encode: Callable[[str], list] | None = None) -> int:
    """Answer every line of `source` into `target`; `faults`: custom_id -> "error" | "garbage" | "other_model".
    Returns the number of lines answered."""
    if encode is None:
        from lmms_video_reasoning.judges.tokens import tokenizer_for

        encode = tokenizer_for("gpt-4o").encode
    faults = faults or {}
    out = []
    for text in Path(source).read_text(encoding="utf-8").splitlines():
        if not text.strip():
            continue
        line = json.loads(text)
        body, key = line["body"], line["custom_id"]
        fault = faults.get(key)
        if fault == "error":
            out.append({"id": f"vllm-{uuid.uuid4().hex}", "custom_id": key,
                        "response": {"status_code": 500, "request_id": key, "body": {"error": {"message": "injected"}}}, "error": None})
            continue
        reply = "I cannot rate this." if fault == "garbage" else responder(body)
        answered_by = "some-other-model" if fault == "other_model" else (model or body["model"])
        prompt = chatml_prompt_tokens(body["messages"], encode)
        completion = len(encode(reply))
        out.append({"id": f"vllm-{uuid.uuid4().hex}", "custom_id": key, "error": None, "response": {
            "status_code": 200, "request_id": f"vllm-batch-{key[:8]}",
            "body": {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "model": answered_by,
                     "choices": [{"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}],
                     "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}}}})
    Path(target).write_text("".join(json.dumps(row) + "\n" for row in out), encoding="utf-8")
    return len(out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-i", "--input", required=True)
    parser.add_argument("-o", "--output", required=True)
    parser.add_argument("--model", default=None)
    args = parser.parse_args(argv)
    from lmms_video_reasoning.utils.tools.demo import sample_responder

    answer_file(Path(args.input), Path(args.output), sample_responder, args.model)
    return 0


if __name__ == "__main__":
    sys.exit(main())
