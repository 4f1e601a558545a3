"""What every benchmark's data module does the same way: where its annotation file is read from, its
release's size, and its videos as `lmms-vr prepare` and the preflight check them (`media_index.MediaKind`)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path

from lmms_video_reasoning.utils.core.roots import DataSource, annotation_file, video_problem
from lmms_video_reasoning.utils.data.media_index import MediaKind

CANNOT_RUN = "error: its questions cannot run"


def annotation_at(source: DataSource, root: Path | None, name: str) -> Path:
    """The annotation file `name` under `root` (`lmms-vr prepare`), else under the data root (or the Hub)."""
    return Path(root) / name if root is not None else annotation_file(source, name)


def release_counts(records: list[dict], video_key: str) -> tuple[int, int]:
    """(questions, videos) of records holding one question each, its video named by `video_key`."""
    return len(records), len({record[video_key] for record in records})


def resolvers(records: list[dict], label: Callable[[dict], str],
              resolve: Callable[[dict], Path | None]) -> dict[str, Callable[[], Path | None]]:
    """label -> the tasks' resolver of the first record with that label (records sharing a file check it once)."""
    items: dict[str, Callable[[], Path | None]] = {}
    for record in records:
        items.setdefault(label(record), partial(resolve, record))
    return items


def videos_kind(items: dict[str, Callable[[], Path | None]]) -> MediaKind:
    """The videos (label -> the tasks' resolver): each must be present and decode, else its questions cannot run."""
    return MediaKind("videos", True, items, video_problem, CANNOT_RUN, CANNOT_RUN)
