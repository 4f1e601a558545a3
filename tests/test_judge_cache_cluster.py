"""The judge cache on cluster file systems, its errors and the snapshots behind its verdicts (judges/cache.py).

Detection is tested on /proc/mounts texts as clusters have them; the network-safe mode
(rollback journal, dot-file locking) with real SQLite files, processes and a real local judge
server; failed writes with a real SQLite error (a trigger refusing inserts, which also fails for root).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lmms_video_reasoning.judges import Judge, JudgeConfig, JudgeConfigError, LocalJudgeServer
from lmms_video_reasoning.judges.cache import CachedReply, ReplyCache
from lmms_video_reasoning.judges.cache_lock import (
    LOCAL,
    NETWORK,
    cache_mode,
    filesystem_type,
    is_network_filesystem,
    read_lock_owner,
)
from lmms_video_reasoning.utils.core.ask import Request

CLUSTER_MOUNTS = r"""sysfs /sys sysfs rw,nosuid,nodev,noexec,relatime 0 0
/dev/nvme0n1p2 / ext4 rw,relatime 0 0
tmpfs /tmp tmpfs rw,nosuid,nodev 0 0
nas01:/export/home /home nfs4 rw,relatime,vers=4.2,rsize=1048576 0 0
10.0.0.5@o2ib:/scratch /scratch lustre rw,flock,lazystatfs 0 0
gpfs0 /gpfs gpfs rw,relatime 0 0
beegfs_nodev /mnt/beegfs beegfs rw,relatime,cfgFile=/etc/beegfs/beegfs-client.conf 0 0
//fileserver/share /mnt/smb\040share cifs rw,vers=3.0 0 0
user@login:/data /mnt/remote fuse.sshfs rw,nosuid,nodev 0 0
/dev/nvme1n1 /home/alice/local-ssd xfs rw,relatime 0 0
"""


def stored_snapshots(cache: ReplyCache, model: str | None = None) -> dict[str, int]:
    """{answering model (snapshot): stored replies}, of the replies requested as ``model`` (all when None)."""
    rows = cache.execute("SELECT COALESCE(answered_by, '(not recorded)'), COUNT(*) FROM replies"
                         + (" WHERE model = ?" if model else "") + " GROUP BY 1 ORDER BY 2 DESC", (model,) if model else ())
    return {str(name): int(count) for name, count in rows}


@pytest.mark.parametrize("path, expected", [
    ("/home/alice/.cache/lmms_video_reasoning/judge_cache.sqlite", "nfs4"),
    ("/scratch/alice/cache.sqlite", "lustre"),
    ("/gpfs/projects/x/cache.sqlite", "gpfs"),
    ("/mnt/beegfs/c.sqlite", "beegfs"),
    ("/mnt/smb share/c.sqlite", "cifs"),  # octal-escaped space in /proc/mounts
    ("/mnt/remote/c.sqlite", "fuse.sshfs"),
    ("/home/alice/local-ssd/c.sqlite", "xfs"),  # a local disk mounted inside the NFS home: the longest mount point wins
    ("/tmp/c.sqlite", "tmpfs"),
    ("/var/cache/c.sqlite", "ext4"),
    ("/homework/c.sqlite", "ext4"),  # not under /home: a prefix of the name is not a mount point
])
def test_filesystem_type_from_a_mounts_file(path, expected):
    assert filesystem_type(path, CLUSTER_MOUNTS) == expected


def test_network_file_systems_are_told_from_local_ones():
    assert all(is_network_filesystem(t) for t in ("nfs", "nfs4", "lustre", "gpfs", "beegfs", "cifs", "fuse.sshfs", "ceph"))
    assert not any(is_network_filesystem(t) for t in ("ext4", "xfs", "btrfs", "tmpfs", "overlay", "zfs", None))


def test_cache_mode_follows_the_file_system_and_the_override(tmp_path):
    assert cache_mode("/scratch/a/c.sqlite", env={}, mounts_text=CLUSTER_MOUNTS)[0] == NETWORK
    mode, why = cache_mode("/home/alice/c.sqlite", env={}, mounts_text=CLUSTER_MOUNTS)
    assert mode == NETWORK and "nfs4" in why
    assert cache_mode("/tmp/c.sqlite", env={}, mounts_text=CLUSTER_MOUNTS)[0] == LOCAL
    # the override wins both ways (a shared file system the detection does not know, or a local one it mistakes)
    assert cache_mode("/tmp/c.sqlite", env={"LMMS_VR_JUDGE_CACHE_MODE": "network"}, mounts_text=CLUSTER_MOUNTS)[0] == NETWORK
    assert cache_mode("/scratch/c.sqlite", env={"LMMS_VR_JUDGE_CACHE_MODE": "local"}, mounts_text=CLUSTER_MOUNTS)[0] == LOCAL
    with pytest.raises(JudgeConfigError, match="LMMS_VR_JUDGE_CACHE_MODE"):
        cache_mode("/tmp/c.sqlite", env={"LMMS_VR_JUDGE_CACHE_MODE": "fast"}, mounts_text=CLUSTER_MOUNTS)
    # this machine's own /proc/mounts is read when no text is given: the test folder is local here
    assert cache_mode(tmp_path / "c.sqlite", env={})[0] in (LOCAL, NETWORK)


def header_journal(path: Path) -> tuple[int, int]:
    """SQLite header bytes 18-19: (1, 1) rollback journal, (2, 2) WAL."""
    data = path.read_bytes()[:20]
    return data[18], data[19]


def reply(text: str, by: str = "judge-x") -> CachedReply:
    return CachedReply(text, 3, 1, by, "http://127.0.0.1:1/v1")


def test_network_mode_uses_a_rollback_journal_and_a_dot_lock(tmp_path, monkeypatch):
    """About 1 s."""
    monkeypatch.setenv("LMMS_VR_JUDGE_CACHE_LOCK_WAIT_S", "0.5")
    cache = ReplyCache(tmp_path / "c.sqlite", mode=NETWORK)
    assert cache.put("k1", "m", reply("one"))
    assert cache.get("k1").raw == "one" and len(cache) == 1
    assert header_journal(cache.path) == (1, 1), "no WAL on a network file system"
    assert not (tmp_path / "c.sqlite-wal").exists() and not (tmp_path / "c.sqlite-shm").exists()
    assert not cache.lock_path.exists(), "no lock is held between statements"
    with cache.locked():
        owner = read_lock_owner(cache.lock_path)
        assert (owner.host, owner.pid) == (socket.gethostname(), os.getpid()), "the lock names its holder"
    # another process's lock (here one made as SQLite's dot-file VFS makes it, no owner): a write waits for it
    cache.lock_path.mkdir()
    started = time.monotonic()
    assert not cache.put("k2", "m", reply("two")), "a held lock is not skipped"
    assert time.monotonic() - started >= 0.5 and cache.errors == 1
    cache.lock_path.rmdir()
    assert cache.put("k2", "m", reply("two")) and cache.get("k2").raw == "two"


def test_a_lock_of_unknown_or_remote_owner_is_removed_when_stale(tmp_path, monkeypatch, caplog):
    """About 1 s."""
    monkeypatch.setenv("LMMS_VR_JUDGE_CACHE_LOCK_WAIT_S", "0.5")
    cache = ReplyCache(tmp_path / "c.sqlite", mode=NETWORK)
    cache.lock_path.mkdir()  # no owner (SQLite's own lock, an older version), an hour old
    old = time.time() - 3600
    os.utime(cache.lock_path, (old, old))
    with caplog.at_level(logging.WARNING, logger="lmms_video_reasoning.judges"):
        assert cache.put("k", "m", reply("v"))
    assert not cache.lock_path.exists() and cache.get("k").raw == "v" and cache.errors == 0
    removed = [r.getMessage() for r in caplog.records if "removed the lock" in r.getMessage()]
    assert len(removed) == 1 and "unknown owner" in removed[0] and "3600 s old" in removed[0], removed
    # a process on another host that took it 20 s ago: in use by the default bound, stale with a 10 s one
    cache.lock_path.mkdir()
    (cache.lock_path / "owner").write_text(json.dumps({"host": "node-07", "pid": 1, "since": time.time() - 20, "token": "t"}))
    assert not cache.put("k2", "m", reply("w")) and cache.lock_path.exists(), "a fresh lock is someone's transaction"
    monkeypatch.setenv("LMMS_VR_JUDGE_CACHE_STALE_LOCK_S", "10")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="lmms_video_reasoning.judges"):
        assert cache.put("k2", "m", reply("w")) and not cache.lock_path.exists()
    removed = [r.getMessage() for r in caplog.records if "removed the lock" in r.getMessage()]
    assert len(removed) == 1 and "pid 1 on host node-07" in removed[0] and "another host" in removed[0], removed


_HOLDER = """
import sys, time
from lmms_video_reasoning.judges.cache import ReplyCache
cache = ReplyCache(sys.argv[1], mode="network")
with cache.locked():
    print("held", flush=True)
    time.sleep(60)
