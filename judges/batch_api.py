"""Judging through the OpenAI Batch API (half the synchronous price), resumable after a kill.

Each step is recorded in the ledger (`api_batches`) before the next starts: the submission and its
requests in flight, the upload, the batch (its submission id in the metadata, so a run killed
before recording the batch id finds it), its end, its results imported (`JudgePass` ``import``).
A rerun re-attaches to what an earlier run submitted and never submits a request twice.
"""

from __future__ import annotations

import io
import json
import time
import uuid
from dataclasses import dataclass
from typing import Any, Sequence

from lmms_video_reasoning.judges.batch_pass import CHAT_URL, ResultRead, read_result_lines
from lmms_video_reasoning.judges.batch_ledger import ERRORED, EXPORTED, FAILED, IN_FLIGHT, BatchLedger
from lmms_video_reasoning.judges.config import DUMMY_API_KEY, OPENAI_DEFAULT_BASE_URL, JudgeConfig, JudgeConfigError
from lmms_video_reasoning.utils.core import settings

MAX_REQUESTS_PER_FILE = 50_000  # the Batch API's limits per input file
MAX_FILE_BYTES = 200 * 1024 * 1024
TERMINAL = ("completed", "failed", "expired", "cancelled")
COMPLETION_WINDOW = "24h"
METADATA_KEY = "lmms_vr_submission"
POLL_SECONDS = settings.declare("LMMS_VR_BATCH_POLL_SECONDS", "float", 30.0, "seconds between two polls of a "
                                "submitted batch (lmms-vr score --batch)", minimum=0.001)
MAX_REQUESTS = settings.declare("LMMS_VR_BATCH_MAX_REQUESTS", "int", MAX_REQUESTS_PER_FILE, "requests per Batch API input "
                                "file (the API's limit; lower it for a smaller enqueued-token quota)", minimum=1,
                                maximum=MAX_REQUESTS_PER_FILE)


def split_lines(lines: Sequence[dict], max_requests: int, max_bytes: int) -> list[dict[str, bytes]]:
    """Batch input lines in files within the API's limits (requests and bytes per file): {custom_id: line encoded}."""
    files: list[dict[str, bytes]] = []
    current: dict[str, bytes] = {}
    size = 0
    for line in lines:
        data = (json.dumps(line, ensure_ascii=False) + "\n").encode("utf-8")
        if len(data) > max_bytes:
            raise JudgeConfigError(f"one judge request ({line['custom_id'][:12]}...) is {len(data)} bytes, over the batch "
                                   f"file limit of {max_bytes} bytes")
        if current and (len(current) >= max_requests or size + len(data) > max_bytes):
            files.append(current)
            current, size = {}, 0
        current[line["custom_id"]] = data
        size += len(data)
    if current:
        files.append(current)
    return files


@dataclass
class Finished:
    """A submission that ended at the API, its output and error files read into the round's `ResultRead`."""

    submission: str
    batch_id: str
    status: str
    requests: int
    files: list[str]  # the names of its files, as its lines' places ("name:line") give them
    errors: list[str]  # the batch's own errors (a failed batch: why)


