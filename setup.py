"""Ships `lmms_video_reasoning.pth` at the top of site-packages (pyproject.toml holds the rest).

A .pth file is the only way to run code when lmms-eval's `tasks`, `power` and `serve`
subcommands start (they never load the `lmms_eval.models` entry points); it imports
`lmms_video_reasoning.utils.lmms.autoload`, which only adds a post-import hook.
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

PTH = "lmms_video_reasoning.pth"


class BuildPyWithPth(build_py):
    def run(self):
        super().run()
        self.copy_file(str(Path(__file__).parent / PTH), str(Path(self.build_lib) / PTH), preserve_mode=0)


setup(cmdclass={"build_py": BuildPyWithPth})
