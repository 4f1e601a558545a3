"""Post-import hooks that make this suite look built in to every lmms-eval entry point.

The one way the suite enters lmms-eval: a finder on `sys.meta_path` that, once one of lmms-eval's
modules in `HOOKS` is executed, calls the matching `install_*` function of `plugin`. It is put there
at interpreter start by `lmms_video_reasoning.pth` (which covers `lmms-eval tasks`, `power`, `serve`,
never reached by the `lmms_eval.models` entry point; LMMS_VR_NO_AUTOLOAD=1 switches that off), and
by the entry point `plugin.register` (an editable install has no .pth). It imports nothing heavy; a
failing hook is logged, never breaks lmms-eval's import.
"""

from __future__ import annotations

import sys

from lmms_video_reasoning.utils.core import settings

NO_AUTOLOAD = settings.declare("LMMS_VR_NO_AUTOLOAD", "bool", False, "switch off the hooks that make this suite look built in "
                               "to every lmms-eval command")

# lmms-eval module -> function of lmms_plugin called right after that module is executed
HOOKS = {
    "lmms_eval.tasks": "install_task_path",
    "lmms_eval.models": "install_model_manifests",
    "lmms_eval.evaluator_utils": "install_metric_hooks",
    "lmms_eval.models.model_utils.usage_metrics": "install_usage_hooks",
    "lmms_eval.evaluator": "install_evaluator_hooks",
}


def run_hook(module_name: str) -> None:
    try:
        from lmms_video_reasoning.utils.lmms import plugin

        getattr(plugin, HOOKS[module_name])()
    except Exception:  # never break lmms-eval's own import
        import logging

        logging.getLogger("lmms_video_reasoning").exception(
            "lmms-video-reasoning: the %s hook failed; use --include_path \"$(lmms-vr tasks-path)\" meanwhile", module_name)


class _HookedLoader:
    """Delegates to the real loader, then runs our hook on the executed module.
    (No importlib.abc base classes: this module runs at every interpreter start; keep it cheap.)"""

    def __init__(self, loader, name: str) -> None:
        self._loader, self._name = loader, name

    def exec_module(self, module) -> None:
        self._loader.exec_module(module)
        run_hook(self._name)

    def __getattr__(self, attribute):  # create_module, get_resource_reader, is_package, ... of the real loader
        return getattr(self._loader, attribute)


class PostImportFinder:
    """Finds nothing itself; wraps the loader the other finders return for a hooked module."""

    def find_spec(self, name, path, target=None):
        if name not in HOOKS:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _HookedLoader(spec.loader, name)
                return spec
        return None


def install() -> None:
    """At interpreter start (the .pth): `hook()`, unless LMMS_VR_NO_AUTOLOAD."""
    try:
        if NO_AUTOLOAD.read():
            return
    except settings.SettingError as error:  # at interpreter start: say so, never fail
        print(f"lmms-video-reasoning: hooks off: {error}", file=sys.stderr)
        return
    hook()


def hook() -> None:
    """Put the finder first on `sys.meta_path` (once); run the hooks of modules already imported, not
    of those still executing (the `lmms_eval.models` entry point runs inside lmms-eval's imports)."""
    if not any(isinstance(finder, PostImportFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, PostImportFinder())
    for name in HOOKS:
        module = sys.modules.get(name)
        if module is not None and not getattr(module.__spec__, "_initializing", False):
            run_hook(name)


install()