class BatchApi:
    """The Batch API of one judge configuration (its endpoint, key and model)."""

    def __init__(self, config: JudgeConfig, ledger: BatchLedger) -> None:
        from openai import OpenAI

        self.config, self.ledger = config, ledger
        self.client = OpenAI(api_key=config.api_key or DUMMY_API_KEY, base_url=config.base_url or OPENAI_DEFAULT_BASE_URL,
                             timeout=min(config.timeout, 600.0), max_retries=6)

    def submit(self, lines: Sequence[dict], meta: dict[str, tuple[str, str]]) -> list[str]:
        """Upload and submit ``lines`` in files within the API's limits; returns the submission ids."""
        submissions = []
        for chunk in split_lines(lines, MAX_REQUESTS.read(), MAX_FILE_BYTES):
            submission = uuid.uuid4().hex
            self.ledger.add_submission(submission, self.config.model, self.config.endpoint, list(chunk), meta)
            upload = self._call("upload the batch input file", self.client.files.create,
                                file=(f"lmms_vr_{submission}.jsonl", b"".join(chunk.values())), purpose="batch")
            self.ledger.update_submission(submission, input_file_id=upload.id, state="uploaded")
            self._create(submission, upload.id)
            submissions.append(submission)
        return submissions

    def _create(self, submission: str, file_id: str) -> None:
        batch = self._call("create the batch", self.client.batches.create, input_file_id=file_id,
                           endpoint=CHAT_URL, completion_window=COMPLETION_WINDOW,
                           metadata={METADATA_KEY: submission})
        self.ledger.update_submission(submission, batch_id=batch.id, state="submitted", status=batch.status)

    def reattach(self) -> dict[str, int]:
        """Bring every unfinished submission of an earlier (killed) run to `submitted`: dropped (never
        reached the API), found (created, id recovered) or created."""
        done = {"dropped": 0, "found": 0, "created": 0}
        for row in self.ledger.submissions(self.config.model, "uploading"):
            self.ledger.drop_submission(row["submission"])
            done["dropped"] += 1
        for row in self.ledger.submissions(self.config.model, "uploaded"):
            batch = self._find(row)
            if batch is not None:
                self.ledger.update_submission(row["submission"], batch_id=batch.id, state="submitted", status=batch.status)
                done["found"] += 1
            else:
                self._create(row["submission"], row["input_file_id"])
                done["created"] += 1
        return done

    def _find(self, row: dict) -> Any:
        """The batch created for a submission whose batch id was not recorded, None if the API has none."""
        since = row["created"] - 3600
        for batch in self._call("list the batches", self.client.batches.list, limit=100):
            metadata = getattr(batch, "metadata", None) or {}
            if metadata.get(METADATA_KEY) == row["submission"] or batch.input_file_id == row["input_file_id"]:
                return batch
            if batch.created_at < since:
                break  # listed newest first: older batches cannot be this submission's
        return None

    def open_submissions(self) -> list[dict]:
        return self.ledger.submissions(self.config.model, "submitted")

    def wait(self, rows: Sequence[dict], into: ResultRead) -> list[Finished]:
        """Poll the submissions until each has ended (progress bar), then read their files ``into`` one read
        (the rules on duplicates and conflicts apply across the batches)."""
        from tqdm.auto import tqdm

        pending = {row["batch_id"]: row for row in rows}
        finished: list[Finished] = []
        total = sum(row["requests"] for row in rows)
        progress: dict[str, int] = {}
        with tqdm(total=total, desc=f"batch judging ({self.config.model})", unit="req", mininterval=1.0) as bar:
            while pending:
                for batch_id, row in list(pending.items()):
                    batch = self._call("poll the batch", self.client.batches.retrieve, batch_id)
                    counts = getattr(batch, "request_counts", None)
                    seen = (counts.completed + counts.failed) if counts is not None else 0
                    bar.update(max(0, seen - progress.get(batch_id, 0)))
                    progress[batch_id] = max(seen, progress.get(batch_id, 0))
                    self.ledger.update_submission(row["submission"], status=batch.status)
                    if batch.status in TERMINAL:
                        finished.append(self._download(row, batch, into))
                        del pending[batch_id]
                if pending:
                    time.sleep(POLL_SECONDS.read())
        return finished

    def _download(self, row: dict, batch: Any, into: ResultRead) -> Finished:
        files = []
        for name in ("output_file_id", "error_file_id"):
            if getattr(batch, name, None):
                data = self._call(f"download the batch's {name[:-8]} file", self.client.files.content, getattr(batch, name)).content
                files.append(f"batch {batch.id} {name[:-8]} file")
                read_result_lines(io.BytesIO(data), files[-1], into=into)  # split on b"\n" only, as reading the file would
        errors = [f"{getattr(e, 'code', '')}: {getattr(e, 'message', '')}" for e in (getattr(getattr(batch, "errors", None), "data", None) or [])]
        return Finished(row["submission"], batch.id, batch.status, row["requests"], files, errors)

    def close(self, item: Finished, results: int, unasked: set[str]) -> int:
        """The submission done: its requests whose result no request asked for (``unasked``) exported again, the others
        without one due again (a failed attempt; returns how many). ``results``: its files' lines the read kept."""
        leftover = 0
        for key in self.ledger.keys_of(item.submission):
            entry = self.ledger.entry(key)
            if entry is None or entry.state != IN_FLIGHT:
                continue
            if key in unasked:
                self.ledger.mark(key, self.config.model, EXPORTED)  # answered, but not asked by this scoring: stale, not an error
                continue
            leftover += 1
            used_up = entry.errors + 1 >= self.config.max_attempts
            reason = f"no result in batch {item.batch_id} ({item.status})"
            self.ledger.mark(key, self.config.model, FAILED if used_up else ERRORED, reason=reason, add_error=True)
        summary = {"status": item.status, "results": results, "without_result": leftover, "errors": item.errors}
        self.ledger.update_submission(item.submission, state="done", status=item.status, summary=json.dumps(summary))
        return leftover

    def _call(self, what: str, method, *args, **kwargs):
        import openai

        try:
            return method(*args, **kwargs)
        except (openai.AuthenticationError, openai.PermissionDeniedError) as error:
            raise JudgeConfigError(f"the Batch API at {self.config.endpoint} refused the key ({self.config.key_env}) "
                                   f"while trying to {what} (HTTP {error.status_code})") from None
        except openai.NotFoundError:
            raise JudgeConfigError(f"the endpoint {self.config.endpoint} has no OpenAI Batch API (HTTP 404 while trying to "
                                   f"{what}): judge {self.config.benchmark} without --batch, or through files "
                                   "(--batch-export / --batch-import)") from None
        except openai.APIError as error:
            raise JudgeConfigError(f"the Batch API at {self.config.endpoint} failed to {what}: "
                                   f"{type(error).__name__} {getattr(error, 'status_code', '')}".strip()) from None
