"""How the judge cache's SQLite file is locked, by the file system it is on (docs/judges.md, "The judge
cache on cluster file systems"): on a local one, WAL and POSIX locks; on a network one, a rollback
journal and SQLite told not to lock (``unix-none``): each statement holds ``<cache>.lock``, a directory
made with ``mkdir`` (atomic there; the lock SQLite's ``unix-dotfile`` VFS makes, so older versions take
turns with this one) whose ``owner`` file names the host, pid and since when. A dead owner on this host
is stale at once, another host's past ``LMMS_VR_JUDGE_CACHE_STALE_LOCK_S``. SIGTERM releases the lock
(`dot_lock`); SIGKILL cannot, which is what the staleness rules are for.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import signal
import socket
import sqlite3
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from lmms_video_reasoning.judges.config import read_setting
from lmms_video_reasoning.utils.core import settings

log = logging.getLogger("lmms_video_reasoning.judges")

MODE_ENV = "LMMS_VR_JUDGE_CACHE_MODE"
LOCAL, NETWORK = "local", "network"
CACHE_MODE = settings.declare(MODE_ENV, "choice", "auto", "how the judge cache is locked: auto (by the file system), local "
                              "(WAL) or network (rollback journal, dot-file lock; safe across hosts)", choices=("auto", LOCAL, NETWORK))
# File system types (the third field of /proc/mounts) on which SQLite's WAL and POSIX locks
# cannot be trusted across hosts.
NETWORK_FILESYSTEMS = frozenset({
    "nfs", "nfs4", "lustre", "gpfs", "beegfs", "fhgfs", "cifs", "smb3", "smbfs", "ceph", "afs", "panfs",
    "wekafs", "glusterfs", "ocfs2", "gfs2", "9p", "orangefs", "pvfs2", "quobyte", "cvfs", "davfs",
    "fuse.sshfs", "fuse.glusterfs", "fuse.ceph", "fuse.cephfs", "fuse.s3fs", "fuse.gcsfuse", "fuse.rclone",
    "fuse.juicefs", "fuse.quobyte", "fuse.beegfs", "fuse.davfs2",
})


def filesystem_type(path: str | Path, mounts_text: str) -> str | None:
    """The type of the file system holding ``path`` (absolute) in /proc/mounts: the longest mount point
    containing it (the last one for a mount point mounted over)."""
    target = os.path.normpath(str(path))
    best: tuple[int, str] | None = None
    for line in mounts_text.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        # /proc/mounts writes space, tab, newline and backslash in paths as octal escapes (\040 ...)
        point = os.path.normpath(re.sub(r"\\([0-7]{3})", lambda code: chr(int(code.group(1), 8)), fields[1]))
        inside = target == point or target.startswith(point.rstrip("/") + "/") or point == "/"
        if inside and (best is None or len(point) >= best[0]):
            best = (len(point), fields[2])
    return best[1] if best else None


def is_network_filesystem(fstype: str | None) -> bool:
    return bool(fstype) and (fstype in NETWORK_FILESYSTEMS or fstype.startswith("nfs"))


def cache_mode(path: str | Path, env: Mapping[str, str] | None = None, mounts_text: str | None = None) -> tuple[str, str]:
    """(``"local"`` | ``"network"``, why) for a cache file at ``path``: ``LMMS_VR_JUDGE_CACHE_MODE`` when
    set, else by the file system type (``mounts_text``: default /proc/mounts; unreadable: local)."""
    forced = read_setting(CACHE_MODE, env)
    if forced in (LOCAL, NETWORK):
        return forced, f"{MODE_ENV}={forced}"
    if mounts_text is None:
        try:
            mounts_text = Path("/proc/mounts").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return LOCAL, "file system type unknown (no /proc/mounts)"
    # realpath: symlinks in the existing part resolved (a cache path may not exist yet)
    fstype = filesystem_type(os.path.realpath(Path(path).expanduser()), mounts_text)
    if is_network_filesystem(fstype):
        return NETWORK, f"on a {fstype} file system"
    return LOCAL, f"on a {fstype or 'local'} file system"


STALE_LOCK = settings.declare(
    "LMMS_VR_JUDGE_CACHE_STALE_LOCK_S", "float", 600.0,
    "network-mode judge cache: seconds after which a lock held by a process on another host (or of unknown owner) "
    "is taken as left by a killed process and removed (a lock of a dead process on this host is removed at once)",
    minimum=0.1)
LOCK_WAIT = settings.declare(
    "LMMS_VR_JUDGE_CACHE_LOCK_WAIT_S", "float", 900.0,
    "network-mode judge cache: the longest a statement waits for the cache's lock before it fails with an error "
    "naming the lock and its owner (keep it above LMMS_VR_JUDGE_CACHE_STALE_LOCK_S)", minimum=0.1)
LOCK_REPORT_FIRST_S = 3.0  # a waiter says it is waiting after this long...
LOCK_REPORT_EVERY_S = 30.0  # ...and again at this interval
_OWNER = "owner"  # the file in the lock directory naming its holder


class CacheLockTimeout(sqlite3.OperationalError):
    """The cache's lock stayed held past LMMS_VR_JUDGE_CACHE_LOCK_WAIT_S (its message names the owner and the fix)."""


