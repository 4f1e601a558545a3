"""Packages: each top-level folder of this repository that is a Python package becomes a
sub-package of one namespace, `lmms_video_reasoning.<folder>` (sub-folders included), so
nothing lands in site-packages under a generic name such as `utils`, and a new benchmark
folder is packaged with no list to edit (package data: pyproject.toml).

Also ships `lmms_video_reasoning.pth` at the top of site-packages. A .pth file is the only way
to run code when lmms-eval's `tasks`, `power` and `serve` subcommands start (they never load
the `lmms_eval.models` entry points); it imports `lmms_video_reasoning.utils.lmms.autoload`,
which only adds a post-import hook.
"""

from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

NAMESPACE = "lmms_video_reasoning"
PTH = f"{NAMESPACE}.pth"
# folders that are not part of the package (tests, measurements, build output)
NOT_SHIPPED = ("tests", "tests.*", "benchmarks", "benchmarks.*", "build", "build.*")

FOUND = find_packages(where=str(Path(__file__).parent), exclude=NOT_SHIPPED)


class BuildPyWithPth(build_py):
    def run(self):
        super().run()
        self.copy_file(str(Path(__file__).parent / PTH), str(Path(self.build_lib) / PTH), preserve_mode=0)


setup(
    packages=[f"{NAMESPACE}.{package}" for package in FOUND],
    package_dir={f"{NAMESPACE}.{package}": package.replace(".", "/") for package in FOUND},
    cmdclass={"build_py": BuildPyWithPth},
)
