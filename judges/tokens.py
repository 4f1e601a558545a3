"""Token counts of judge requests, for the cost estimate (`batch_pass.py`), with no network.

OpenAI models are counted with `tiktoken`, its BPE files read from the `bpe-openai` wheel (checked
against the SHA-256 tiktoken expects) instead of downloaded, which a GPU node cannot do; other models
(DeepSeek, Qwen, Llama) with `o200k_base`, a stated approximation (a few percent off on English).
An image costs what OpenAI bills: `detail: low` a base price; otherwise the base plus a price per
512-pixel tile of the image scaled to fit 2048x2048, then to 768 px on its short side.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import logging
import os
import tempfile
import threading
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

log = logging.getLogger("lmms_video_reasoning.judges")

# What tiktoken downloads for each encoding, and the SHA-256 it checks the file against.
_TIKTOKEN_FILES = {
    "o200k_base": ("https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
                   "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"),
    "cl100k_base": ("https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
                    "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"),
}
APPROXIMATION = "o200k_base"  # the encoding that stands in for models without a tokenizer here
TOKENS_PER_MESSAGE = 3
REPLY_PRIMING_TOKENS = 3

_load_lock = threading.Lock()


@dataclass(frozen=True)
class Tokenizer:
    """Counts tokens for one judge model; `method` says how (named in the estimate)."""

    model: str
    method: str  # e.g. "tiktoken o200k_base" or "approximation: tiktoken o200k_base (no tokenizer for deepseek-chat)"
    encode: Callable[[str], list[int]]
    exact: bool

    def text_tokens(self, text: str) -> int:
        return len(self.encode(text)) if text else 0

    def request_tokens(self, messages: list[dict]) -> int:
        """Input tokens of a chat request: framing (per message, and priming the reply), text and images."""
        total = REPLY_PRIMING_TOKENS
        for message in messages:
            total += TOKENS_PER_MESSAGE + self.text_tokens(str(message.get("role", "")))
            content = message.get("content")
            if isinstance(content, str):
                total += self.text_tokens(content)
                continue
            for part in content or []:
                if not isinstance(part, dict):
                    continue
                if part.get("type") == "text":
                    total += self.text_tokens(str(part.get("text", "")))
                elif part.get("type") == "image_url":
                    total += image_tokens(self.model, part.get("image_url") or {})
        return total


def encoding_name(model: str) -> str | None:
    """tiktoken's encoding for an OpenAI model name (snapshots, `ft:` and `org/` prefixes too), else None."""
    import tiktoken.model

    name = model.rsplit("/", 1)[-1]
    try:
        return tiktoken.model.encoding_name_for_model(name)
    except KeyError:
        return None


@lru_cache(maxsize=None)
def tokenizer_for(model: str) -> Tokenizer:
    """The judge model's tokenizer, or the stated approximation (never a network access)."""
    name = encoding_name(model)
    exact = name in _TIKTOKEN_FILES
    encoding_used = name if exact else APPROXIMATION
    try:
        encoding = _offline_encoding(encoding_used)
    except Exception as error:  # noqa: BLE001 - an estimate without tiktoken is still an estimate
        log.warning("tiktoken's %s could not be loaded offline (%s: %s); token counts use 4 characters per token",
                    encoding_used, type(error).__name__, error)
        return Tokenizer(model, "approximation: 4 characters per token (tiktoken unavailable)",
                         lambda text: [0] * max(1, len(text) // 4), False)
    encode = lambda text: encoding.encode(text, disallowed_special=())  # noqa: E731 - prompts may quote special tokens
    if exact:
        return Tokenizer(model, f"tiktoken {encoding_used}", encode, True)
    why = f"{model} is not an OpenAI model" if name is None else f"tiktoken's {name} is not bundled"
    return Tokenizer(model, f"approximation: tiktoken {encoding_used} ({why})", encode, False)


def _offline_encoding(name: str):
    """tiktoken's encoding `name`, its BPE file served from the `bpe-openai` wheel through a private cache folder."""
    import tiktoken

    url, expected = _TIKTOKEN_FILES[name]
    data = gzip.decompress(_bundled_file(f"{name}.tiktoken.gz").read_bytes())
    if hashlib.sha256(data).hexdigest() != expected:
        raise ValueError(f"the bundled {name} file does not have the hash tiktoken expects")
    with _load_lock, tempfile.TemporaryDirectory(prefix="lmms_vr_tiktoken_") as folder:
        # tiktoken looks its files up as <cache dir>/<sha1 of the URL> and checks the hash itself.
        Path(folder, hashlib.sha1(url.encode()).hexdigest()).write_bytes(data)
        saved = os.environ.get("TIKTOKEN_CACHE_DIR")
        os.environ["TIKTOKEN_CACHE_DIR"] = folder
        try:
            return tiktoken.get_encoding(name)
        finally:
            if saved is None:
                os.environ.pop("TIKTOKEN_CACHE_DIR", None)
            else:
                os.environ["TIKTOKEN_CACHE_DIR"] = saved


def _bundled_file(name: str) -> Path:
    """A data file of the `bpe-openai` wheel, found without importing it (its Rust extension is not needed)."""
    import importlib.util

    spec = importlib.util.find_spec("bpe_openai")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the bpe-openai package is not installed (pip install bpe-openai)")
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / name
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing from the bpe-openai package")
    return path


def image_tokens(model: str, image_url: dict[str, Any]) -> int:
    """What OpenAI bills for one image part (see the module doc); the size is read from a data URL."""
    base, per_tile = (2833, 5667) if "gpt-4o-mini" in model else (85, 170)  # tokens: base, per 512 px tile
    if image_url.get("detail") == "low":
        return base
    size = _data_url_size(str(image_url.get("url", "")))
    if size is None:
        return base + 4 * per_tile  # a remote image of unknown size: a 1024x1024-like image
    return base + per_tile * _tiles(*size)


def _tiles(width: int, height: int) -> int:
    scale = min(1.0, 2048 / max(width, height))
    width, height = width * scale, height * scale
    scale = min(1.0, 768 / min(width, height))
    width, height = width * scale, height * scale
    return -(-int(width) // 512) * -(-int(height) // 512)


def _data_url_size(url: str) -> tuple[int, int] | None:
    if not url.startswith("data:") or "," not in url:
        return None
    try:
        from PIL import Image

        with Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))) as image:
            return image.size
    except Exception:  # noqa: BLE001 - an unreadable image is priced like an unknown one
        return None