def _proc_stat(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after the command name (the state first; [] where /proc cannot say)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return []
    return text[text.rfind(")") + 2:].split()


def _proc_start(pid: int) -> str | None:
    """The start time of process ``pid`` (clock ticks since boot, field 22); tells a reused pid from the owner."""
    fields = _proc_stat(pid)
    return fields[19] if len(fields) > 19 else None


_HOST = socket.gethostname()
try:
    _PID_NAMESPACE = os.readlink("/proc/self/ns/pid")
except OSError:
    _PID_NAMESPACE = ""


def _process_alive(pid: int, proc_start: str | None) -> bool:
    """Whether ``pid`` on this host (and pid namespace) is still the process that took the lock."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: alive, another user's
        pass
    if _proc_stat(pid)[:1] == ["Z"]:
        return False  # a zombie holds nothing
    now_start = _proc_start(pid)
    return not (proc_start and now_start and now_start != proc_start)  # a reused pid is another process


@dataclass(frozen=True)
class LockOwner:
    """What ``<lock>/owner`` says (all None: no owner file, e.g. a lock made by SQLite)."""

    inode: int
    mtime: float
    host: str | None = None
    pid: int | None = None
    since: float | None = None  # time.time() on the owner's host when it took the lock
    token: str | None = None
    pid_namespace: str | None = None
    proc_start: str | None = None

    @property
    def identity(self) -> tuple:
        return (self.inode, self.token)

    @property
    def local(self) -> bool:
        return self.host == _HOST and self.pid_namespace == _PID_NAMESPACE and self.pid is not None

    def age(self) -> float:
        return time.time() - (self.since if self.since is not None else self.mtime)

    def describe(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.since if self.since is not None else self.mtime))
        who = f"pid {self.pid} on host {self.host}" if self.pid is not None else "an unknown owner (no owner file: a lock made by SQLite or an older version)"
        return f"{who}, since {when} ({max(0.0, self.age()):.0f} s ago)"


def read_lock_owner(lock: Path) -> LockOwner | None:
    """The holder of ``lock`` (a directory), or None when it is not held."""
    try:
        status = os.stat(lock)
    except FileNotFoundError:
        return None
    try:
        data = json.loads((lock / _OWNER).read_text(encoding="utf-8"))
        return LockOwner(status.st_ino, status.st_mtime, str(data["host"]), int(data["pid"]), float(data["since"]),
                         str(data["token"]), str(data.get("pid_namespace", "")), data.get("proc_start"))
    except (OSError, ValueError, KeyError, TypeError):  # not written yet, or by no one (SQLite's own lock)
        return LockOwner(status.st_ino, status.st_mtime)


def _make_lock(lock: Path) -> str | None:
    """Take ``lock`` (mkdir, then the owner file, written whole by a rename); its token, or None when it is held."""
    try:
        os.mkdir(lock)
    except FileExistsError:
        return None
    token = uuid.uuid4().hex
    owner = {"host": _HOST, "pid": os.getpid(), "since": time.time(), "token": token,
             "pid_namespace": _PID_NAMESPACE, "proc_start": _proc_start(os.getpid())}
    try:
        partial = lock / f".{_OWNER}.{token}"
        partial.write_text(json.dumps(owner), encoding="utf-8")
        os.replace(partial, lock / _OWNER)
    except OSError:
        _remove_lock(lock)
        raise
    return token


def _remove_lock(lock: Path) -> None:
    """Remove a lock directory in one step for the others (renamed away, then emptied)."""
    gone = lock.with_name(f"{lock.name}.removed-{uuid.uuid4().hex}")
    os.rename(lock, gone)
    shutil.rmtree(gone, ignore_errors=True)


def stale_reason(owner: LockOwner, watched_s: float, stale_s: float) -> str | None:
    """Why the lock ``owner`` holds was left by a killed process (None: it may be in use).
    ``watched_s``: how long this waiter has seen this same lock held (a bound clock skew cannot shorten)."""
    if owner.local and owner.pid != os.getpid() and not _process_alive(owner.pid, owner.proc_start):
        return f"its owner, pid {owner.pid} on this host, is no longer running"
    age = max(owner.age(), watched_s)
    if age >= stale_s:
        place = "this host" if owner.local else ("another host" if owner.host else "an unknown host")
        return (f"it is {age:.0f} s old, past LMMS_VR_JUDGE_CACHE_STALE_LOCK_S={stale_s:g} (a process on {place} "
                "holds it for milliseconds per statement)")
    return None


def break_stale_lock(lock: Path, owner: LockOwner, reason: str) -> bool:
    """Remove ``lock`` if still held by ``owner`` (stale for ``reason``); True if removed. Breakers take
    turns at ``<lock>.break`` and re-read the owner there: a lock just taken again is never removed."""
    guard = lock.with_name(lock.name + ".break")
    if _make_lock(guard) is None:
        guard_owner = read_lock_owner(guard)  # another waiter is breaking it; or a breaker was killed
        why = guard_owner and stale_reason(guard_owner, 0.0, STALE_LOCK.read())
        if why:
            with contextlib.suppress(OSError):
                _remove_lock(guard)
                log.warning("judge cache lock %s: removed the guard %s of %s: %s", lock, guard, guard_owner.describe(), why)
        return False
    try:
        now = read_lock_owner(lock)
        if now is None or now.identity != owner.identity:
            return False  # released, or taken again since it was found stale
        try:
            _remove_lock(lock)
        except OSError as error:
            log.warning("judge cache lock %s, held by %s, is stale (%s) but could not be removed (%s): remove it by hand",
                        lock, owner.describe(), reason, error)
            return False
        log.warning("judge cache lock %s: removed the lock of %s: %s", lock, owner.describe(), reason)
        return True
    finally:
        _remove_lock(guard)


class DotLock:
    """``<cache>.lock`` as held by this process: threads take turns at ``mutex`` (reentrant), the
    first takes the directory, the last out removes it."""

    def __init__(self, lock: Path) -> None:
        self.path = lock
        self.mutex = threading.RLock()
        self.depth = 0
        self.token: str | None = None
        self.gave_up = False  # a wait ran out: later statements try once and fail at once while it is held

    def __enter__(self) -> None:
        self.mutex.acquire()
        if self.depth == 0:
            try:
                self.token = self._wait()
            except BaseException:
                self.mutex.release()
                raise
        self.depth += 1

    def __exit__(self, *exc: Any) -> None:
        self.depth -= 1
        try:
            if self.depth == 0:
                token, self.token = self.token, None
                owner = read_lock_owner(self.path)
                if owner is not None and owner.token == token:
                    _remove_lock(self.path)
                else:
                    log.warning("judge cache lock %s was no longer this process's when released (held by %s): another "
                                "process took it as stale; raise LMMS_VR_JUDGE_CACHE_STALE_LOCK_S if statements are that slow",
                                self.path, owner.describe() if owner else "no one")
        finally:
            self.mutex.release()

    def _wait(self) -> str:
        stale_s, wait_s = STALE_LOCK.read(), LOCK_WAIT.read()
        started = time.monotonic()
        report_at = started + LOCK_REPORT_FIRST_S
        watched: tuple[tuple, float] | None = None  # (owner identity, first seen)
        delay = 0.001
        while True:
            token = _make_lock(self.path)
            if token is not None:
                if time.monotonic() - started >= LOCK_REPORT_FIRST_S:
                    log.warning("judge cache lock %s: taken after waiting %.0f s", self.path, time.monotonic() - started)
                self.gave_up = False
                return token
            owner = read_lock_owner(self.path)
            if owner is None:
                continue  # released meanwhile
            now = time.monotonic()
            if watched is None or watched[0] != owner.identity:
                watched = (owner.identity, now)
            reason = stale_reason(owner, now - watched[1], stale_s)
            if reason and break_stale_lock(self.path, owner, reason):
                continue
            waited = now - started
            if self.gave_up or waited >= wait_s:
                self.gave_up = True
                raise CacheLockTimeout(
                    f"the judge cache lock {self.path} is held by {owner.describe()}; gave up after {waited:.0f} s "
                    f"(LMMS_VR_JUDGE_CACHE_LOCK_WAIT_S={wait_s:g}). If that process is gone (killed on another host), "
                    f"remove {self.path} by hand (or wait: it is removed once older than "
                    f"LMMS_VR_JUDGE_CACHE_STALE_LOCK_S={stale_s:g} s); if it is running, let it finish or raise "
                    "LMMS_VR_JUDGE_CACHE_LOCK_WAIT_S")
            if now >= report_at:
                log.warning("judge cache lock %s: waiting %.0f s so far for %s (gives up after %g s, "
                            "LMMS_VR_JUDGE_CACHE_LOCK_WAIT_S; a lock of another host is stale after %g s, "
                            "LMMS_VR_JUDGE_CACHE_STALE_LOCK_S)", self.path, waited, owner.describe(), wait_s, stale_s)
                report_at = now + LOCK_REPORT_EVERY_S
            time.sleep(delay)
            delay = min(delay * 2, 0.05)

    def release_at_exit(self) -> None:
        """SIGTERM: remove the lock if this process holds it and no statement is inside SQLite (the
        process ends right after; a transaction cut short is rolled back from its journal by the next holder)."""
        if not self.mutex.acquire(timeout=1.0):
            return  # a statement is running (or waiting): leave it to the staleness rules
        owner = read_lock_owner(self.path) if self.token is not None else None
        if owner is not None and owner.token == self.token:
            with contextlib.suppress(OSError):
                _remove_lock(self.path)
        # the mutex stays held: no other thread starts a statement before the process ends


_dot_locks: dict[str, DotLock] = {}
_dot_locks_guard = threading.Lock()


def dot_lock(path: Path) -> DotLock:
    """One DotLock per cache file in this process (network mode). The handler releasing the held ones on SIGTERM is
    installed where SIGTERM would otherwise end the process at once (default action, main thread); an application's
    own handler is left alone."""
    if threading.current_thread() is threading.main_thread():
        with contextlib.suppress(ValueError, OSError):
            if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
                signal.signal(signal.SIGTERM, _on_sigterm)
    key = os.path.realpath(path)
    with _dot_locks_guard:
        if key not in _dot_locks:
            _dot_locks[key] = DotLock(Path(key + ".lock"))
        return _dot_locks[key]


def _on_sigterm(signum: int, frame: Any) -> None:
    for lock in list(_dot_locks.values()):
        lock.release_at_exit()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)
