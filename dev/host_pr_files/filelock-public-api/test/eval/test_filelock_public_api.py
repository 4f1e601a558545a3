"""`_enable_reentrant_filelocks` keeps one lock per path across filelock's and datasets' FileLock,
through filelock's public API only (filelock 4.3 removed the private `filelock._api` it imported)."""

import json
import subprocess
import sys
import textwrap

# Run in a child process: the function patches filelock's metaclass for the whole process.
CHILD = textwrap.dedent(
    """
    import builtins, json, os, sys

    from datasets.utils._filelock import FileLock as DatasetsFileLock
    from filelock import FileLock

    import lmms_eval.evaluator as evaluator

    private = []  # filelock modules named `_...` that the evaluator imports
    real_import = builtins.__import__

    def recording_import(name, globals=None, locals=None, fromlist=(), level=0):
        if level == 0 and (globals or {}).get("__name__") == evaluator.__name__:
            private.extend(m for m in [name, *(f"{name}.{f}" for f in fromlist or ())] if m.startswith("filelock._"))
        return real_import(name, globals, locals, fromlist, level)

    builtins.__import__ = recording_import
    try:
        evaluator._enable_reentrant_filelocks()
    finally:
        builtins.__import__ = real_import

    folder = sys.argv[1]
    first, second = os.path.join(folder, "a.lock"), os.path.join(folder, "b.lock")
    os.umask(0o027)
    datasets_first = DatasetsFileLock(first)  # datasets' class first
    filelock_second = FileLock(second)  # filelock's class first
    print(json.dumps({
        "private": private,
        "same_across_classes": FileLock(first) is datasets_first and DatasetsFileLock(second) is filelock_second,
        "same_per_class": DatasetsFileLock(first) is datasets_first and FileLock(second) is filelock_second,
        "other_paths_differ": datasets_first is not filelock_second,
        "singleton": filelock_second.is_singleton,
        "datasets_mode": oct(datasets_first.mode),
    }))
    """
)


def test_one_lock_per_path_through_the_public_api(tmp_path):
    proc = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result == {
        "private": [],
        "same_across_classes": True,
        "same_per_class": True,
        "other_paths_differ": True,
        "singleton": True,
        "datasets_mode": oct(0o640),  # 0o666 under the umask 0o027
    }
