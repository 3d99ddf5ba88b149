"""A byte-level BPE tokeniser trained with ``tokenizers`` and used through transformers.

Paper B's v1 model uses GPT-2's BPE (50,257 tokens). Offline we cannot download GPT-2's
merges, so we train the same kind of tokeniser (byte-level pre-tokenisation, BPE,
``<|endoftext|>`` as the only special token) on the training split, with the vocabulary
size of the profile (50,257 in ``paper``). It is saved next to the run
(``tokenizer.json`` plus transformers' config files) and always used through
``transformers.PreTrainedTokenizerFast`` so every chapter calls the same API as for a Hub model.

Training is deterministic: same lines and size give the same merges (a test checks it).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Sequence

from transformers import PreTrainedTokenizerFast

END_OF_TEXT = "<|endoftext|>"


def train_bpe(lines: Sequence[str], vocab_size: int, min_frequency: int = 2):
    """Train a byte-level BPE (a ``tokenizers.Tokenizer``) on ``lines``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    if vocab_size < 257:
        raise ValueError(f"vocab_size must be >= 257 (256 bytes + {END_OF_TEXT}), got {vocab_size}")
    if not lines:
        raise ValueError("cannot train a tokeniser on no text")
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=[END_OF_TEXT],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tokenizer.train_from_iterator(lines, trainer)
    return tokenizer


def as_transformers(tokenizer) -> PreTrainedTokenizerFast:
    """Wrap a ``tokenizers.Tokenizer`` as transformers' fast tokenizer (eos = pad = ``<|endoftext|>``)."""
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token=END_OF_TEXT, bos_token=END_OF_TEXT,
                                   pad_token=END_OF_TEXT, unk_token=None, clean_up_tokenization_spaces=False)


def lines_fingerprint(lines: Sequence[str]) -> str:
    h = hashlib.sha256()
    for line in lines:
        h.update(line.encode())
    return h.hexdigest()[:16]


def load_tokenizer(folder: str | Path) -> PreTrainedTokenizerFast:
    """Reload a tokeniser saved by :func:`bpe_tokenizer`; FileNotFoundError if there is none."""
    folder = Path(folder)
    if not (folder / "tokenizer.json").is_file():
        raise FileNotFoundError(f"no tokenizer.json in {folder}; train one with semlm.data.bpe.bpe_tokenizer")
    return PreTrainedTokenizerFast.from_pretrained(str(folder))


def bpe_tokenizer(lines: Sequence[str], vocab_size: int, folder: str | Path) -> PreTrainedTokenizerFast:
    """Train (or reload, when ``folder`` holds one made from the same text and size) and save a tokeniser."""
    folder = Path(folder)
    key = {"lines": lines_fingerprint(lines), "vocab_size": vocab_size, "kind": "byte-level BPE"}
    stamp = folder / "bpe.json"
    if stamp.is_file() and json.loads(stamp.read_text()) == key and (folder / "tokenizer.json").is_file():
        return load_tokenizer(folder)
    folder.mkdir(parents=True, exist_ok=True)
    as_transformers(train_bpe(lines, vocab_size)).save_pretrained(str(folder))
    stamp.write_text(json.dumps(key))
    return load_tokenizer(folder)
