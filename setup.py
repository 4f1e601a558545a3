"""Packages: each top-level folder of this repository that is a Python package becomes a
sub-package of one namespace, `lmms_video_reasoning.<folder>` (sub-folders included), so
nothing lands in site-packages under a generic name such as `utils`, and a new benchmark
folder is packaged with no list to edit (package data: pyproject.toml).

Also ships `lmms_video_reasoning.pth` at the top of site-packages. A .pth file is the only way
to run code when lmms-eval's `tasks`, `power` and `serve` subcommands start (they never load
the `lmms_eval.models` entry points); it imports `lmms_video_reasoning.utils.lmms.autoload`,
which only adds a post-import hook.

Regular installs get it through `build_py`; editable installs (`pip install -e .`) through
`editable_wheel`, whose strategy object writes the wheel: ours writes the .pth beside what
it writes (setuptools >= 64; with another setuptools the editable install works without
the .pth, and `lmms-vr doctor` says which commands then miss the tasks).
"""

from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

NAMESPACE = "lmms_video_reasoning"
PTH = f"{NAMESPACE}.pth"
# folders that are not part of the package (tests, measurements, development tools, build output)
NOT_SHIPPED = ("tests", "tests.*", "benchmarks", "benchmarks.*", "dev", "dev.*", "build", "build.*")

HERE = Path(__file__).parent
FOUND = find_packages(where=str(HERE), exclude=NOT_SHIPPED)


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

setup(
    packages=[f"{NAMESPACE}.{package}" for package in FOUND],
    package_dir={f"{NAMESPACE}.{package}": package.replace(".", "/") for package in FOUND},
    cmdclass=commands,
)
