"""A memo with a size bound: the oldest-used entries go first.

Process-wide memos (scores per task's records, bootstraps, subtitle cues per video, per-video
locks) otherwise grow with every task and video a long-lived process sees (a notebook, a
server, a 12,000-question run). Thread-safe; `get_or_make` computes outside the lock.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable, Generic, Hashable, TypeVar

V = TypeVar("V")


class BoundedMemo(Generic[V]):
    def __init__(self, maxsize: int) -> None:
        self.maxsize = maxsize
        self._items: OrderedDict[Hashable, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, default: V | None = None) -> V | None:
        with self._lock:
            if key not in self._items:
                return default
            self._items.move_to_end(key)
            return self._items[key]

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._items

    def __setitem__(self, key: Hashable, value: V) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.maxsize:
                self._items.popitem(last=False)

    def __getitem__(self, key: Hashable) -> V:
        with self._lock:
            self._items.move_to_end(key)
            return self._items[key]

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def get_or_make(self, key: Hashable, make: Callable[[], V]) -> V:
        found = self.get(key, _MISSING)
        if found is _MISSING:
            found = self[key] = make()
        return found


_MISSING = object()