"""

_SURVIVOR = """
import logging, sys, time
logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(message)s")
from lmms_video_reasoning.judges.cache import CachedReply, ReplyCache
cache = ReplyCache(sys.argv[1], mode="network")
for i in range(20):
    assert cache.put(f"{sys.argv[2]}-{i}", "m", CachedReply(f"v{i}", 1, 1, "judge-x", None))
print(len(cache), cache.errors, flush=True)
"""


def start_holder(path: Path, env: dict) -> subprocess.Popen:
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env)
    assert holder.stdout.readline().strip() == "held", holder.stderr.read()
    return holder


def lock_env(**values: str) -> dict:
    return {**os.environ, **{f"LMMS_VR_JUDGE_CACHE_{name}": value for name, value in values.items()}}


def test_a_lock_held_by_a_killed_process_is_removed_at_once_on_its_host(tmp_path):
    """Two real processes on one network-mode cache; the holder is SIGKILLed. About 3 s."""
    path = tmp_path / "c.sqlite"
    env = lock_env(STALE_LOCK_S="600", LOCK_WAIT_S="30")  # the default staleness: only the dead pid frees it
    holder = start_holder(path, env)
    before = subprocess.Popen([sys.executable, "-c", _SURVIVOR, str(path), "before"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env)
    time.sleep(0.5)
    assert before.poll() is None, "the survivor waits for the live holder"
    killed_at = time.monotonic()
    holder.kill()
    holder.wait()  # reaped: a zombie is no process either, but the test does not rely on that
    assert (path.parent / "c.sqlite.lock" / "owner").exists(), "SIGKILL leaves the lock behind"
    out, err = before.communicate(timeout=30)
    took = time.monotonic() - killed_at
    assert before.returncode == 0 and out.split() == ["20", "0"], err[-2000:]
    assert took < 10, f"the survivor took {took:.1f} s after the kill"
    warnings = [line for line in err.splitlines() if "removed the lock" in line]
    assert len(warnings) == 1 and f"pid {holder.pid}" in warnings[0] and "no longer running" in warnings[0], err[-2000:]
    # a process started after the kill finds no lock left (the survivor removed it) and works at once
    holder = start_holder(path, env)
    holder.kill()
    holder.wait()
    after = subprocess.run([sys.executable, "-c", _SURVIVOR, str(path), "after"], capture_output=True, text=True, env=env,
                           timeout=30)
    assert after.returncode == 0 and after.stdout.split() == ["40", "0"], after.stderr[-2000:]
    assert f"pid {holder.pid}" in after.stderr and "no longer running" in after.stderr
    assert not (path.parent / "c.sqlite.lock").exists()


def test_a_waiter_on_a_live_holder_says_so_and_gives_up_with_the_owner_and_the_fix(tmp_path):
    """A live holder for the whole wait (LMMS_VR_JUDGE_CACHE_LOCK_WAIT_S=4). About 6 s."""
    path = tmp_path / "c.sqlite"
    env = lock_env(LOCK_WAIT_S="4")
    holder = start_holder(path, env)
    try:
        started = time.monotonic()
        waiter = subprocess.run([sys.executable, "-c", _SURVIVOR, str(path), "w"], capture_output=True, text=True,
                                env=env, timeout=30)
        took = time.monotonic() - started
    finally:
        holder.kill()
        holder.wait()
    assert waiter.returncode != 0 and 4 <= took < 15, (took, waiter.stderr[-2000:])
    lock = str(path.parent / "c.sqlite.lock")
    waiting = [line for line in waiter.stderr.splitlines() if line.startswith("WARNING") and "waiting" in line]
    assert waiting and lock in waiting[0] and f"pid {holder.pid} on host {socket.gethostname()}" in waiting[0], waiter.stderr
    error = waiter.stderr.strip().splitlines()[-1]
    assert "JudgeConfigError" in error and lock in error and f"pid {holder.pid}" in error, error
    assert "gave up after 4 s" in error and "remove" in error and "LMMS_VR_JUDGE_CACHE_LOCK_WAIT_S" in error, error


_BUSY = """
import sys, threading, time
from lmms_video_reasoning.judges.cache import CachedReply, ReplyCache
cache = ReplyCache(sys.argv[1], mode="network")
def work(n):
    i = 0
    while True:
        cache.put(f"{n}-{i}", "m", CachedReply("v", 1, 1, "judge-x", None)); cache.get(f"{n}-{i}"); i += 1
