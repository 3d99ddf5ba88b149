"""WikiText for the idea-gated chapters (paper B): text splits through ``datasets``.

* WikiText-2 (the tokenised release, ``train.txt`` / ``valid.txt`` / ``test.txt``) is read from
  ``$SEMLM_DATA_DIR/wikitext-2/`` with ``datasets``' plain-text builder: no network, and one
  clear error naming the missing file if it is not there. Where ``datasets`` is not installed
  (a bare GPU machine) the same lines are read as plain text (tests/idea/test_idea_data.py
  checks both readers give the same splits).
* WikiText-103 (the authors' v1 corpus) is fetched with ``datasets.load_dataset("wikitext",
  "wikitext-103-raw-v1")`` only when downloads are allowed explicitly: ``SEMLM_ALLOW_DOWNLOADS=1``
  and no ``HF_DATASETS_OFFLINE=1`` (the book runner sets the latter unless ``--allow-downloads``).
  Otherwise, or if the download fails, it falls back to WikiText-2 and says so in
  :attr:`TextSplits.dataset` and :attr:`TextSplits.note`, which the chapters print and record.

Lines are kept as in the release (a leading space, `` @-@ `` for hyphens, ``<unk>``); blank
lines are dropped and every kept line ends with a newline, so article structure survives
the byte-level tokeniser.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

from semlm.data.paths import dataset_file

DATASETS: tuple[str, ...] = ("wikitext-2", "wikitext-103")
SPLITS: tuple[str, ...] = ("train", "valid", "test")
_TRUE = {"1", "true", "yes", "on"}


@dataclass
class TextSplits:
    """The train / valid / test lines of one corpus and where they came from."""

    dataset: str               # the corpus actually used ("wikitext-2" after a fallback)
    requested: str             # the corpus the profile asked for
    train: list[str]
    valid: list[str]
    test: list[str]
    note: str = ""             # why the corpus differs from the request, if it does

    def split(self, name: str) -> list[str]:
        if name not in SPLITS:
            raise ValueError(f"unknown split {name!r}; choose one of: {', '.join(SPLITS)}")
        return getattr(self, name)


def downloads_allowed() -> bool:
    """True only with ``SEMLM_ALLOW_DOWNLOADS=1`` and without ``HF_DATASETS_OFFLINE=1``."""
    env = os.environ
    return (env.get("SEMLM_ALLOW_DOWNLOADS", "").strip().lower() in _TRUE
            and env.get("HF_DATASETS_OFFLINE", "").strip().lower() not in _TRUE)


@contextlib.contextmanager
def _quiet_datasets():
    """No progress bars from ``datasets`` while we load (restored afterwards)."""
    import datasets

    was_enabled = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        yield datasets
    finally:
        if was_enabled:
            datasets.enable_progress_bars()


def _clean(lines) -> list[str]:
    return [line if line.endswith("\n") else line + "\n" for line in lines if line.strip()]


def load_wikitext2() -> TextSplits:
    """WikiText-2 from ``$SEMLM_DATA_DIR/wikitext-2/``; FileNotFoundError naming the file and the fix."""
    files = {split: str(dataset_file("wikitext-2", f"{split}.txt")) for split in SPLITS}
    try:
        with _quiet_datasets() as datasets:
            loaded = datasets.load_dataset("text", data_files=files, keep_in_memory=True)
        lines = {split: loaded[split]["text"] for split in SPLITS}
    except ImportError:  # no ``datasets``: the text builder's lines (universal newlines, split on "\n" only)
        lines = {split: Path(files[split]).read_text(encoding="utf-8").split("\n") for split in SPLITS}
    return TextSplits("wikitext-2", "wikitext-2", *(_clean(lines[s]) for s in SPLITS))


def load_corpus(dataset: str = "wikitext-2") -> TextSplits:
    """The corpus a profile asks for, with the documented WikiText-2 fallback for WikiText-103."""
    if dataset not in DATASETS:
        raise ValueError(f"unknown dataset {dataset!r}; choose one of: {', '.join(DATASETS)}")
    if dataset == "wikitext-2":
        return load_wikitext2()
    if not downloads_allowed():
        reason = "downloads are not allowed (set SEMLM_ALLOW_DOWNLOADS=1, or run the book with --allow-downloads)"
    else:
        try:  # WikiText-103 (raw) from the Hugging Face Hub
            with _quiet_datasets() as datasets:
                loaded = datasets.load_dataset("wikitext", "wikitext-103-raw-v1")
            names = {"train": "train", "valid": "validation", "test": "test"}
            return TextSplits("wikitext-103", "wikitext-103", *(_clean(loaded[names[s]]["text"]) for s in SPLITS))
        except Exception as error:  # offline, hub unreachable, disk full: fall back, and say why
            reason = f"loading it failed ({type(error).__name__}: {' '.join(str(error).split())[:160]})"
    splits = load_wikitext2()
    splits.requested = dataset
    splits.note = f"asked for {dataset} but {reason}; used wikitext-2 instead"
    return splits
