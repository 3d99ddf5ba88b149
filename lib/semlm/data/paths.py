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


#: Prefixes of other machines' paths found in recorded files, each with what it stands for (the recording
#: machines' checkouts, data folders and Python installations): :func:`portable_text` rewrites them too.
KNOWN_MACHINE_PREFIXES = (
    ("/work/shared/data", "$SEMLM_DATA_DIR"), ("/work/main/.gpudata", "$SEMLM_DATA_DIR"),
    ("/work/main/.gpu-data", "$SEMLM_DATA_DIR"), ("/tmp/semlm-data", "$SEMLM_DATA_DIR"), ("/work/main/", ""),
    ("/work/main", "."), ("/opt/torch/.venv/lib/python3.12/site-packages", "<site-packages>"),
    ("/opt/torch/.venv", "<python>"), ("/opt/torch", "<python>"), ("/tmp/site", "<wheels>"),
    ("/tmp/torchinductor_root", "<tmp>/torchinductor"), ("/tmp/inductor", "<tmp>/inductor"),
    ("/tmp/authors/", ""),
)


def portable_text(text: str) -> str:
    """``text`` with machine paths made portable: the data folder as ``$SEMLM_DATA_DIR``, the repository as a
    relative path, Python's installation as ``<python>`` / ``<site-packages>``, the temporary folder as ``<tmp>``,
    the home folder as ``~`` (this machine's, then :data:`KNOWN_MACHINE_PREFIXES`). What recorded files and
    metrics hold, so that no record names the folders of the machine that wrote it."""
    import sys
    import sysconfig
    import tempfile

    here = [(str(data_dir()), "$SEMLM_DATA_DIR"), (str(REPO_ROOT) + "/", ""), (str(REPO_ROOT), "."),
            (sysconfig.get_paths()["purelib"], "<site-packages>"), (sys.prefix, "<python>"),
            (tempfile.gettempdir(), "<tmp>"), (str(Path.home()), "~")]
    for prefix, replacement in [*here, *KNOWN_MACHINE_PREFIXES]:
        if len(prefix) > 1:
            text = text.replace(prefix, replacement)
    return text


def portable_path(path: str | Path) -> str:
    """One path made portable (:func:`portable_text`), e.g. ``$SEMLM_DATA_DIR/fineweb-edu-sample/fineweb_edu.txt``."""
    return portable_text(str(path))


#: An absolute path: "/" starting a token (not inside a URL, a ratio such as tokens/s, or "a / b"), then a folder.
#: The operating system's own folders (/usr, /dev, /proc, /sys, /etc, /bin, /lib) name no machine's layout.
_ABSOLUTE = r"(?<![\w.:/$<>~-])/(?!usr/|dev/|proc/|sys/|etc/|bin/|lib/)[A-Za-z_][\w.+-]*/[\w.+-]"


def absolute_paths(text: str) -> list[str]:
    """The machine paths in ``text`` (each with 30 characters of context): what a record must not hold."""
    import re

    return [text[max(0, m.start() - 30): m.end() + 30] for m in re.finditer(_ABSOLUTE, text)]