for n in range(8):
    threading.Thread(target=work, args=(n,), daemon=True).start()
if sys.argv[2] == "hold":
    with cache.locked():
        print("held", flush=True)
        time.sleep(60)
print("held", flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("main", ["hold", "busy"])
def test_sigterm_releases_the_lock(tmp_path, main):
    """SIGTERM while the main thread holds the lock, or while 8 threads write (3 tries). About 2 s each."""
    path = tmp_path / "c.sqlite"
    for _ in range(3 if main == "busy" else 1):
        proc = subprocess.Popen([sys.executable, "-c", _BUSY, str(path), main], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "held", proc.stderr.read()
        time.sleep(0.3)
        proc.terminate()
        assert proc.wait(timeout=10) == -signal.SIGTERM, proc.stderr.read()
        assert not (path.parent / "c.sqlite.lock").exists(), "SIGTERM left the lock"
    assert len(ReplyCache(path, mode=NETWORK)) > 0


_WRITER = """
import sys
from lmms_video_reasoning.judges.cache import CachedReply, ReplyCache
cache = ReplyCache(sys.argv[1], mode="network")
for i in range(int(sys.argv[3])):
    assert cache.put(f"{sys.argv[2]}-{i}", "m", CachedReply(f"v{i}", 1, 1, "judge-x", None))
    assert cache.get(f"{sys.argv[2]}-{i}").raw == f"v{i}"
print(cache.errors)
"""


def test_processes_share_a_network_mode_cache(tmp_path):
    path = tmp_path / "shared.sqlite"
    ReplyCache(path, mode=NETWORK)
    writers = [subprocess.Popen([sys.executable, "-c", _WRITER, str(path), name, "60"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True) for name in ("host-a", "host-b", "host-c")]
    outputs = [writer.communicate(timeout=120) for writer in writers]
    assert [w.returncode for w in writers] == [0, 0, 0], [err[-1500:] for _out, err in outputs]
    assert [out.strip() for out, _err in outputs] == ["0", "0", "0"]
    assert len(ReplyCache(path, mode=NETWORK)) == 180


def test_a_wal_cache_moved_to_a_network_file_system_is_switched_and_kept(tmp_path, caplog):
    path = tmp_path / "c.sqlite"
    local = ReplyCache(path, mode=LOCAL)
    local.put("k", "m", reply("kept"))
    local._connection().close()
    assert header_journal(path) == (2, 2)
    network = ReplyCache(path, mode=NETWORK)
    assert network.get("k").raw == "kept" and header_journal(path) == (1, 1)
    assert any("switched from WAL" in r.getMessage() for r in caplog.records)


def test_an_old_cache_file_stays_readable(tmp_path):
    """A cache from before the answering model was recorded: the columns are added (NULL), rows readable."""
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE replies (key TEXT PRIMARY KEY, model TEXT NOT NULL, raw TEXT NOT NULL, "
                           "prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL, created REAL NOT NULL)")
        connection.execute("INSERT INTO replies VALUES ('k', 'gpt-4o', 'old', 1, 1, 0)")
        connection.execute("CREATE TABLE batches (id TEXT)")  # another feature's table: left alone
    for mode in (NETWORK, LOCAL):
        cache = ReplyCache(path, mode=mode)
        row = cache.get("k")
        assert (row.raw, row.answered_by, row.endpoint) == ("old", None, None)
        assert stored_snapshots(cache) == {"(not recorded)": 1}
    with sqlite3.connect(path) as connection:
        assert connection.execute("SELECT COUNT(*) FROM batches").fetchone()[0] == 0


def refuse_writes(path: Path) -> None:
    """A real SQLite error on every insert into the cache (what a full disk or quota gives)."""
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TRIGGER refuse BEFORE INSERT ON replies BEGIN SELECT RAISE(FAIL, 'disk quota exceeded'); END")


def test_a_cache_that_cannot_be_written_is_counted_and_reported_once(tmp_path, caplog):
    with LocalJudgeServer() as server:
        judge = Judge(JudgeConfig(model="judge-x", base_url=server.base_url, cache_path=tmp_path / "c.sqlite", concurrency=4))
        refuse_writes(tmp_path / "c.sqlite")
        with caplog.at_level(logging.INFO, logger="lmms_video_reasoning.judges"):
            results = judge.map(lambda i, ask: ask(Request([{"role": "user", "content": f"q{i}"}], tag="t")), range(6))
            judge.log_summary()
    assert all(r.ok for r in results), "the verdicts of this run are used"
    stats = judge.accounting()
    assert stats["stats"]["cache_errors"] == 6 and stats["stats"]["by_tag"]["t"]["cache_errors"] == 6
    assert stats["cache"]["errors"] == 6 and "disk quota exceeded" in stats["cache"]["first_error"]
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    first = [m for m in errors if "a write failed" in m]
    assert len(first) == 1 and str(tmp_path / "c.sqlite") in first[0] and "LMMS_VR_JUDGE_CACHE" in first[0]
    assert any("6 judge cache reads/writes failed" in m for m in errors)


def test_a_broken_cache_read_is_counted_too(tmp_path, caplog):
    with LocalJudgeServer() as server:
        judge = Judge(JudgeConfig(model="judge-x", base_url=server.base_url, cache_path=tmp_path / "c.sqlite"))
        with sqlite3.connect(tmp_path / "c.sqlite") as connection:
            connection.execute("DROP TABLE replies")
        result = judge.ask(Request([{"role": "user", "content": "q"}]))
    assert result.ok and judge.stats.cache_errors == 2  # the read, then the write


def test_score_exits_non_zero_when_the_cache_cannot_be_written(tmp_path, sample_dir, sample_env, capsys):
    from score_report_support import sample_judge

    from lmms_video_reasoning.utils.tools.cli import main as cli_main

    cache = tmp_path / "judge.sqlite"
    ReplyCache(cache)
    refuse_writes(cache)
    with sample_judge(cache, sample_env):
        status = cli_main(["score", str(sample_dir / "predictions.jsonl"), "--task", "cg_bench_open", "--out", str(tmp_path / "s.json")])
    printed = capsys.readouterr().out
    assert status == 4, printed[-2000:]
    assert "JUDGE CACHE ERROR" in printed and str(cache) in printed
    written = json.loads((tmp_path / "s.json").read_text())
    assert written["lmms_vr"]["judge_accounting"]["cg_bench_open"]["stats"]["cache_errors"] > 0


def test_verdicts_record_their_snapshot_and_a_mixed_cache_is_reported(tmp_path, caplog):
    """`gpt-4o` answered by one snapshot before and another now: served, warned about once, counted."""
    cache = tmp_path / "c.sqlite"
    request = lambda i: Request([{"role": "user", "content": f"q{i}"}], tag="t")  # noqa: E731
    with LocalJudgeServer(reply_model="gpt-4o-2024-08-06") as before:
        old = Judge(JudgeConfig(model="gpt-4o", base_url=before.base_url, cache_path=cache))
        assert all(old.ask(request(i)).answered_by == "gpt-4o-2024-08-06" for i in range(3))
    assert stored_snapshots(ReplyCache(cache), "gpt-4o") == {"gpt-4o-2024-08-06": 3}
    with LocalJudgeServer(reply_model="gpt-4o-2024-11-20") as now:
        judge = Judge(JudgeConfig(model="gpt-4o", base_url=now.base_url, cache_path=cache))
        with caplog.at_level(logging.WARNING, logger="lmms_video_reasoning.judges"):
            results = [judge.ask(request(i)) for i in range(5)]
        assert now.request_count == 2, "cached verdicts of the same alias are still served"
    assert [r.answered_by for r in results] == ["gpt-4o-2024-08-06"] * 3 + ["gpt-4o-2024-11-20"] * 2
    snapshots = judge.accounting()["stats"]["snapshots"]
    assert snapshots == {"current": "gpt-4o-2024-11-20", "other": 3, "by": {"gpt-4o-2024-08-06": 3, "gpt-4o-2024-11-20": 2}}
    warned = [r.getMessage() for r in caplog.records if "more than one model snapshot" in r.getMessage()]
    assert len(warned) == 1 and "gpt-4o-2024-08-06 x3" in warned[0]
    assert stored_snapshots(ReplyCache(cache), "gpt-4o") == {"gpt-4o-2024-08-06": 3, "gpt-4o-2024-11-20": 2}


def test_one_snapshot_is_not_reported(tmp_path, caplog):
    with LocalJudgeServer(reply_model="gpt-4o-2024-08-06") as server:
        judge = Judge(JudgeConfig(model="gpt-4o", base_url=server.base_url, cache_path=tmp_path / "c.sqlite"))
        for _ in range(2):
            judge.ask(Request([{"role": "user", "content": "q"}]))
    assert judge.stats.snapshots() == {"current": "gpt-4o-2024-08-06", "other": 0, "by": {"gpt-4o-2024-08-06": 2}}
    assert not [r for r in caplog.records if "snapshot" in r.getMessage()]


def test_score_output_names_cache_errors_and_other_snapshots(capsys):
    from lmms_video_reasoning.utils.results.score import TaskScore, print_scores

    stats = {"calls": 3, "cache_hits": 2, "failures": 0, "cache_errors": 2, "answered_by": {"gpt-4o-2024-08-06": 2, "gpt-4o-2024-11-20": 3},
             "snapshots": {"current": "gpt-4o-2024-11-20", "other": 2, "by": {"gpt-4o-2024-08-06": 2, "gpt-4o-2024-11-20": 3}}}
    accounting = {"judge": {"model": "gpt-4o"}, "stats": stats, "cache": {"path": "/scratch/c.sqlite", "errors": 2}}
    print_scores([TaskScore("vcr_cot", "vcr_bench", {"accuracy": 50.0}, [{}], None, accounting, "x.jsonl")])
    printed = capsys.readouterr().out
    assert "JUDGE CACHE ERRORS: 2 reads/writes of /scratch/c.sqlite" in printed
    assert "WARNING: 2 verdicts from another snapshot than gpt-4o-2024-11-20 under the name gpt-4o" in printed
