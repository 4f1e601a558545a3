"""Tiny, randomly initialised Qwen-VL checkpoints built offline, for end-to-end runs on CPU.

lmms-eval's Qwen models load a checkpoint folder with `<Model>ForConditionalGeneration.from_pretrained`,
`AutoProcessor.from_pretrained` and `AutoTokenizer.from_pretrained`. Everything those need is
written here from a config: a few-layer model (about 1 MB), a byte-level BPE tokenizer with no
merges (any text encodes, one token per byte) plus the Qwen special tokens, the real image and
video processors of each family, and a chat template that places the vision tokens the way the
processor expects. Nothing is downloaded.

- `build_qwen2_vl`: Qwen2-VL (lmms-eval `qwen2_vl`).
- `build_qwen2_5_vl`: Qwen2.5-VL (`qwen2_5_vl`, `qwen2_5_vl_chat`); its processor adds
  `second_per_grid_ts` from the video metadata's sampled fps.
- `build_qwen3_vl`: Qwen3-VL (`qwen3_vl`, `qwen3_vl_chat`); its processor writes a
  `<t seconds>` timestamp before each temporal patch from the video metadata (fps and
  frame indices), so its `input_ids` witness the frame timing.

The model's answers are random bytes; `exponential_decay_length_penalty` in its
generation config makes every answer end after a few dozen tokens (lmms-eval passes
`max_new_tokens` of 1024-4096, which would make a CPU run take minutes), deterministically.
"""

from __future__ import annotations

import json
from pathlib import Path

SPECIAL_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
)

DEFAULT_SYSTEM = "You are a helpful assistant."


