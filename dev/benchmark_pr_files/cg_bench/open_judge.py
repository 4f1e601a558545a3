"""CG-Bench's open-ended tasks (`cgbench_open`, `cgbench_full_open`): the official two-step judge, run by lmms-eval's
own judge layer (`lmms_eval.llm_judge`: `API_TYPE`, `MODEL_VERSION`) in `process_results`.

The documents and model inputs are the protocol tasks' (`protocol.py`, `protocol_subtitles.py`: step 2 shows the subtitles
too); the judge is `judging.py`.
"""

from lmms_eval.tasks.cgbench.protocol import answer_record, logged
from lmms_eval.tasks.cgbench.protocol_subtitles import MEDIA
from lmms_video_reasoning.cg_bench import judging, task
from lmms_video_reasoning.dev.llm_judge_ask import configured_judge


def cgbench_open_process_results(doc, results):
    """The answer's record and its outcome, judged (a judgment that fails after its re-asks: `judge_failed`)."""
    record = answer_record(doc, results)
    [outcome] = judging.judge_pending(task.read_outcomes([record]), [record], configured_judge(judging.JUDGE_MODEL), MEDIA)
    return logged(doc, record, outcome)
