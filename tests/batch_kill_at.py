"""`lmms-vr` that kills itself (SIGKILL, no cleanup, as an OOM kill would) right after one step of
the Batch API flow, for the tests of a rerun after a crash. The kill points live here, wrapped
around the package's functions in this process only; the package has no test hook.

    python tests/batch_kill_at.py STEP score PREDICTIONS --batch ...

STEP, each right after:
  recorded    the submission's requests are in the ledger (nothing sent yet)
  uploaded    its input file is uploaded and the ledger says so
  submitted   the batch is created and its id recorded
  polled      a poll of the batch answered
  downloaded  a finished batch's output and error files are read
  imported    the results are imported into the judge cache (the batches not yet closed)
"""

from __future__ import annotations

import functools
import os
import signal
import sys


def _kill_after(owner, name: str, when=lambda *args, **kwargs: True) -> None:
    original = getattr(owner, name)

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        result = original(*args, **kwargs)
        if when(*args, **kwargs):
            os.kill(os.getpid(), signal.SIGKILL)
        return result

    setattr(owner, name, wrapper)


def install(step: str) -> None:
    from lmms_video_reasoning.judges.batch_ledger import BatchLedger
    from lmms_video_reasoning.judges.batch_api import BatchApi
    from lmms_video_reasoning.utils.results import batch_judging

    if step == "recorded":
        _kill_after(BatchLedger, "add_submission")
    elif step in ("uploaded", "submitted"):
        _kill_after(BatchLedger, "update_submission", lambda self, submission, **values: values.get("state") == step)
    elif step == "polled":
        _kill_after(BatchApi, "_call", lambda self, what, *args, **kwargs: what == "poll the batch")
    elif step == "downloaded":
        _kill_after(BatchApi, "_download")
    elif step == "imported":
        _kill_after(batch_judging, "import_lines")
    else:
        raise SystemExit(f"batch_kill_at.py: unknown step {step!r}")


if __name__ == "__main__":
    install(sys.argv[1])
    from lmms_video_reasoning.utils.tools.cli import main

    sys.exit(main(sys.argv[2:]))
