"""`kill_process_tree` as lmms-eval's SGLangLauncher calls it."""

from __future__ import annotations

import os
import signal

from sglang.test.test_utils import _event


def kill_process_tree(pid, *args, **kwargs):
    _event("killed", pid=pid)
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
