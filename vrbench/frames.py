"""VRBench frame plan: segment midpoints at 224x224, as the official inference ran every model
(OpenGVLab/VRBench, commit 47a22db, ``inference/utils/video_process.py``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from lmms_video_reasoning.utils.core.frame_plan import FramePlan, check_counts

# Official frame size (inference/utils/video_process.py: cv2.resize(frame, (224, 224))).
SIZE = (224, 224)


def indices(total: int, n: int = 16) -> list[int]:
    """Segment midpoints, every frame if ``n >= total`` (the official ``get_middle_frame_indices``:
    boundaries ``np.linspace(0, total, n + 1, dtype=int)``, index ``(start + end) // 2``)."""
    check_counts(total, n)
    if n >= total:
        return list(range(total))
    bounds = np.linspace(0, total, num=n + 1, dtype=int)
    return [int((bounds[i] + bounds[i + 1]) // 2) for i in range(n)]


def timestamps(indices: Sequence[int], fps: float) -> list[float]:
    """Frame times ``idx / fps``, unrounded (the official prompt shows none)."""
    return [i / fps for i in indices]


PLAN = FramePlan("vrbench", pick=indices, times=timestamps, size=SIZE)
