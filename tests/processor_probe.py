"""A witness of the tensors lmms-eval's Qwen-VL models build, for end-to-end comparisons.

Installed as `sitecustomize` (PYTHONPATH) in an lmms-eval subprocess, it wraps `__call__` of
`Qwen2VLProcessor`, `Qwen2_5_VLProcessor` and `Qwen3VLProcessor` and saves each call to
`<folder>/call-<pid>-<n>.npz`: the video tensors (`pixel_values_videos`, `video_grid_thw`),
`input_ids`, `second_per_grid_ts` when the processor returns it (Qwen2.5-VL), the processor's
class name, the calling lmms-eval model's class (`lmms_eval.models.chat.qwen3_vl.Qwen3_VL`), and the `video_metadata` passed in (lmms-eval's chat models hand over what
`qwen_vl_utils` read: fps, frames_indices, total_num_frames, video_backend), as JSON. It also
logs each video path `qwen_vl_utils.fetch_video` opens (`video_reads`). It changes nothing the
model receives; it only records it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

PROBE_ENV = "LMMS_VR_TEST_PROCESSOR_PROBE"
METADATA_FIELDS = ("fps", "frames_indices", "total_num_frames", "video_backend")

_SITECUSTOMIZE = '''
import os

if os.environ.get("%(env)s"):
    import importlib
    import itertools
    import json
    import sys

    import numpy as np

    _count = itertools.count()
    _ARRAYS = ("pixel_values_videos", "video_grid_thw", "input_ids", "second_per_grid_ts")
    _FIELDS = %(fields)r

    def _plain(value):
        if hasattr(value, "tolist"):
            return value.tolist()
        if isinstance(value, (list, tuple)):
            return [_plain(v) for v in value]
        return value

    def _metadata(items):
        if items is None:
            return None
        if not isinstance(items, (list, tuple)):
            items = [items]
        out = []
        for item in items:
            get = item.get if isinstance(item, dict) else (lambda key, item=item: getattr(item, key, None))
            out.append({key: _plain(get(key)) for key in _FIELDS})
        return out

    def _model_class():
        """The class of the lmms-eval model whose generate_until is calling the processor."""
        frame = sys._getframe(2)
        while frame is not None:
            if frame.f_code.co_name == "generate_until" and "self" in frame.f_locals:
                owner = type(frame.f_locals["self"])
                return owner.__module__ + "." + owner.__qualname__
            frame = frame.f_back
        return ""

    def _wrap(cls):
        call = cls.__call__

        def __call__(self, *args, **kwargs):
            out = call(self, *args, **kwargs)
            arrays = {key: np.asarray(_plain(out[key]) if not hasattr(out[key], "numpy") else out[key].numpy())
                      for key in _ARRAYS if key in out}
            arrays["processor"] = np.array(type(self).__name__)
            arrays["model"] = np.array(_model_class())
            arrays["video_metadata_json"] = np.array(json.dumps(_metadata(kwargs.get("video_metadata"))))
            name = "call-%%d-%%04d.npz" %% (os.getpid(), next(_count))
            np.savez(os.path.join(os.environ["%(env)s"], name), **arrays)
            return out

        cls.__call__ = __call__

    def _witness_reads(module):
        fetch = module.fetch_video

        def fetch_video(ele, *args, **kwargs):
            if isinstance(ele.get("video"), str):
                line = json.dumps({"pid": os.getpid(), "video": ele["video"]})
                with open(os.path.join(os.environ["%(env)s"], "videos-%%d.jsonl" %% os.getpid()), "a") as handle:
                    handle.write(line + "\\n")
            return fetch(ele, *args, **kwargs)

        module.fetch_video = fetch_video  # process_vision_info calls it by its module-global name

    for _module, _name in (("qwen2_vl.processing_qwen2_vl", "Qwen2VLProcessor"),
                           ("qwen2_5_vl.processing_qwen2_5_vl", "Qwen2_5_VLProcessor"),
                           ("qwen3_vl.processing_qwen3_vl", "Qwen3VLProcessor")):
        # Each class is patched on itself: none inherits another's __call__ (all use ProcessorMixin's).
        _wrap(getattr(importlib.import_module("transformers.models." + _module), _name))
    _witness_reads(importlib.import_module("qwen_vl_utils.vision_process"))
''' % {"env": PROBE_ENV, "fields": METADATA_FIELDS}


def processor_probe_env(folder: Path) -> dict[str, str]:
    """Environment for a subprocess whose Qwen-VL processor calls are saved under `folder/calls`."""
    folder = Path(folder)
    (folder / "calls").mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(_SITECUSTOMIZE, encoding="utf-8")
    python_path = os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))
    return {"PYTHONPATH": python_path, PROBE_ENV: str(folder / "calls")}


def processor_calls(folder: Path) -> list[dict]:
    """The saved processor calls, in call order.

    Each: numpy arrays `pixel_values_videos`, `video_grid_thw`, `input_ids` (and
    `second_per_grid_ts` when returned), `processor` (class name, str), `model` (the calling
    lmms-eval model's module.class, str; "" outside a generate_until) and `video_metadata`
    (one dict of METADATA_FIELDS per video passed with metadata, or None if none was passed).
    """
    import numpy as np

    calls = []
    for path in sorted((Path(folder) / "calls").glob("call-*.npz")):
        with np.load(path) as saved:
            call = {key: saved[key] for key in saved.files}
        call["processor"], call["model"] = str(call["processor"]), str(call["model"])
        call["video_metadata"] = json.loads(str(call.pop("video_metadata_json")))
        calls.append(call)
    return calls


def video_reads(folder: Path) -> list[str]:
    """The video paths qwen_vl_utils' fetch_video opened in the probed subprocess, in order."""
    lines = []
    for log in sorted((Path(folder) / "calls").glob("videos-*.jsonl")):
        lines += [json.loads(line)["video"] for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]
    return lines
