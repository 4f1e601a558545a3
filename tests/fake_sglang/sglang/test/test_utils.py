"""`popen_launch_server` as lmms-eval's SGLangLauncher calls it, starting the suite's local judge server instead."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from urllib.parse import urlsplit


def _event(name: str, **fields) -> None:
    path = os.environ.get("FAKE_SGLANG_EVENTS")
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"event": name, "time": time.time(), **fields}) + "\n")


def popen_launch_server(model, base_url, timeout, api_key=None, other_args=(), **kwargs):
    port = urlsplit(base_url).port
    command = [sys.executable, "-m", "lmms_video_reasoning.judges.local_server", "--port", str(port), "--model", str(model),
               "--responder", os.environ.get("FAKE_SGLANG_RESPONDER", "lmms_video_reasoning.judges.local_server:echo_responder")]
    if api_key:
        command += ["--api-key", api_key]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    process.stdout.readline()  # the server prints its base URL once it listens
    deadline = time.time() + min(float(timeout), 60.0)
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(base_url.rstrip("/") + "/v1/models", timeout=2) as response:
                if response.status == 200:
                    break
        except OSError:
            time.sleep(0.1)
    _event("launched", pid=process.pid, model=str(model), args=list(map(str, other_args)))
    return process
