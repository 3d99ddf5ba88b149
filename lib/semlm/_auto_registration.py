"""``import semlm`` makes the book's models known to transformers' Auto classes, without importing transformers.

The models register themselves (``AutoConfig.register`` / ``AutoModelForCausalLM.register``) when
:mod:`semlm.models` is imported, which costs torch and transformers' modelling code (seconds). ``import
semlm`` must stay light, so it only leaves a note with the import system: when transformers' Auto
registry (``transformers.models.auto.configuration_auto``) is imported, its table of extra model
types learns our three names, and the first lookup of one of them (``AutoConfig.from_pretrained`` of
a saved folder, ``AutoConfig.for_model("idea_gpt")``, ``AutoModelForCausalLM.from_pretrained``)
imports :mod:`semlm.models`, which registers the real classes. Nothing heavy runs at import time,
and nothing is imported in the middle of someone else's import.

The table is transformers' ``CONFIG_MAPPING._extra_content`` (4.x and 5.x alike; a test checks it is
there). Should a later transformers drop it, the names are simply not pre-announced and
``import semlm.models`` is the one import a user needs; a saved folder also carries ``auto_map``, so
``trust_remote_code=True`` loads it without semlm at all.
"""

from __future__ import annotations

import importlib.abc
import sys

# model_type -> the class that defines it (tests/test_auto_registration.py checks they agree)
MODEL_TYPES: dict[str, str] = {
    "idea_gpt": "semlm.idea.model.IdeaGPTConfig",
    "semlm_fusion": "semlm.fusion.model.FusionLMConfig",
    "semlm_baseline": "semlm.fusion.model.BaselineLMConfig",
}
REGISTRY_MODULE = "transformers.models.auto.configuration_auto"


class _RegistersOnFirstLookup(dict):
    """transformers' table of registered configs, which imports :mod:`semlm.models` the first time
    one of our model types is looked up (that import fills the table with the real classes)."""

    def __contains__(self, key) -> bool:
        return dict.__contains__(self, key) or key in MODEL_TYPES

    def __getitem__(self, key):
        if key in MODEL_TYPES and not dict.__contains__(self, key):
            import semlm.models  # noqa: F401  (registers every model type of MODEL_TYPES)
        return dict.__getitem__(self, key)

    def get(self, key, default=None):
        return self[key] if key in self else default


def announce(registry_module) -> bool:
    """Let transformers' config registry resolve our model types on demand; False if it has no table."""
    mapping = getattr(registry_module, "CONFIG_MAPPING", None)
    table = getattr(mapping, "_extra_content", None)
    if not isinstance(table, dict):
        return False
    if not isinstance(table, _RegistersOnFirstLookup):
        mapping._extra_content = _RegistersOnFirstLookup(table)
    return True


class _AfterImport(importlib.abc.Loader):
    """Runs the real loader, then ``announce`` on the finished module."""

    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:
        self._loader.exec_module(module)
        announce(module)
        uninstall()  # one shot: the registry module is loaded once per process

    def __getattr__(self, name):  # get_source, get_filename, ... for inspect and tracebacks
        return getattr(self._loader, name)


class _WatchForRegistry(importlib.abc.MetaPathFinder):
    """Finds the registry module as the other finders would, and wraps its loader."""

    def find_spec(self, fullname, path, target=None):
        if fullname != REGISTRY_MODULE:
            return None
        for finder in list(sys.meta_path):
            if isinstance(finder, _WatchForRegistry) or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _AfterImport(spec.loader)
                return spec
        return None


def install() -> None:
    """Called by ``semlm/__init__``: announce now if transformers' registry is loaded, else when it is."""
    if REGISTRY_MODULE in sys.modules:
        announce(sys.modules[REGISTRY_MODULE])
    elif not any(isinstance(finder, _WatchForRegistry) for finder in sys.meta_path):
        sys.meta_path.insert(0, _WatchForRegistry())


def uninstall() -> None:
    sys.meta_path[:] = [finder for finder in sys.meta_path if not isinstance(finder, _WatchForRegistry)]
