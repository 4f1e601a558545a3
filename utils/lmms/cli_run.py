"""`python -m lmms_eval` in a child process, as a user runs it, and why it failed.

lmms-eval's CLI exits 0 after an exception unless `--verbosity DEBUG`: a run worked when it exited 0
and wrote a results file holding every task it was given. Otherwise its cause is the last line of
the traceback on its stderr. Used by `lmms-vr demo`, `lmms-vr doctor` and tests/lmms_cli.py.
"""

from __future__ import annotations

import codecs
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

TAIL_CHARS = 256_000  # of stderr kept for the cause (a traceback ends the output)


@dataclass(frozen=True)
class Evaluation:
    """One `python -m lmms_eval` run: `tasks` comma-separated, `extra` any further arguments."""

    tasks: str
    output_path: Path
    model: str = "vr_replay"
    model_args: str = ""
    extra: tuple[str, ...] = ()

    def command(self) -> list[str]:
        model_args = ["--model_args", self.model_args] if self.model_args else []
        return [sys.executable, "-m", "lmms_eval", "--tasks", self.tasks, "--model", self.model, *model_args,
                "--output_path", str(self.output_path), *self.extra]

    def run(self, env: Mapping[str, str], *, echo: bool = True, timeout: float | None = None) -> tuple[Path | None, str]:
        """(the newest results file the run wrote, None: none; why it failed, "" when it worked)."""
        started = time.time()
        proc = subprocess.Popen(self.command(), env=dict(env), stdout=None if echo else subprocess.DEVNULL, stderr=subprocess.PIPE)
        timer = threading.Timer(timeout, proc.kill) if timeout else None
        if timer:
            timer.start()
        decoder, tail = codecs.getincrementaldecoder("utf-8")(errors="replace"), ""
        while chunk := os.read(proc.stderr.fileno(), 65536):
            text = decoder.decode(chunk)
            if echo:
                sys.stderr.write(text)
                sys.stderr.flush()
            tail = (tail + text)[-TAIL_CHARS:]
        proc.stderr.close()
        returncode = proc.wait()
        if timer:
            timer.cancel()
        results_file = newest_results(self.output_path, since=started)
        results = json.loads(results_file.read_text())["results"] if results_file else {}
        missing = [task for task in self.tasks.split(",") if task not in results]
        if returncode == 0 and not missing:
            return results_file, ""
        if timeout and returncode < 0 and time.time() - started >= timeout:
            return results_file, f"lmms-eval did not finish within {timeout:g} s"
        return results_file, failure_cause(tail) or (f"lmms-eval exited with status {returncode}" if returncode
                                                     else f"lmms-eval wrote no results for {', '.join(missing)}")


def newest_results(output_path: Path, since: float = 0.0) -> Path | None:
    """lmms-eval's newest `*_results.json` under `output_path` written at or after `since` (None: none)."""
    found = [p for p in Path(output_path).rglob("*_results.json") if p.stat().st_mtime >= since]
    return max(found, key=lambda p: p.stat().st_mtime) if found else None


def failure_cause(output: str) -> str:
    """The last line of the last traceback in `output` (`XxxError: message`); "" when there is none."""
    lines = output.replace("\r", "\n").splitlines()
    starts = [n for n, line in enumerate(lines) if line.startswith("Traceback (most recent call last):")]
    if not starts:
        return ""
    # the frames are indented; the first line after them that is not is the exception
    return next((line.strip() for line in lines[starts[-1] + 1:] if line.strip() and not line[0].isspace()), "")
