"""FineWeb-Edu for the LoRA chapter (paper B's second setting): documents and a deterministic split.

* Offline (the default): the 281-document sample ``$SEMLM_DATA_DIR/fineweb-edu-sample/fineweb_edu.txt``
  (see its PROVENANCE.md). Documents are separated by a blank line and the file has CRLF line
  endings; both are handled here (any mix of ``\\r\\n``, ``\\r`` and ``\\n`` reads the same).
* Streaming: ``datasets.load_dataset("HuggingFaceFW/fineweb-edu", "sample-10BT", streaming=True)``,
  the authors' corpus, only with an explicit opt-in: ``SEMLM_ALLOW_DOWNLOADS=1`` and no
  ``HF_DATASETS_OFFLINE=1`` (the book runner sets the latter unless ``--allow-downloads``).

The train / validation split is by *document* and does not depend on the order of the file:
each document is ranked by ``sha256(seed, text)`` and the first ``n_validation`` of that ranking
form the validation set. Same text, fraction and seed give the same split on every machine.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Sequence

from semlm.data.paths import dataset_file
from semlm.data.wikitext import downloads_allowed

DATASET = "fineweb-edu-sample"
FILENAME = "fineweb_edu.txt"
HUB_NAME, HUB_CONFIG = "HuggingFaceFW/fineweb-edu", "sample-10BT"
SOURCES: tuple[str, ...] = ("offline", "stream")
_BLANK_LINE = re.compile(r"\n[ \t]*\n")


@dataclass
class FineWebDocuments:
    """Train and validation documents and where they came from (``dataset`` goes into the metrics)."""

    dataset: str                 # "fineweb-edu-sample" (offline file) or "HuggingFaceFW/fineweb-edu:sample-10BT"
    train: list[str]
    validation: list[str]
    source: str                  # the file read, or the hub name streamed
    note: str = ""

    @property
    def n_documents(self) -> int:
        return len(self.train) + len(self.validation)

    @property
    def n_characters(self) -> int:
        return sum(map(len, self.train)) + sum(map(len, self.validation))


def split_text_into_documents(text: str) -> list[str]:
    """Documents of a text whose documents are separated by a blank line; line endings normalised to ``\\n``."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return [doc.strip() for doc in _BLANK_LINE.split(text) if doc.strip()]


def read_documents(path: str | Path) -> list[str]:
    """The documents of one file (UTF-8, blank-line separated, any line endings); one-line errors."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"missing FineWeb-Edu file {path}; see data/README.md for how to get it")
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise ValueError(f"{path} is not UTF-8 text ({error.reason} at byte {error.start}); "
                         f"re-export it as UTF-8") from None
    documents = split_text_into_documents(text)
    if not documents:
        raise ValueError(f"{path} holds no documents; expected text with documents separated by a blank line")
    return documents


def split_documents(documents: Sequence[str], validation_fraction: float = 0.1,
                    seed: int = 0) -> tuple[list[str], list[str]]:
    """(train, validation) by document: the ``round(fraction * n)`` (at least 1) documents ranked first by
    ``sha256(seed, text)`` are validation; both keep the input order."""
    if not 0.0 < validation_fraction < 1.0:
        raise ValueError(f"validation_fraction must be in (0, 1), got {validation_fraction}")
    if len(documents) < 2:
        raise ValueError(f"need at least 2 documents to split into train and validation, got {len(documents)}")
    n_val = min(len(documents) - 1, max(1, round(validation_fraction * len(documents))))
    rank = sorted(range(len(documents)),
                  key=lambda i: (hashlib.sha256(f"{seed}\0{documents[i]}".encode()).hexdigest(), i))
    chosen = set(rank[:n_val])
    train = [doc for i, doc in enumerate(documents) if i not in chosen]
    validation = [doc for i, doc in enumerate(documents) if i in chosen]
    return train, validation


def stream_documents(max_documents: int, min_characters: int = 500) -> list[str]:
    """The first ``max_documents`` documents (of at least ``min_characters``) of FineWeb-Edu sample-10BT, streamed."""
    if not downloads_allowed():
        raise ValueError("streaming FineWeb-Edu needs the network: set SEMLM_ALLOW_DOWNLOADS=1 (and run the book "
                         "with --allow-downloads), or use source='offline'")
    import datasets

    stream = datasets.load_dataset(HUB_NAME, name=HUB_CONFIG, split="train", streaming=True)
    texts = (row["text"].replace("\r\n", "\n").strip() for row in stream)
    return list(islice((text for text in texts if len(text) >= min_characters), max_documents))


def load_fineweb(source: str = "offline", validation_fraction: float = 0.1, seed: int = 0,
                 max_documents: int | None = None, path: str | Path | None = None) -> FineWebDocuments:
    """FineWeb-Edu documents split into train / validation.

    ``source="offline"`` reads ``path`` (default: the sample under ``$SEMLM_DATA_DIR``), keeping the
    first ``max_documents`` if given; ``source="stream"`` streams ``max_documents`` (default 2,000)
    documents from the Hub and needs the explicit opt-in described in the module docstring.
    """
    if source not in SOURCES:
        raise ValueError(f"unknown FineWeb source {source!r}; choose one of: {', '.join(SOURCES)}")
    if max_documents is not None and max_documents < 2:
        raise ValueError(f"max_documents must be >= 2, got {max_documents}")
    if source == "offline":
        file = Path(path) if path is not None else dataset_file(DATASET, FILENAME)
        documents = read_documents(file)[:max_documents]
        dataset, where = DATASET, str(file)
    else:
        documents = stream_documents(max_documents or 2000)
        dataset, where = f"{HUB_NAME}:{HUB_CONFIG}", f"{HUB_NAME} ({HUB_CONFIG}, streamed)"
    train, validation = split_documents(documents, validation_fraction, seed)
    return FineWebDocuments(dataset, train, validation, where)
