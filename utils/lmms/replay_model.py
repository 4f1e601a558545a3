"""`vr_replay`: an lmms-eval model that answers from a predictions file.

    --model vr_replay --model_args predictions=preds.jsonl[,missing=empty]

Each line is `{"task": "<task name>", "id": <native id>, "response": "..."}` (`task` optional;
`response` may be a list, one reply per round of a multi-round task). The id is the document's
`sample_id` (a task asking one question in several modes appends `:<mode>`). No video is decoded:
it scores predictions made by another inference stack, and drives the end-to-end tests.
"""

from __future__ import annotations

import logging
import os
import re
from collections import Counter
from pathlib import Path

from lmms_eval.api.model import lmms

from lmms_video_reasoning.utils.core.roots import DataError, read_jsonl

logger = logging.getLogger("lmms_video_reasoning")


class PredictionsError(DataError):
    """A predictions file is missing, malformed, or lacks an answer for a request."""


Response = str | tuple[str, ...]  # one reply, or one per round


def load_predictions(path: str | os.PathLike) -> dict[tuple[str | None, str], Response]:
    """A replay JSONL as {(task or None, str(id)): response} (a list of replies as a tuple);
    PredictionsError naming the record for anything malformed or an id given twice differently."""
    path = Path(path)
    if not path.is_file():
        raise PredictionsError(f"predictions file not found: {path} (give --model_args predictions=FILE.jsonl)")
    table: dict[tuple[str | None, str], Response] = {}
    first_seen: dict[tuple[str | None, str], int] = {}
    for number, row in enumerate(read_jsonl(path, PredictionsError), 1):
        where = f"{path}: record {number}"
        if "id" not in row or "response" not in row:
            raise PredictionsError(f'{where}: expected {{"task": ..., "id": ..., "response": ...}}')
        response = row["response"]
        replies = response if isinstance(response, list) and response else [response]
        if not all(isinstance(reply, str) for reply in replies):
            raise PredictionsError(f"{where}: response must be a string (or a list of strings, one per round), got {response!r:.80}")
        clean = tuple(map(encodable, replies)) if isinstance(response, list) else encodable(response)
        if clean != (tuple(response) if isinstance(response, list) else response):
            logger.warning("%s: response has unpaired UTF-16 surrogates (invalid in UTF-8); replaced by U+FFFD", where)
        key = (row.get("task"), str(row["id"]))
        if key in table and table[key] != clean:
            raise PredictionsError(f"{where}: id {key[1]!r}{f' of task {key[0]!r}' if key[0] else ''} was already given in "
                                   f"record {first_seen[key]} with a different response; keep one of them")
        table[key] = clean
        first_seen.setdefault(key, number)
    return table


def unmatched(table: dict[tuple[str | None, str], Response], task: str, sample_ids: set[str]) -> list[str]:
    """Ids of predictions naming ``task`` that match none of its documents."""
    return sorted(sample_id for (name, sample_id) in table if name == task and sample_id not in sample_ids)


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def encodable(text: str) -> str:
    """`text` with unpaired surrogates (from JSON escapes such as "\\udcff") replaced by U+FFFD:
    lmms-eval's --log_samples writer stops at the first one, losing every later sample."""
    return _LONE_SURROGATE.sub("\ufffd", text)


def lookup(table: dict[tuple[str | None, str], Response], task: str, sample_id: str) -> Response | None:
    """The response for (task, id): a task-specific line wins over a task-less one."""
    return table[(task, sample_id)] if (task, sample_id) in table else table.get((None, sample_id))


class ReplayModel(lmms):
    is_simple = True

    def __init__(self, predictions: str = "", missing: str = "error", **kwargs) -> None:
        super().__init__()
        if missing not in ("error", "empty"):
            raise PredictionsError(f"vr_replay: missing must be 'error' or 'empty', got {missing!r}")
        self.table = load_predictions(predictions)
        self.missing = missing
        self.predictions_path = predictions
        self._asked: Counter = Counter()  # requests per (task, split, doc): the round a list of replies answers
        # Under torchrun / accelerate every rank answers its own shard of the requests.
        self._world_size = int(os.environ.get("WORLD_SIZE", 1))

    def _respond(self, task: str, split: str, doc_id: int) -> str:
        doc = self.task_dict[task][split][doc_id]
        if "sample_id" not in doc:
            raise PredictionsError(f"task {task!r} documents have no 'sample_id': vr_replay only serves this suite's tasks")
        sample_id = str(doc["sample_id"])
        response = lookup(self.table, task, sample_id)
        if isinstance(response, tuple):
            round_index = self._asked[(task, split, doc_id)]
            self._asked[(task, split, doc_id)] += 1
            if round_index >= len(response):
                raise PredictionsError(f"vr_replay: task {task!r} id {sample_id!r} has {len(response)} replies in {self.predictions_path} "
                                       f"and round {round_index + 1} was asked (give one reply per round)")
            return response[round_index]
        if response is not None:
            return response
        if self.missing == "empty":
            logger.warning("vr_replay: no prediction for task %s id %s in %s; answering ''", task, sample_id, self.predictions_path)
            return ""
        raise PredictionsError(f"vr_replay: no prediction for task {task!r} id {sample_id!r} in {self.predictions_path} "
                               "(add it, or pass missing=empty to answer '' with a warning)")

    def generate_until(self, requests) -> list[str]:
        # args = (context, gen_kwargs, doc_to_visual, doc_id, task, split)
        responses = [self._respond(req.args[4], req.args[5], req.args[3]) for req in requests]
        if self._world_size == 1:  # a rank sees only its shard: it cannot tell what matched nothing
            self._report_unmatched({(req.args[4], req.args[5]) for req in requests})
        return responses

    def _report_unmatched(self, tasks: set[tuple[str, str]]) -> None:
        every_id: set[str] = set()
        found = []  # (task, ids of its predictions that match none of its documents)
        for task, split in sorted(tasks):
            ids = {str(doc["sample_id"]) for doc in self.task_dict[task][split] if "sample_id" in doc}
            every_id |= ids
            found.append((task, unmatched(self.table, task, ids)))
        found.append(("(no task given)", sorted(i for (name, i) in self.table if name is None and i not in every_id)))
        for task, ids in found:
            if ids:
                logger.warning("vr_replay: %d predictions for task %s in %s match no document (ids such as %s); they were "
                               "not scored", len(ids), task, self.predictions_path, ", ".join(map(repr, ids[:5])))

    generate_until_multi_round = generate_until

    def loglikelihood(self, requests):
        raise NotImplementedError("vr_replay only answers generation requests")
