"""Equivalence harness: lmms-eval's own model classes on the original video paths and on proxies.

Run as a subprocess with `processor_probe.processor_probe_env(folder)` in its environment:

    python tests/model_equivalence.py SPEC.json RESULTS.jsonl

SPEC: {"videos": [paths], "cache": proxy folder, "models": [{"name", "class", "kwargs"[, "videos"][, "modes"]}]}
(a model's "videos": the part of the grid it runs on, default all; "modes": default `path` then
`fast`, or `plain`: the hook returns the video path itself, for comparing two lmms-eval trees).
Each model is lmms-eval's class itself (`lmms_eval.models.simple.qwen2_vl.Qwen2_VL`, ...) built
from a tiny offline checkpoint (tests/tiny_models.py); for every video its real
`generate_until` runs twice on one request (`LMMS_VR_VIDEO_INPUT=path`, then `=fast`), the task
hook being `utils.model_video.video_for_model` as in our tasks (chat models: lmms-eval's default
`doc_to_messages` around it). The probe saves what each processor call received and built;
each result line names the files of that run's calls, the videos qwen_vl_utils opened and the
exception the run raised, if any (the same error in both modes is an equivalence too).

`llava_onevision` needs the LLaVA package and a checkpoint (not available offline): its entry
(`"class": "llava_onevision"`) is lmms-eval's `Llava_OneVision` with `generate_until` replaced by
the decord branch of its own (its real `load_video`), saving the frame array its image
processor receives as the call's `pixel_values_videos`.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path

DESCRIBE = "Describe the video."


def model_class(dotted: str):
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


def llava_onevision(calls: Path, max_frames_num: int = 32, video_decode_backend: str = "decord"):
    """lmms-eval's Llava_OneVision, no checkpoint: its video branch up to the image processor."""
    import numpy as np
    from lmms_eval.api.model import lmms
    from lmms_eval.models.simple.llava_onevision import Llava_OneVision

    class LlavaFrames(Llava_OneVision):
        def __init__(self):  # noqa: D107 - the constructor's video settings only
            lmms.__init__(self)
            self.max_frames_num, self.video_decode_backend = max_frames_num, video_decode_backend
            self.saved = 0

        def generate_until(self, requests):
            for context, gen_kwargs, doc_to_visual, doc_id, task, split in [r.args for r in requests]:
                visual = doc_to_visual(self.task_dict[task][split][doc_id])
                frames = self.load_video(visual, self.max_frames_num)  # Llava_OneVision's own decord reader
                with open(calls / f"videos-{os.getpid()}.jsonl", "a", encoding="utf-8") as log:  # as the probe logs reads
                    log.write(json.dumps({"pid": os.getpid(), "video": visual[0]}) + "\n")
                self.saved += 1
                np.savez(calls / f"call-{os.getpid()}-llava-{self.saved:04d}.npz", pixel_values_videos=frames,
                         processor=np.array("Llava_OneVision.load_video"), model=np.array("lmms_eval.models.simple.llava_onevision.Llava_OneVision"),
                         video_metadata_json=np.array("null"))
            return ["" for _ in requests]

    return LlavaFrames()


def build(spec: dict, calls: Path):
    if spec["class"] == "llava_onevision":
        return llava_onevision(calls, **spec.get("kwargs", {}))
    return model_class(spec["class"])(**spec["kwargs"])


def main(spec_path: str, results_path: str) -> None:
    from lmms_eval.api.instance import Instance
    from lmms_eval.api.task import ConfigurableMessagesTask
    from lmms_video_reasoning.utils.lmms import model_video as mv, proxy_clips as clips

    spec = json.loads(Path(spec_path).read_text())
    lmms_eval_file = importlib.import_module("lmms_eval").__file__  # which lmms-eval ran (a patched tree on PYTHONPATH)
    calls = Path(os.environ["LMMS_VR_TEST_PROCESSOR_PROBE"])
    os.environ[clips.CACHE_DIR_ENV] = spec["cache"]
    videos = spec["videos"]

    def doc_to_visual(doc):  # our tasks' hook for a video; "plain": the path itself, as upstream tasks give it
        return [doc["video"]] if os.environ[mv.INPUT_ENV] == "plain" else [mv.video_for_model(doc["video"])]

    def doc_to_messages(doc):  # lmms-eval's default for chat models: the user turn around doc_to_visual
        return ConfigurableMessagesTask._build_user_turn(doc_to_visual(doc), DESCRIBE)

    with open(results_path, "a", encoding="utf-8") as results:
        for model_spec in spec["models"]:
            model = build(model_spec, calls)
            model.task_dict = {"grid": {"test": [{"video": v} for v in videos]}}
            chat = not getattr(model, "is_simple", True)
            for doc_id, video in enumerate(videos):
                if video not in model_spec.get("videos", videos):
                    continue  # a setting run on part of the grid
                for mode in model_spec.get("modes", ("path", "fast")):
                    os.environ[mv.INPUT_ENV] = mode
                    gen_kwargs = {"max_new_tokens": 1, "temperature": 0}
                    args = (("ctx", doc_to_messages, gen_kwargs, doc_id, "grid", "test") if chat
                            else (DESCRIBE, gen_kwargs, doc_to_visual, doc_id, "grid", "test"))
                    request = Instance("generate_until", args, idx=0, metadata={"task": "grid", "doc_id": doc_id, "repeats": 1})
                    before = set(calls.glob("call-*.npz"))
                    reads_before = _reads(calls)
                    error = None
                    try:
                        model.generate_until([request])
                    except Exception as exc:  # noqa: BLE001 - the model's own error is part of what is compared
                        error = f"{type(exc).__name__}: {exc}"
                    record = {"model": model_spec["name"], "video": video, "mode": mode, "error": error, "lmms_eval": lmms_eval_file,
                              "calls": sorted(p.name for p in set(calls.glob("call-*.npz")) - before),
                              "reads": _reads(calls)[len(reads_before):]}
                    results.write(json.dumps(record) + "\n")
                    results.flush()


def _reads(calls: Path) -> list[str]:
    from processor_probe import video_reads

    return video_reads(calls.parent)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main(*sys.argv[1:3])
