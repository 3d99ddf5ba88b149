"""Encoded corpora as tensors: inputs, next-token targets and the precomputed semantic matrix."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from semlm.data.vocab import Vocabulary


@dataclass
class LMTensors:
    """Teacher-forcing tensors for a corpus, padded to the longest sentence.

    ``input_ids[b, t]`` is token t of ``<bos> w1 .. wn <eos>`` (without the final <eos>), ``targets[b, t]`` the
    token after it and ``features[b, t]`` the semantic vector of ``input_ids[b, t]``; ``mask`` marks non-pad inputs
    (attention and the feature loss). ``scored`` (default: ``mask``) marks the positions whose *target* is a real
    token: the ``<eos> -> <pad>`` position is no prediction of text, so no perplexity or floor counts it, nor any
    loss but the published setting's (``encode_corpus(score_eos_pad=True)``, as the authors' loss).

    Mini-batches are **trimmed** to their longest real row (padding only trails a sentence); a causal model's
    outputs do not depend on later columns and the non-causal one masks padded keys, so trimming only skips work.
    ``bucket_batches > 0`` also **length-buckets** shuffled batches (:meth:`batches`): off by default, because it
    moved the synthetic task's validation perplexity (``semlm.fusion.bench.compare_training_variants``: its two
    sentence lengths make every bucketed batch all-short or all-long); SST-2 turns it on.
    """

    input_ids: torch.Tensor  # [N, L] long
    targets: torch.Tensor    # [N, L] long
    features: torch.Tensor   # [N, L, F] float
    mask: torch.Tensor       # [N, L] bool
    scored: torch.Tensor | None = None  # [N, L] bool: mask & (target is not <pad>)
    #: Length bucketing of shuffled batches: pools of this many batches are sorted by length
    #: (0 = off, the default; 50 is what SST-2 uses: pools of 50 batches still mix the corpus).
    bucket_batches: int = 0

    def __post_init__(self):
        if self.scored is None:
            self.scored = self.mask
        if isinstance(self.bucket_batches, bool) or not isinstance(self.bucket_batches, int) or self.bucket_batches < 0:
            raise ValueError(f"bucket_batches must be an int >= 0 (0 = no length bucketing), got {self.bucket_batches!r}")

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    @property
    def lengths(self) -> torch.Tensor:
        """[N] number of real (non-pad) input positions of each row."""
        return self.mask.sum(1)

    def batch(self, index: torch.Tensor | slice) -> "LMTensors":
        """The rows ``index``, trimmed to the longest real row among them (at least one column)."""
        mask = self.mask[index]
        length = max(int(mask.sum(1).max()), 1) if mask.numel() else mask.shape[1]
        return dataclasses.replace(self, input_ids=self.input_ids[index][:, :length],
                                   targets=self.targets[index][:, :length],
                                   features=self.features[index][:, :length], mask=mask[:, :length],
                                   scored=self.scored[index][:, :length])

    def batches(self, batch_size: int, generator: torch.Generator | None = None, shuffle: bool = False):
        """Yield trimmed mini-batches; with ``shuffle`` the order comes from ``generator`` (reproducible).

        Without ``shuffle``: consecutive rows, in order (evaluation). With ``shuffle`` and
        ``bucket_batches > 0`` (length bucketing): a random permutation is cut into pools of
        ``bucket_batches`` batches, each pool is sorted by length (stable) and cut into
        batches, and the batches of all pools are shuffled again. Every row is still seen
        once per epoch in a random batch, but rows of similar length share a batch, so
        little padding is computed. Both draws come from ``generator``: the same generator
        state gives the same batches.
        """
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if not shuffle:
            for start in range(0, len(self), batch_size):
                yield self.batch(slice(start, start + batch_size))
            return
        order = torch.randperm(len(self), generator=generator)
        if not self.bucket_batches:
            for start in range(0, len(self), batch_size):
                yield self.batch(order[start:start + batch_size])
            return
        lengths, pool = self.lengths, batch_size * self.bucket_batches
        chunks = []
        for start in range(0, len(order), pool):
            part = order[start:start + pool]
            part = part[torch.argsort(lengths[part], stable=True)]
            chunks += [part[i:i + batch_size] for i in range(0, len(part), batch_size)]
        for j in torch.randperm(len(chunks), generator=generator).tolist():
            yield self.batch(chunks[j])


def encode_corpus(sentences: Sequence[Sequence[str]], vocab: Vocabulary,
                  featurize: Callable[[torch.Tensor], torch.Tensor], trailing_pad: bool = False,
                  score_eos_pad: bool = False) -> LMTensors:
    """Encode word lists as ``<bos> .. <eos>``, pad, and compute features once for the whole corpus.

    ``trailing_pad=True`` adds one padding column, so every row (the longest included) has
    the ``<eos> -> <pad>`` position that a fixed-length padding (the authors' 28) always has;
    it is never scored, but it lets ``semlm.core.metrics`` report the authors' denominator.
    ``score_eos_pad=True`` (implies ``trailing_pad``) scores that position too: ``scored``
    equals ``mask``, as in the authors' loss, which masks only pad *inputs*. It is for the
    published setting's *training* data (its models then learn ``<eos> -> <pad>`` and every
    training row has the ``<eos>`` input, as every validation row does); never for evaluation.
    """
    trailing_pad = trailing_pad or score_eos_pad
    if not sentences:
        raise ValueError("cannot encode an empty corpus")
    encoded = [vocab.encode(s) for s in sentences]
    length = max(len(e) for e in encoded) + int(trailing_pad)
    full = torch.full((len(encoded), length), vocab.pad_id, dtype=torch.long)
    for row, ids in enumerate(encoded):
        full[row, :len(ids)] = torch.tensor(ids)
    input_ids, targets = full[:, :-1].contiguous(), full[:, 1:].contiguous()
    mask = input_ids != vocab.pad_id
    scored = mask if score_eos_pad else mask & (targets != vocab.pad_id)
    return LMTensors(input_ids, targets, featurize(input_ids), mask, scored)
