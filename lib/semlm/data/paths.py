"""Where datasets live: ``$SEMLM_DATA_DIR`` (default: the repository's ``data/``)."""

from __future__ import annotations

import os
from pathlib import Path

_CHECKOUT = Path(__file__).resolve().parents[3]
#: The repository root in a checkout (editable install); outside one (``pip install semlm`` in a
#: hosted notebook) the working folder, where data/ and book/_build/ are then looked for.
REPO_ROOT = _CHECKOUT if (_CHECKOUT / "_toc.yml").is_file() and (_CHECKOUT / "lib" / "semlm").is_dir() else Path.cwd()

#: How to obtain each dataset; shown when a file is missing (details in data/README.md).
HOW_TO_GET = {name: f"{what}: run `make data`, see data/README.md" for name, what in {
    "sst2": "GLUE SST-2 (datasets: load_dataset('nyu-mll/glue', 'sst2'))",
    "sst-phrases": "Stanford Sentiment Treebank phrase trees",
    "wikitext-2": "WikiText-2 tokenised release (datasets: load_dataset('wikitext', 'wikitext-2-v1'))",
    "wikitext-2-raw": "WikiText-2 raw release (datasets: load_dataset('wikitext', 'wikitext-2-raw-v1'))",
    "fineweb-edu-sample": "the FineWeb-Edu sample",
}.items()}


def data_dir() -> Path:
    """The data directory: ``$SEMLM_DATA_DIR`` if set (relative paths resolve against the cwd), else ``data/``."""
    env = os.environ.get("SEMLM_DATA_DIR")
    return Path(env).expanduser().resolve() if env else REPO_ROOT / "data"


def dataset_file(dataset: str, filename: str) -> Path:
    """Path of ``<data dir>/<dataset>/<filename>``; raises one clear line if it is missing."""
    if dataset not in HOW_TO_GET:
        raise ValueError(f"unknown dataset {dataset!r}; known: {', '.join(sorted(HOW_TO_GET))}")
    root = data_dir()
    path = root / dataset / filename
    if not path.is_file():
        where = "SEMLM_DATA_DIR" if os.environ.get("SEMLM_DATA_DIR") else "the default data dir (set SEMLM_DATA_DIR to change it)"
        raise FileNotFoundError(
            f"missing dataset file {path} (looked in {where}); get it from {HOW_TO_GET[dataset]}"
        )
    return path
