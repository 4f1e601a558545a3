"""A witness of the tensors lmms-eval's Qwen2-VL model builds, for end-to-end comparisons.

Installed as `sitecustomize` (PYTHONPATH) in an lmms-eval subprocess, it wraps
`Qwen2VLProcessor.__call__` and saves each call's video tensors (`pixel_values_videos`,
`video_grid_thw`) and `input_ids` to `<folder>/call-<pid>-<n>.npz`. It changes nothing the
model receives; it only records it.
"""

from __future__ import annotations

import os
from pathlib import Path

PROBE_ENV = "LMMS_VR_TEST_PROCESSOR_PROBE"

_SITECUSTOMIZE = '''
import os

if os.environ.get("%(env)s"):
    import itertools

    import numpy as np
    from transformers.models.qwen2_vl import processing_qwen2_vl as _module

    _call = _module.Qwen2VLProcessor.__call__
    _count = itertools.count()

    def __call__(self, *args, **kwargs):
        out = _call(self, *args, **kwargs)
        arrays = {key: out[key].numpy() for key in ("pixel_values_videos", "video_grid_thw", "input_ids") if key in out}
        name = "call-%%d-%%04d.npz" %% (os.getpid(), next(_count))
        np.savez(os.path.join(os.environ["%(env)s"], name), **arrays)
        return out

    _module.Qwen2VLProcessor.__call__ = __call__
''' % {"env": PROBE_ENV}


def processor_probe_env(folder: Path) -> dict[str, str]:
    """Environment for a subprocess whose Qwen2-VL processor outputs are saved under `folder/calls`."""
    folder = Path(folder)
    (folder / "calls").mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(_SITECUSTOMIZE, encoding="utf-8")
    python_path = os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))
    return {"PYTHONPATH": python_path, PROBE_ENV: str(folder / "calls")}


def processor_calls(folder: Path) -> list[dict]:
    """The saved processor outputs, in call order: [{"pixel_values_videos", "video_grid_thw", "input_ids"}]."""
    import numpy as np

    files = sorted((Path(folder) / "calls").glob("call-*.npz"))
    return [dict(np.load(path)) for path in files]
