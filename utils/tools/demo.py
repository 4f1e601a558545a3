"""`lmms-vr demo`: the sample benchmark through lmms-eval with the replay model, then `lmms-vr report`.

The judge is a local OpenAI-compatible server answering from the sample's known truth (the HTTP
path a real run takes); `--real-judge` uses the judge configured in the environment instead. The
report is `<output_path>/report/report.md` and `.html`.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

from lmms_video_reasoning.utils.core import registry
from lmms_video_reasoning.utils.core.roots import cache_home
from lmms_video_reasoning.utils.lmms.cli_run import Evaluation
from lmms_video_reasoning.utils.tools.sample import SAMPLE_VERSION, env_for, sample_benchmarks, write_sample


def sample_responder(request: dict) -> str:
    """Route a judge request to the benchmark whose sample oracle recognises its prompt."""
    for name in sample_benchmarks():
        reply = registry.get(name).sample().oracle_judge_reply(request)
        if reply is not None:
            return reply
    return "0"


def ensure_sample(out: Path | None = None) -> Path:
    """The sample benchmark in `out` (default: under the cache), written unless already there."""
    out = Path(out) if out else cache_home() / "sample"
    version_file = out / "VERSION"
    if not (version_file.is_file() and version_file.read_text().strip() == str(SAMPLE_VERSION)):
        write_sample(out)
    return out


def sample_settings(out: Path) -> dict[str, str]:
    """What a run on the sample in `out` adds to the environment: its roots, and offline."""
    return {**env_for(out), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


def main(args) -> int:
    from lmms_video_reasoning.judges import LocalJudgeServer

    out = ensure_sample(args.out)
    output_path = Path(args.output_path) if args.output_path else out / "demo_results"
    settings = sample_settings(out)  # what the demo adds to the environment
    # `lmms-vr report` on this run: the sample's roots let it rebuild judge inputs (e.g. frames a request holds)
    report_env = {**os.environ, **settings}
    server = None
    if not args.real_judge:
        server = LocalJudgeServer(responder=sample_responder, model="sample-oracle").start()
        settings.update({"LMMS_VR_JUDGE_BASE_URL": server.base_url, "LMMS_VR_JUDGE_MODEL": "sample-oracle",
                         "LMMS_VR_JUDGE_CACHE": str(out / "demo_judge_cache.sqlite")})
        print(f"local sample judge at {server.base_url} (it runs only while the demo does: a pasted command "
              "reuses its verdicts from the cache, and new judge requests fail)")
    env = {**os.environ, **settings}
    tasks = args.tasks or ",".join(task for b in registry.benchmarks() for task in b.demo_tasks)  # registry order
    evaluation = Evaluation(tasks, output_path, model_args=f"predictions={out / 'predictions.jsonl'}",
                            extra=("--log_samples", "--verbosity", "WARNING"))
    # the command as it can be pasted into a shell: the demo's settings, then the command
    # A pasted command outlives the demo's judge: its verdicts come from the cache, so the
    # preflight's judge check (which would find the endpoint gone) is switched off there.
    pasted = {**settings, "LMMS_VR_PREFLIGHT": "off"} if server is not None else settings
    print("$ " + " ".join(f"{name}={shlex.quote(value)}" for name, value in pasted.items()) + " "
          + " ".join(shlex.quote(part) for part in evaluation.command()))
    try:
        results_file, cause = evaluation.run(env)
    finally:
        if server is not None:
            server.stop()
    if cause:
        print(f"lmms-vr demo: lmms-eval failed: {cause}", file=sys.stderr)
        return 1
    print(f"results and samples under {output_path}")
    command = [sys.executable, "-m", "lmms_video_reasoning.utils.tools.cli", "report", str(results_file),
               "--out", str(output_path / "report")]
    print("the papers' tables beside this run, with 95% CIs:")
    if subprocess.run(command, env=report_env).returncode:  # `lmms-vr report` prints the report's paths itself
        print("lmms-vr demo: the report of the run failed (see above)", file=sys.stderr)
        return 1
    return 0
