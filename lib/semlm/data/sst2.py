"""SST-2 (GLUE) and the SST phrase trees, read from the local data directory.

``load_sst2(split)`` returns a ``datasets.Dataset`` with columns ``sentence`` (str) and
``label`` (0 negative / 1 positive) read from ``$SEMLM_DATA_DIR/sst2/{train,dev}.tsv``,
the GLUE layout (``sentence<TAB>label`` with that header). Every line is checked before
anything is built: a bad header or a malformed row stops with ``file:line: what was
wrong`` and a missing file with the one-line error of :mod:`semlm.data.paths`.

The Hugging Face hub copy (``nyu-mll/glue``, config ``sst2``) is used only when asked for with
``source="hub"`` *and* the environment opts in with ``SEMLM_ALLOW_DOWNLOADS=1``; the book
runs offline (``HF_*_OFFLINE=1``), so a chapter never fetches anything silently.

``load_sst_phrase_trees(split)`` reads the PTB-format phrase trees (0-4 label on every
node) of ``$SEMLM_DATA_DIR/sst-phrases/``; we use their leaves, which keep the original
capitalisation that GLUE lower-cased.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from semlm.data.paths import dataset_file

SPLITS: dict[str, str] = {"train": "train.tsv", "dev": "dev.tsv"}
HEADER = ("sentence", "label")
LABELS = ("0", "1")
LABEL_NAMES = ("negative", "positive")
#: Environment variable that must be "1" before the loader may reach the hub.
ALLOW_DOWNLOADS_VAR = "SEMLM_ALLOW_DOWNLOADS"
SOURCES = ("local", "hub")
#: The GLUE repository on the hub (the old short name "glue" redirects there) and its split names.
HUB_DATASET = "nyu-mll/glue"
HUB_SPLITS = {"train": "train", "dev": "validation"}


def read_sst2_tsv(path: str | Path) -> tuple[list[str], list[int]]:
    """Parse and validate a GLUE SST-2 file: header ``sentence<TAB>label``, then ``text<TAB>0|1`` rows.

    Raises ``ValueError("<file>:<line>: <what was wrong>")`` for the first bad line.
    """
    path = Path(path)
    sentences, labels = [], []
    with path.open(encoding="utf-8", newline="") as handle:
        header = handle.readline().rstrip("\r\n")
        if tuple(header.split("\t")) != HEADER:
            raise ValueError(f"{path}:1: header must be 'sentence<TAB>label', got {header!r}; "
                             f"is this the GLUE SST-2 file (see data/README.md)?")
        for number, line in enumerate(handle, start=2):
            line = line.rstrip("\r\n")
            fields = line.split("\t")
            if len(fields) != 2:
                raise ValueError(f"{path}:{number}: expected 2 tab-separated fields (sentence, label), "
                                 f"got {len(fields)}; fix or remove this row")
            text, label = fields
            if not text.strip():
                raise ValueError(f"{path}:{number}: empty sentence; fix or remove this row")
            if label not in LABELS:
                raise ValueError(f"{path}:{number}: label must be 0 or 1, got {label!r}; fix or remove this row")
            sentences.append(" ".join(text.split()))
            labels.append(int(label))
    if not sentences:
        raise ValueError(f"{path}: no rows after the header; the file is empty or truncated")
    return sentences, labels


def load_sst2(split: str, source: str = "local"):
    """SST-2 ``split`` ("train" or "dev") as a ``datasets.Dataset`` (columns sentence, label)."""
    from datasets import ClassLabel, Dataset, Features, Value, load_dataset

    if split not in SPLITS:
        raise ValueError(f"unknown SST-2 split {split!r}; choose one of: {', '.join(SPLITS)} (test has no labels)")
    if source not in SOURCES:
        raise ValueError(f"unknown source {source!r}; choose one of: {', '.join(SOURCES)}")
    if source == "hub":
        if os.environ.get(ALLOW_DOWNLOADS_VAR) != "1":
            raise ValueError(f"source='hub' downloads GLUE SST-2; set {ALLOW_DOWNLOADS_VAR}=1 to allow it, "
                             f"or use the local files (source='local', see data/README.md)")
        hub = load_dataset(HUB_DATASET, "sst2", split=HUB_SPLITS[split])
        sentences, labels = [" ".join(s.split()) for s in hub["sentence"]], hub["label"]
    else:
        sentences, labels = read_sst2_tsv(dataset_file("sst2", SPLITS[split]))
    features = Features({"sentence": Value("string"), "label": ClassLabel(names=list(LABEL_NAMES))})
    return Dataset.from_dict({"sentence": sentences, "label": labels}, features=features)


def tokenize(sentence: str) -> list[str]:
    """SST-2 is already lower-cased and PTB-tokenised: words are the space-separated pieces."""
    return sentence.split()


# --- SST phrase trees (optional) -----------------------------------------------------------------

_LEAF = re.compile(r"\((\d) ([^()\s]+)\)")
PHRASE_SPLITS = {"train": "train.txt", "dev": "dev.txt", "test": "test.txt"}


def tree_leaves(tree: str) -> list[tuple[str, int]]:
    """(word, 0-4 label) for every leaf of one PTB-format SST tree, left to right."""
    return [(word, int(label)) for label, word in _LEAF.findall(tree)]


def load_sst_phrase_trees(split: str = "train") -> list[str]:
    """The trees of an SST phrase-tree split, one string per sentence (validated to start with '(')."""
    if split not in PHRASE_SPLITS:
        raise ValueError(f"unknown SST phrase split {split!r}; choose one of: {', '.join(PHRASE_SPLITS)}")
    path = dataset_file("sst-phrases", PHRASE_SPLITS[split])
    trees = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = line.strip()
        if not line:
            continue
        if not (line.startswith("(") and line.endswith(")") and _LEAF.search(line)):
            raise ValueError(f"{path}:{number}: not a PTB-format tree like '(3 (2 word) ...)'")
        trees.append(line)
    return trees
