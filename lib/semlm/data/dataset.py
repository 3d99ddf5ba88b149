"""Encoded corpora as tensors: inputs, next-token targets and the precomputed semantic matrix."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from .vocab import Vocabulary


@dataclass
class LMTensors:
    """Teacher-forcing tensors for a corpus, padded to the longest sentence.

    ``input_ids[b, t]`` is token t of ``<bos> w1 .. wn <eos>`` (without the final <eos>),
    ``targets[b, t]`` the token after it and ``features[b, t]`` the semantic vector of
    ``input_ids[b, t]``; ``mask`` marks non-pad inputs (attention and the feature loss).
    ``scored`` marks the positions whose *target* is a real token: the position after
    ``<eos>`` (input ``<eos>``, target ``<pad>``) is an input but not a prediction of text,
    so no loss, perplexity or floor counts it. Without ``scored`` it defaults to ``mask``.
    """

    input_ids: torch.Tensor  # [N, L] long
    targets: torch.Tensor    # [N, L] long
    features: torch.Tensor   # [N, L, F] float
    mask: torch.Tensor       # [N, L] bool
    scored: torch.Tensor | None = None  # [N, L] bool: mask & (target is not <pad>)

    def __post_init__(self):
        if self.scored is None:
            self.scored = self.mask

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    def batch(self, index: torch.Tensor | slice) -> "LMTensors":
        return LMTensors(self.input_ids[index], self.targets[index], self.features[index], self.mask[index],
                         self.scored[index])

    def batches(self, batch_size: int, generator: torch.Generator | None = None, shuffle: bool = False):
        """Yield mini-batches; with ``shuffle`` the order comes from ``generator`` (reproducible)."""
        order = torch.randperm(len(self), generator=generator) if shuffle else torch.arange(len(self))
        for start in range(0, len(self), batch_size):
            yield self.batch(order[start:start + batch_size])


def encode_corpus(sentences: Sequence[Sequence[str]], vocab: Vocabulary,
                  featurize: Callable[[torch.Tensor], torch.Tensor], trailing_pad: bool = False) -> LMTensors:
    """Encode word lists as ``<bos> .. <eos>``, pad, and compute features once for the whole corpus.

    ``trailing_pad=True`` adds one padding column, so every row (the longest included) has
    the ``<eos> -> <pad>`` position that a fixed-length padding (the authors' 28) always has;
    it is never scored, but it lets ``semlm.metrics`` report the authors' denominator.
    """
    if not sentences:
        raise ValueError("cannot encode an empty corpus")
    encoded = [vocab.encode(s) for s in sentences]
    length = max(len(e) for e in encoded) + int(trailing_pad)
    full = torch.full((len(encoded), length), vocab.pad_id, dtype=torch.long)
    for row, ids in enumerate(encoded):
        full[row, :len(ids)] = torch.tensor(ids)
    input_ids, targets = full[:, :-1].contiguous(), full[:, 1:].contiguous()
    mask = input_ids != vocab.pad_id
    return LMTensors(input_ids, targets, featurize(input_ids), mask, mask & (targets != vocab.pad_id))
