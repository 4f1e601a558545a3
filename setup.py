"""Ships `lmms_video_reasoning.pth` at the top of site-packages (pyproject.toml holds the rest).

A .pth file is the only way to run code when lmms-eval's `tasks`, `power` and `serve`
subcommands start (they never load the `lmms_eval.models` entry points); it imports
`lmms_video_reasoning.utils.lmms.autoload`, which only adds a post-import hook.

Regular installs get it through `build_py`; editable installs (`pip install -e .`) through
`editable_wheel`, whose strategy object writes the wheel: ours writes the .pth beside what
it writes (setuptools >= 64; with another setuptools the editable install works without
the .pth, and `lmms-vr doctor` says which commands then miss the tasks).
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

PTH = "lmms_video_reasoning.pth"
HERE = Path(__file__).parent


class BuildPyWithPth(build_py):
    def run(self):
        super().run()
        self.copy_file(str(HERE / PTH), str(Path(self.build_lib) / PTH), preserve_mode=0)


commands = {"build_py": BuildPyWithPth}

try:
    from setuptools.command.editable_wheel import editable_wheel
except ImportError:  # setuptools < 64: no PEP 660 editable wheels
    editable_wheel = None

if editable_wheel is not None and hasattr(editable_wheel, "_select_strategy"):

    class _WithPth:
        """Wraps setuptools' editable strategy: the same wheel, plus our .pth."""

        def __init__(self, strategy):
            self._strategy = strategy

        def __call__(self, wheel, files, mapping):
            self._strategy(wheel, files, mapping)
            wheel.writestr(PTH, (HERE / PTH).read_bytes())

        def __enter__(self):
            self._strategy.__enter__()
            return self

        def __exit__(self, *exc):
            return self._strategy.__exit__(*exc)

    class EditableWheelWithPth(editable_wheel):
        def _select_strategy(self, *args, **kwargs):
            return _WithPth(super()._select_strategy(*args, **kwargs))

    commands["editable_wheel"] = EditableWheelWithPth

setup(cmdclass=commands)