def chat_template(default_system: str | None = DEFAULT_SYSTEM) -> str:
    """The Qwen-VL chat layout (ChatML with vision placeholders), written for these test models.

    Qwen2-VL and Qwen2.5-VL templates add `default_system` when the conversation has no system
    turn; Qwen3-VL's adds none (`default_system=None`). Content may be a string or a list of
    typed parts in any turn (lmms-eval's chat models send the system prompt as a part list).
    """
    system = ""
    if default_system is not None:
        system = ("{% if loop.first and message['role'] != 'system' %}"
                  "<|im_start|>system\n" + default_system + "<|im_end|>\n{% endif %}")
    return (
        "{% for message in messages %}" + system +
        "<|im_start|>{{ message['role'] }}\n"
        "{% if message['content'] is string %}{{ message['content'] }}"
        "{% else %}{% for part in message['content'] %}"
        "{% if part['type'] == 'image' or 'image' in part or 'image_url' in part %}<|vision_start|><|image_pad|><|vision_end|>"
        "{% elif part['type'] == 'video' or 'video' in part %}<|vision_start|><|video_pad|><|vision_end|>"
        "{% elif 'text' in part %}{{ part['text'] }}{% endif %}"
        "{% endfor %}{% endif %}<|im_end|>\n"
        "{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )


CHAT_TEMPLATE = chat_template()  # Qwen2-VL / Qwen2.5-VL

ANSWER_TOKENS = 24  # generated tokens before the end-of-sequence boost starts


def build_tokenizer():
    """Byte-level BPE without merges + the Qwen-VL special tokens, as a fast tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {symbol: index for index, symbol in enumerate(alphabet)}
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens(list(SPECIAL_TOKENS))
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        extra_special_tokens={"image_token": "<|image_pad|>", "video_token": "<|video_pad|>"},
        model_max_length=32768,
    )


def special_token_ids(tokenizer) -> dict[str, int]:
    """The special-token ids every Qwen-VL config names (vision placeholders and markers)."""
    token_id = tokenizer.convert_tokens_to_ids
    return {
        "image_token_id": token_id("<|image_pad|>"),
        "video_token_id": token_id("<|video_pad|>"),
        "vision_start_token_id": token_id("<|vision_start|>"),
        "vision_end_token_id": token_id("<|vision_end|>"),
    }


def text_config(tokenizer, **extra) -> dict:
    """A two-layer text decoder: hidden 32, 2 heads of 16 (multimodal RoPE over 8 frequencies)."""
    token_id = tokenizer.convert_tokens_to_ids
    return {
        "vocab_size": len(tokenizer),
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "max_position_embeddings": 32768,
        # Multimodal RoPE splits head_dim / 2 frequencies over (time, height, width).
        "rope_parameters": {"rope_type": "default", "rope_theta": 1e6, "mrope_section": [2, 3, 3]},
        "bos_token_id": token_id("<|endoftext|>"),
        "eos_token_id": token_id("<|im_end|>"),
        "pad_token_id": token_id("<|endoftext|>"),
        **extra,
    }


def generation_config(tokenizer):
    """Greedy-compatible generation settings that end every random answer quickly."""
    from transformers import GenerationConfig

    token_id = tokenizer.convert_tokens_to_ids
    return GenerationConfig(
        eos_token_id=token_id("<|im_end|>"),
        pad_token_id=token_id("<|endoftext|>"),
        # After ANSWER_TOKENS generated tokens the EOS score grows 100x per step, so each
        # random answer ends within a few more tokens whatever max_new_tokens asks.
        exponential_decay_length_penalty=(ANSWER_TOKENS, 100.0),
    )


def _build(out: Path, seed: int, *, model_class, config_class, processor_class, image_processor, video_processor,
           vision_config: dict, text_extra: dict | None = None, template: str = CHAT_TEMPLATE) -> Path:
    """Write a tiny random checkpoint of one Qwen-VL family into `out`: `model_class` initialised
    from `seed`, the shared tokenizer and generation config, the family's processors."""
    import torch

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer()
    config = config_class(text_config=text_config(tokenizer, **(text_extra or {})), vision_config=vision_config,
                          **special_token_ids(tokenizer))
    torch.manual_seed(seed)
    model = model_class(config).eval()
    model.generation_config = generation_config(tokenizer)
    model.save_pretrained(out)
    processor = processor_class(image_processor=image_processor, tokenizer=tokenizer, video_processor=video_processor,
                                chat_template=template)
    processor.save_pretrained(out)
    (out / "TINY_MODEL.json").write_text(json.dumps({"seed": seed, "built_by": __name__, "model": config.model_type}) + "\n")
    return out


def build_qwen2_vl(out: Path, seed: int = 0) -> Path:
    """Write a tiny random Qwen2-VL checkpoint (model, tokenizer, processor) into `out`."""
    import transformers as tf

    return _build(out, seed, model_class=tf.Qwen2VLForConditionalGeneration, config_class=tf.Qwen2VLConfig,
                  processor_class=tf.Qwen2VLProcessor, image_processor=tf.Qwen2VLImageProcessor(),
                  video_processor=tf.Qwen2VLVideoProcessor(),
                  vision_config={"depth": 1, "embed_dim": 32, "hidden_size": 32, "num_heads": 2, "mlp_ratio": 2})


def build_qwen2_5_vl(out: Path, seed: int = 0) -> Path:
    """Write a tiny random Qwen2.5-VL checkpoint (model, tokenizer, processor) into `out`."""
    import transformers as tf

    return _build(out, seed, model_class=tf.Qwen2_5_VLForConditionalGeneration, config_class=tf.Qwen2_5_VLConfig,
                  processor_class=tf.Qwen2_5_VLProcessor, image_processor=tf.Qwen2VLImageProcessor(),
                  video_processor=tf.Qwen2VLVideoProcessor(),
                  # One vision block, with full attention (windowed blocks would add nothing here).
                  vision_config={"depth": 1, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2,
                                 "out_hidden_size": 32, "fullatt_block_indexes": [0]})


def build_qwen3_vl(out: Path, seed: int = 0) -> Path:
    """Write a tiny random Qwen3-VL checkpoint (model, tokenizer, processor) into `out`.

    Qwen3-VL's vision patches are 16 px (32 px per merged token); its processor needs the video
    metadata to write the frame timestamps into the prompt; its template adds no system turn.
    """
    import transformers as tf

    rope = {"rope_type": "default", "rope_theta": 5e6, "mrope_section": [2, 3, 3], "mrope_interleaved": True}
    return _build(out, seed, model_class=tf.Qwen3VLForConditionalGeneration, config_class=tf.Qwen3VLConfig,
                  processor_class=tf.Qwen3VLProcessor, image_processor=tf.Qwen2VLImageProcessor(patch_size=16),
                  video_processor=tf.Qwen3VLVideoProcessor(),
                  vision_config={"depth": 1, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2,
                                 "out_hidden_size": 32, "num_position_embeddings": 256, "deepstack_visual_indexes": [0]},
                  text_extra={"head_dim": 16, "rope_parameters": rope}, template=chat_template(None))


BUILDERS = {"qwen2_vl": build_qwen2_vl, "qwen2_5_vl": build_qwen2_5_vl, "qwen3_vl": build_qwen3_vl}

if __name__ == "__main__":  # python tests/tiny_models.py DIR [qwen2_vl|qwen2_5_vl|qwen3_vl]
    import sys

    print(BUILDERS[sys.argv[2] if len(sys.argv) > 2 else "qwen2_vl"](Path(sys.argv[1])))


# ---------------------------------------------------------------------- decode probe

DECODE_LOG_ENV = "LMMS_VR_E2E_DECODE_LOG"

# Installed as `sitecustomize` (PYTHONPATH) in the lmms-eval subprocess: it wraps
# decord.VideoReader, the decoder lmms-eval's qwen2_vl path uses (the model opens the file,
# then qwen_vl_utils.fetch_video reads frames at 2 fps with get_batch), and appends one JSON
# line per get_batch call. It changes no behaviour; it only witnesses the decoding.
_PROBE = '''
import os

if os.environ.get("%(env)s"):
    import json

    import decord

    _VideoReader = decord.VideoReader

    class VideoReader(_VideoReader):
        def __init__(self, uri, *args, **kwargs):
            super().__init__(uri, *args, **kwargs)
            self._probe_uri = str(uri)

        def get_batch(self, indices):
            batch = super().get_batch(indices)
            line = {"pid": os.getpid(), "path": self._probe_uri, "shape": list(batch.shape), "frames": int(batch.shape[0])}
            with open(os.environ["%(env)s"], "a", encoding="utf-8") as handle:
                handle.write(json.dumps(line) + "\\n")
            return batch

    decord.VideoReader = VideoReader
''' % {"env": DECODE_LOG_ENV}


def decode_probe_env(folder: Path) -> dict[str, str]:
    """Environment for a subprocess whose decord frame reads are logged to `folder/decoded.jsonl`."""
    import os

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(_PROBE, encoding="utf-8")
    python_path = os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))
    return {"PYTHONPATH": python_path, DECODE_LOG_ENV: str(folder / "decoded.jsonl")}


def decoded_batches(folder: Path) -> list[dict]:
    """The frame batches the probed subprocess decoded: [{"path", "frames", "shape", "pid"}]."""
    log = Path(folder) / "decoded.jsonl"
    if not log.is_file():
        return []
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]
