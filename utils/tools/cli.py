"""`lmms-vr`: the suite's command line (`lmms-vr COMMAND --help` gives each command's options)."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys


def _tasks_path(args) -> int:
    from lmms_video_reasoning.utils.lmms.plugin import include_path

    root, others = include_path()
    print(root)
    for folder in others:  # lmms-eval's CLI takes one --include_path
        print(f"lmms-vr tasks-path: the task folder {folder} is not under it; the plugin (automatic after "
              f"`pip install`) adds it, or pass it as --include_path in a run of its tasks alone", file=sys.stderr)
    return 0


def _sample(args) -> int:
    from lmms_video_reasoning.utils.tools.sample import env_for, write_sample

    roots = write_sample(args.out)
    print(f"sample benchmark written to {args.out}")
    for name, value in env_for(args.out, tuple(roots)).items():
        print(f"export {name}={value}")
    print(f"replay predictions: {args.out}/predictions.jsonl")
    return 0


def _delegate(module: str, judging: bool = False):
    """A subcommand of its own module, imported when used; `judging`: one that may ask a judge (log lines shown)."""

    def run(args) -> int:
        if judging:
            logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
            logging.getLogger("lmms_video_reasoning").setLevel(logging.INFO)
            from lmms_video_reasoning.utils.lmms import launcher

            launcher.register_judge_settings()  # no LMMS_VR_JUDGE_* set: lmms-eval's API_TYPE=local judge
        return importlib.import_module(f"lmms_video_reasoning.utils.{module}").main(args)

    return run


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lmms-vr", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    sub.add_parser("tasks-path", help="print the folder of the task YAMLs").set_defaults(run=_tasks_path)

    sample = sub.add_parser("sample", help="write the generated sample benchmark")
    sample.add_argument("--out", required=True, help="output folder")
    sample.set_defaults(run=_sample)

    demo = sub.add_parser("demo", help="run the sample benchmark through lmms-eval with replay predictions")
    demo.add_argument("--out", help="sample folder (default: under the cache)")
    demo.add_argument("--output_path", help="lmms-eval output folder (default: <sample>/demo_results)")
    demo.add_argument("--tasks", help="comma-separated tasks (default: each benchmark's demo tasks)")
    demo.add_argument("--real-judge", action="store_true", help="use the judge configured in the environment")
    demo.set_defaults(run=_delegate("tools.demo"))

    prepare = sub.add_parser("prepare", help="download and verify a benchmark's data")
    from lmms_video_reasoning.utils.core import registry

    prepare.add_argument("benchmark", help=f"the benchmark, by its name (its folder in this suite): {registry.listing(registry.usable())}")
    prepare.add_argument("--root", required=True, help="local root (then export the root variable it prints)")
    prepare.add_argument("--split", default="mini", choices=["mini", "full"],
                         help="for a benchmark with splits: the split whose media are verified (all archives are fetched)")
    prepare.add_argument("--verify-only", action="store_true", help="only check the root (no download, no extraction)")
    prepare.add_argument("--subset", action="store_true",
                         help="the root holds part of the release on purpose: its question and video counts are printed, not "
                              "checked against the release's (a generated sample root says so itself)")
    prepare.add_argument("--skip-download", action="store_true", help="extract and check archives already under the root")
    prepare.add_argument("--delete-archives", action="store_true", help="delete each archive once its extraction is verified")
    prepare.add_argument("--keep-free", default="1G", help="disk space that must stay free (e.g. 500M, 20G; default 1G)")
    prepare.add_argument("--max-ratio", type=float, default=100.0,
                         help="refuse an archive declaring more than this times its size (zip bombs; default 100)")
    prepare.set_defaults(run=_delegate("data.prepare"))

    score = sub.add_parser("score", help="score lmms-eval samples files or replay predictions",
                           epilog="exit status: 0 scored; 2 bad input (named); 3 a judge outage (judgments not made: run "
                                  "again); 4 judge cache errors; 5 a task of a run in the folder is missing (named)")
    score.add_argument("path", help="an lmms-eval --output_path folder, a samples .jsonl, or a replay predictions .jsonl")
    score.add_argument("--task", help="optional: score only this task. Needed only when PATH does not say it: a predictions "
                                      "file whose lines have no `task` field, or a samples file not named *_samples_<task>.jsonl")
    score.add_argument("--out", help="write a results JSON shaped like lmms-eval's (with --estimate: the estimate as JSON)")
    judging = score.add_mutually_exclusive_group()
    judging.add_argument("--estimate", action="store_true",
                         help="print the judging bill (requests not cached, tokens, price synchronous and batched); nothing is sent")
    judging.add_argument("--batch-export", metavar="REQUESTS.jsonl",
                         help="write every judge request that can be made now as Batch API / `vllm run-batch` input lines")
    judging.add_argument("--batch-import", metavar="RESULTS.jsonl",
                         help="fill the judge cache from batch results (validated like synchronous replies)")
    judging.add_argument("--batch", action="store_true",
                         help="judge through the OpenAI Batch API (half price; resumable), then score from the cache")
    judging.add_argument("--judge-online", action="store_true",
                         help="after --batch-export/--batch-import: send the requests the batch flow failed or has not "
                              "answered to the configured judge (by default they are not sent and count as failed)")
    score.set_defaults(run=_delegate("results.score", judging=True))

    report = sub.add_parser("report", help="the papers' tables, with CIs and plots")
    report.add_argument("results", nargs="+", help="results JSON files or folders (lmms-eval or `lmms-vr score`)")
    report.add_argument("--out", default="lmms_vr_report", help="output folder for report.md, report.html and plots")
    report.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    report.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples (0: no confidence intervals)")
    report.add_argument("--agreement", action="append", metavar="FILE",
                        help="a judge agreement file (`lmms-vr judge-agreement --out FILE`) to show as a section; repeatable")
    report.add_argument("--pairs", choices=("baseline", "all"), default="baseline",
                        help="paired comparisons: each run against the first one given (default) or every pair")
    report.set_defaults(run=_delegate("results.report", judging=True))

    agreement = sub.add_parser("judge-agreement", help="how far a candidate judge is from the reference judge, with CIs")
    agreement.add_argument("runs", nargs="+", help="what `lmms-vr score` reads (output folders, samples or predictions files), "
                                                   "optionally LABEL=PATH; several runs give the ranking agreement")
    agreement.add_argument("--candidate", action="append", required=True, metavar="[BENCH=]MODEL",
                           help="the candidate judge model, as its runs named it (BENCH=MODEL for one benchmark; repeatable)")
    agreement.add_argument("--reference", action="append", metavar="[BENCH=]MODEL",
                           help="the reference judge model (default: each benchmark's official judge)")
    agreement.add_argument("--cache", help="the judge cache holding both judges' verdicts (default: LMMS_VR_JUDGE_CACHE)")
    agreement.add_argument("--reference-cache", help="the reference judge's cache, when it is another file")
    agreement.add_argument("--candidate-cache", help="the candidate judge's cache, when it is another file")
    agreement.add_argument("--task", help="only this task")
    agreement.add_argument("--calibrate", type=int, metavar="N",
                           help="judge a stratified subset of N samples with the reference judge first (costs requests; bounded)")
    agreement.add_argument("--max-requests", type=int, help="calibration: at most this many reference requests (default: twice the expected)")
    agreement.add_argument("--max-cost", type=float, help="calibration: at most this many USD (default: twice the estimate, when the price is known)")
    agreement.add_argument("--reference-base-url", help="calibration: the reference judge's OpenAI-compatible endpoint (default: its provider's)")
    agreement.add_argument("--reference-key-env", help="calibration: the variable holding the key for --reference-base-url")
    agreement.add_argument("--seed", type=int, default=0, help="bootstrap and subset seed")
    agreement.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples")
    agreement.add_argument("--out", default="judge_agreement.json", help="where to write the agreement (JSON)")
    agreement.set_defaults(run=_delegate("results.judge_agreement", judging=True))

    doctor = sub.add_parser("doctor", help="which integrations with lmms-eval are active here, and the fix for each that is not")
    doctor.add_argument("--no-network", action="store_true", help="do not contact the judge endpoints")
    doctor.add_argument("--json", action="store_true", help="the findings as JSON")
    doctor.set_defaults(run=_delegate("tools.doctor"))
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except ValueError as exc:  # our DataError / MediaError / PredictionsError carry the fix
        print(f"lmms-vr {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
