"""The versions of installed packages, in one place: run keys hold some, provenance files record more.

Torch-free, so the book's light commands (reports, recorded builds) can call it without importing torch.
"""

from __future__ import annotations

import platform
from importlib.metadata import PackageNotFoundError, version
from typing import Sequence

#: The packages whose versions can change any trained model's numbers (kernels, tokenisation): in every run key.
#: An experiment adds those its runs import beyond these (:attr:`semlm.core.runs.Experiment.packages`).
KEYED_PACKAGES: tuple[str, ...] = ("torch", "transformers", "tokenizers", "numpy")


def package_versions(names: Sequence[str] = KEYED_PACKAGES) -> dict[str, str]:
    """``{package: version}`` of ``names``, "not installed" for one that is not."""
    out = {}
    for name in names:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "not installed"
    return out


def python_minor() -> str:
    """Python's major.minor ("3.11"): bytecode, hashing and float formatting may change between minors."""
    return ".".join(platform.python_version_tuple()[:2])
