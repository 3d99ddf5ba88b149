"""Paper B's data: corpus -> tokeniser -> id streams, and the blocks and random windows a GPT trains on.

:func:`prepare_data` learns (or loads) the tokeniser once and caches the id streams under the runs folder;
:class:`TokenStream` samples the authors' random windows, :class:`TokenBlocks` the fixed blocks that validation
and evaluation score, each with the idea windows of the next K tokens.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

from semlm.core import runs
from semlm.core.metrics import NO_TARGET
from semlm.core.runs import default_runs_dir
from semlm.core.train import fingerprint
from semlm.data.bpe import bpe_tokenizer, lines_fingerprint, load_tokenizer
from semlm.data.wikitext import TextSplits, downloads_allowed, load_corpus
from semlm.idea.model import quiet_transformers
from semlm.idea.profiles import IdeaProfile
from semlm.idea.targets import top_frequent_ids


@dataclass
class TokenBatch:
    inputs: torch.Tensor    # [B, L]      x_0 .. x_{L-1}
    targets: torch.Tensor   # [B, L]      x_1 .. x_L (NO_TARGET where the text ended)
    future: torch.Tensor    # [B, L+K-1]  x_1 .. x_{L+K-1}: the next-token targets continued for the idea windows

    @classmethod
    def of(cls, rows: torch.Tensor, block_size: int) -> "TokenBatch":
        """The batch of ``rows`` [B, L + K] of token ids, x_0 .. x_{L+K-1} (``NO_TARGET`` past the text's end)."""
        return cls(rows[:, :block_size].clamp_min(0), rows[:, 1:block_size + 1], rows[:, 1:])


@dataclass
class TokenBlocks:
    """Fixed-length blocks of token ids: row i holds tokens ``[i*L, i*L + L + K)`` of the split (``NO_TARGET`` past
    its end), the inputs, next-token targets and idea windows of L positions that no other block scores."""

    input_ids: torch.Tensor  # [N, L + K] long
    block_size: int
    window: int
    device: str = "cpu"

    @classmethod
    def from_stream(cls, ids: torch.Tensor, block_size: int, window: int,
                    max_tokens: int | None = None) -> "TokenBlocks":
        ids = ids.long().flatten()[: None if max_tokens is None else max_tokens + 1]  # x_0 .. x_max_tokens
        n = (len(ids) - 1) // block_size
        if n < 1:
            raise ValueError(f"need more than {block_size} tokens to make one block, got {len(ids)}")
        padded = F.pad(ids, (0, block_size + window), value=NO_TARGET)
        rows = padded.unfold(0, block_size + window, block_size)[:n]
        return cls(rows.contiguous(), block_size, window)

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    @property
    def n_tokens(self) -> int:
        return int((self.input_ids[:, 1:self.block_size + 1] != NO_TARGET).sum())

    def batch(self, index) -> TokenBatch:
        return TokenBatch.of(self.input_ids[index].to(self.device), self.block_size)

    def batches(self, batch_size: int, generator: torch.Generator | None = None, shuffle: bool = False):
        order = torch.randperm(len(self), generator=generator) if shuffle else torch.arange(len(self))
        for start in range(0, len(self), batch_size):
            yield self.batch(order[start:start + batch_size])


class TokenStream:
    """A training split as one id stream, sampled like the authors' ``get_batch``: windows at random offsets
    (the data of ``sampling="random_windows"``; the training loop moves the batches to the model's device)."""

    def __init__(self, ids: torch.Tensor, block_size: int, window: int, max_tokens: int | None = None):
        # the stream itself (the trainer hashes input_ids into the run's fingerprint)
        self.input_ids = ids.long().flatten()[: None if max_tokens is None else max_tokens + 1]
        self.block_size, self.window = block_size, window
        if self.n_tokens < block_size + window + 1:
            raise ValueError(f"need more than {block_size + window} training tokens, got {self.n_tokens}; "
                             f"raise train_tokens or lower block_size / window")

    @property
    def n_tokens(self) -> int:
        return len(self.input_ids)

    def __len__(self) -> int:
        """The number of distinct window offsets."""
        return self.n_tokens - self.block_size - self.window

    def sample(self, batch_size: int, generator: torch.Generator) -> TokenBatch:
        starts = torch.randint(len(self), (batch_size,), generator=generator)
        return TokenBatch.of(self.input_ids[starts[:, None] + torch.arange(self.block_size + self.window)],
                             self.block_size)   # rows x_i .. x_{i+L+K-1}


@dataclass
class IdeaData:
    splits_dataset: str           # the corpus used
    requested_dataset: str
    note: str
    tokenizer_dir: Path
    streams: dict                 # split -> 1-D int32 ids
    stopword_ids: list[int]       # masked out of the idea loss
    tokenizer_name: str = "book-bpe"
    stopwords_not_single_tokens: list[str] = field(default_factory=list)  # listed but not one token here: not masked

    @property
    def tokenizer(self):
        return load_tokenizer(self.tokenizer_dir)

    def blocks(self, split: str, profile: IdeaProfile) -> TokenBlocks:
        cap = profile.train_tokens if split == "train" else profile.eval_tokens
        return TokenBlocks.from_stream(self.streams[split], profile.size.block_size, profile.idea.window, cap)


def encode_lines(tokenizer, lines: Sequence[str], separator: bool = False, dtype=torch.int32) -> torch.Tensor:
    """``lines`` as one id stream (``eos`` after each line with ``separator``, when the tokeniser has one)."""
    encoded = tokenizer(list(lines), add_special_tokens=False)["input_ids"]
    eos = [tokenizer.eos_token_id] if separator and tokenizer.eos_token_id is not None else []
    return torch.tensor([i for row in encoded for i in row + eos], dtype=dtype)


def prepare_data(profile: IdeaProfile, runs_dir: str | Path | None = None) -> IdeaData:
    """Corpus -> BPE (trained once) -> id streams and the stopword ids of ``profile`` (an :class:`IdeaProfile`
    or :class:`IdeaRun`), cached under ``runs_dir/idea/`` in a folder named by a hash of what it holds."""
    runs_dir = Path(runs_dir) if runs_dir is not None else default_runs_dir(profile.name)
    splits: TextSplits = load_corpus(profile.dataset)
    bpe_lines = splits.train[: profile.bpe_lines]  # [:None]: every line
    gpt2 = None
    if profile.tokenizer == "gpt2":  # the authors': from the local cache or, with downloads allowed, the Hub
        from transformers import AutoTokenizer

        try:
            with quiet_transformers():
                gpt2 = AutoTokenizer.from_pretrained("gpt2", local_files_only=not downloads_allowed())
        except (OSError, ValueError):
            pass
    note = splits.note
    if profile.tokenizer == "gpt2" and gpt2 is None:
        note = (note + "; " if note else "") + (f"GPT-2's tokeniser is not available offline: a "
                                                f"{profile.vocab_size}-token byte-level BPE learnt on the training "
                                                "split replaces it")
    name = "gpt2" if gpt2 is not None else "book-bpe"
    key = fingerprint({"dataset": splits.dataset, "lines": lines_fingerprint(bpe_lines), "vocab": profile.vocab_size,
                       "train_tokens": profile.train_tokens, "eval_tokens": profile.eval_tokens, "tokenizer": name})
    folder = runs_dir / "idea" / f"tokenizer-{splits.dataset}-{name}-{profile.vocab_size}-{key}"
    # the chapters and the book's training ahead may prepare the same data at once: one does, the other waits
    with runs.run_lock(folder):
        if gpt2 is not None:
            gpt2.pad_token = gpt2.eos_token
            folder.mkdir(parents=True, exist_ok=True)
            gpt2.save_pretrained(str(folder))
            tokenizer = load_tokenizer(folder)
        else:
            tokenizer = bpe_tokenizer(bpe_lines, profile.vocab_size, folder)
        cache = folder / "ids.safetensors"
        if cache.is_file():
            streams = load_file(cache)
        else:
            streams = {}
            for split in ("train", "valid", "test"):
                lines = splits.split(split)
                cap = profile.train_tokens if split == "train" else profile.eval_tokens
                if cap is not None:  # encode only what is needed (about 8 characters per token is plenty)
                    lines = take_chars(lines, 10 * (cap + 1) + 10_000)
                streams[split] = encode_lines(tokenizer, lines)
            save_file(streams, cache)
    missing: list[str] = []
    if profile.idea.stopword_list:  # the words that are one token here (each of the authors' 18 is under GPT-2's)
        pieces = {word: tokenizer(word, add_special_tokens=False)["input_ids"] for word in profile.idea.stopword_list}
        stop = sorted({ids[0] for ids in pieces.values() if len(ids) == 1})
        missing = [word for word, ids in pieces.items() if len(ids) != 1]  # left unmasked, not masked in pieces
    else:
        stop = top_frequent_ids(streams["train"][: profile.train_tokens].long(), profile.idea.stopwords_top_n)
    return IdeaData(splits.dataset, splits.requested, note, folder, streams, stop, name, missing)


def take_chars(lines: Sequence[str], chars: int | None) -> list[str]:
    """The first lines of ``lines`` up to the one that reaches ``chars`` characters (all of them for None)."""
    before = itertools.accumulate((len(line) for line in lines), initial=0)  # the characters before each line
    return [line for line, n in zip(lines, before) if chars is None or n < chars]
