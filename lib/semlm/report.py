"""Chapter metrics files: ``<metrics dir>/<chapter>.json`` with provenance.

Every chapter ends by calling :func:`write_chapter_metrics`; the record carries the
profile, seed, wall time, package versions and git commit next to the numbers, so
each figure in the book can be traced to the run that produced it.
"""

from __future__ import annotations

import json
import math
import os
import platform
import subprocess
import time
from importlib import metadata
from pathlib import Path

from .data.paths import REPO_ROOT

PACKAGES = ("torch", "transformers", "numpy", "pandas", "matplotlib", "seaborn", "papermill", "jupyter-book")


def metrics_dir() -> Path:
    """``$SEMLM_METRICS_DIR`` (set by the book runner) or ``book/_build/metrics``."""
    return Path(os.environ.get("SEMLM_METRICS_DIR", REPO_ROOT / "book" / "_build" / "metrics"))


def package_versions(names=PACKAGES) -> dict[str, str]:
    out = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def git_commit() -> str:
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10)
        sha = commit.stdout.strip() or "unknown"
        return sha + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _clean(value):
    """JSON-safe: NaN/inf become None (JSON has no NaN), tuples become lists."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class ChapterTimer:
    """Started at the top of a chapter; its ``seconds`` go into the metrics record."""

    def __init__(self):
        self.start = time.perf_counter()

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.start


def write_chapter_metrics(chapter: str, profile: str, seed: int, numbers: dict, wall_seconds: float,
                          directory: str | Path | None = None) -> Path:
    """Write ``<chapter>.json`` atomically (a crash never leaves a half-written file)."""
    directory = Path(directory) if directory is not None else metrics_dir()
    directory.mkdir(parents=True, exist_ok=True)
    record = {
        "chapter": chapter,
        "profile": profile,
        "seed": seed,
        "wall_seconds": round(wall_seconds, 2),
        "git_commit": git_commit(),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "packages": package_versions(),
        **_clean(numbers),
    }
    path = directory / f"{chapter}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(record, indent=2, sort_keys=False))
    tmp.replace(path)
    return path
