"""Host pull requests: small changes to lmms-eval itself, useful to every task (filled in below)."""

from __future__ import annotations

from pathlib import Path


def pull_requests(tree: Path) -> list:
    return []
