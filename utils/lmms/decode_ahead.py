"""Decode-ahead (opt-in): the next documents' video inputs prepared while the model works on this one.

Off by default (``LMMS_VR_DECODE_AHEAD=0``): it only hides the making of a proxy clip a document
does not find in the cache, at most the model's own time per document. Measured
(``benchmarks/decode_ahead.py``, docs/measured.md): no gain where most documents reuse a cached
proxy (CG-Bench and VRBench: about 10 questions per video); a gain where every document is a new
video (VCR-Bench: 1,034 questions on 859 videos) and decoding takes about as long as generating.
``LMMS_VR_DECODE_AHEAD=2`` turns it on for such runs.

While the model generates for one document, the next ``LMMS_VR_DECODE_AHEAD`` documents in the
model's own processing order are prepared by one background thread: it calls their task hook
(``doc_to_visual``, or a chat model's ``doc_to_messages``) as the model would, so their proxy clips
land in the cache where the model's own call then finds them. Memory is one document's frames at
a time; the queue is replaced at each document and dropped when the run ends. The order comes
from the model's ``generate_until`` (lmms-eval's ``Collator``), read by ``host.upcoming_documents``
(touchpoint decode-ahead); if it cannot be read, decode-ahead switches itself off, warning once.

Public interface
----------------
- ``DECODE_AHEAD`` (``LMMS_VR_DECODE_AHEAD``): documents prepared ahead (0 = off, the default).
- ``schedule_ahead(reading)``: called by the hook after a document's own input is ready.
- ``prefetching()`` / ``prefetch_reading()``: whether this thread runs a decode-ahead job, and as
  which model's ``Reading`` (the job's stack holds no model).
- ``DecodeAhead``: the background thread and its queue; ``decode_ahead()`` the process's one.
"""

from __future__ import annotations

import atexit
import collections
import logging
import threading
from typing import Callable

from lmms_video_reasoning.utils.core import settings
from lmms_video_reasoning.utils.lmms import host
from lmms_video_reasoning.utils.lmms.model_readings import Reading

logger = logging.getLogger("lmms_video_reasoning.model_video")

DECODE_AHEAD_ENV = "LMMS_VR_DECODE_AHEAD"
DEFAULT_DECODE_AHEAD = 0  # opt-in: see the module docstring for when it pays
DECODE_AHEAD = settings.declare(DECODE_AHEAD_ENV, "int", DEFAULT_DECODE_AHEAD, "documents decoded ahead of the model "
                                "(0 = off, the default; 2 for runs where most documents are a new video)", minimum=0)

_context = threading.local()  # .prefetching, .reading: set by decode-ahead jobs (no model frame on their stack)


def prefetching() -> bool:
    """Whether this thread is running a decode-ahead job (its document's own call reports it)."""
    return getattr(_context, "prefetching", False)


def prefetch_reading() -> Reading | None:
    """The ``Reading`` of the model a running decode-ahead job prepares for."""
    return getattr(_context, "reading", None)


EXIT_WAIT_S = 1.0  # at exit, a running decode gets this long; then the daemon thread dies with the process


class DecodeAhead:
    """One background thread preparing the next documents' inputs, in the model's order.

    ``schedule(jobs)`` replaces the queue with ``jobs`` (callables, nearest first, at most
    ``depth``); a job already running finishes (its result lands in the cache, where the
    foreground call finds it; ``prepare`` serialises the two). ``stop()`` drops the queue and
    waits for the running job: called at exit, so no temporary file or thread is left behind.
    """

    def __init__(self, depth: int):
        self.depth = depth
        self._queue: collections.deque = collections.deque()
        self._cv = threading.Condition()
        self._stopped = False
        self._thread: threading.Thread | None = None
        self.completed = 0

    def schedule(self, jobs: list[Callable[[], object]]) -> None:
        with self._cv:
            if self._stopped:
                return
            self._queue.clear()
            self._queue.extend(jobs[: self.depth])
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="lmms-vr-decode-ahead", daemon=True)
                self._thread.start()
            self._cv.notify()

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._queue and not self._stopped:
                    self._cv.wait()
                if self._stopped:
                    return
                job = self._queue.popleft()
            try:
                job()
                self.completed += 1
            except Exception as exc:  # noqa: BLE001 - the foreground call reports it with context
                logger.debug("decode-ahead job failed (the document will report it): %s", exc)

    def stop(self, timeout: float | None = EXIT_WAIT_S) -> None:
        with self._cv:
            self._stopped = True
            self._queue.clear()
            self._cv.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)  # a clip cut short leaves a hidden .tmp file: `evict` removes stale ones


_ahead: DecodeAhead | None = None
_ahead_guard = threading.Lock()


def decode_ahead() -> DecodeAhead | None:
    """The process's decode-ahead thread (made on first use), or None when it is off."""
    global _ahead
    depth = DECODE_AHEAD.read()
    if depth == 0:
        return None
    with _ahead_guard:
        if _ahead is None:
            _ahead = DecodeAhead(depth)
            atexit.register(_ahead.stop, EXIT_WAIT_S)
        return _ahead


def schedule_ahead(reading: Reading) -> None:
    """Queue the next documents' hook calls (as ``reading``'s model) in the background."""
    if prefetching():
        return
    ahead = decode_ahead()
    if ahead is None or host.DECODE_AHEAD.state.startswith("off"):
        return
    try:
        upcoming = host.upcoming_documents(ahead.depth)
    except Exception as exc:  # noqa: BLE001 - an unexpected model layout only disables decode-ahead
        host.DECODE_AHEAD.switch_off(f"cannot read the model's processing order ({type(exc).__name__}: {exc})")
        return

    def job(fn, doc):
        def run():
            _context.prefetching, _context.reading = True, reading
            try:
                fn(doc)
            finally:
                _context.prefetching, _context.reading = False, None

        return run

    ahead.schedule([job(fn, doc) for fn, doc in upcoming])
