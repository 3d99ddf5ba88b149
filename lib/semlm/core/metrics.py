"""The book's evaluation metrics: perplexity (both papers), rates and intervals, paper B's domain retention and
diversity, and paper A's Table-1 metrics (Section 3.1, Appendices B and C; the controllability of its synthetic
sentences, Tables 2-4, is :mod:`semlm.fusion.metrics`).

Paper A's metrics derive from one pass that records, for every position whose *target* is a real
token (``LMTensors.scored``: not the ``<eos> -> <pad>`` position), the cross-entropy of the
gold next token (no label smoothing). Models, losses and the causal floors of
``semlm.fusion.leakage`` share that one denominator: text tokens and the final ``<eos>``.

* perplexity: exp(mean CE);
* seen-only perplexity: the same after dropping positions whose *target* is a
  held-out adjective (Appendix C; held-out words may still appear in the context);
* focus-token CE: mean CE over positions whose target is a given token (Table 6);
* semantic MSE: mean squared error of the auxiliary head over non-pad token-feature pairs.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import Iterable, Sequence

import torch
import torch.nn.functional as F

from semlm.data.dataset import LMTensors
from semlm.data.vocab import Vocabulary
from semlm.core.records import Interval
from semlm.core.precision import autocast

#: A block target that is no token (past the end of the text): never scored. Paper B's ``PAD_ID``.
NO_TARGET = -1

#: The tokens of the paper's Table 6 plus those the foundation issue asks for.
FOCUS_TOKENS: tuple[str, ...] = ("good", "great", "terrible", "slightly", "very", "!", "?", ",")


@dataclass
class TokenScores:
    """Per-position gold-token cross-entropy and the matching targets, scored positions only.

    ``pad_cross_entropy`` holds the CE of ``<pad>`` at the input-``<eos>`` positions (one per
    sentence when the tensors carry a trailing pad column): the extra target the authors'
    evaluation counts because it masks only pad *inputs*.
    """

    cross_entropy: torch.Tensor            # [N] float64
    targets: torch.Tensor                  # [N] long
    feature_squared_error: torch.Tensor | None  # [N'] mean over features at non-pad inputs, fusion only
    pad_cross_entropy: torch.Tensor | None = None  # [S] float64


@torch.no_grad()
def score_tokens(model: torch.nn.Module, data: LMTensors, batch_size: int = 256) -> TokenScores:
    model.eval()
    ce, tgt, sq, pad_ce = [], [], [], []
    for batch in data.batches(batch_size):
        out = model(batch.input_ids, batch.features, batch.mask)
        m, scored = batch.mask, batch.scored
        ce.append(F.cross_entropy(out.logits[scored], batch.targets[scored], reduction="none").double())
        tgt.append(batch.targets[scored])
        extra = m & ~scored  # input is a real token (<eos>), target is <pad>
        pad_ce.append(F.cross_entropy(out.logits[extra], batch.targets[extra], reduction="none").double())
        if out.feature_pred is not None:
            sq.append(((out.feature_pred[m] - batch.features[m]) ** 2).mean(-1).double())
    return TokenScores(torch.cat(ce), torch.cat(tgt), torch.cat(sq) if sq else None, torch.cat(pad_ce))


def perplexity_authors_denominator(scores: TokenScores, exclude_targets: Iterable[int] = ()) -> float:
    """exp(mean CE) with the ``<eos> -> <pad>`` targets counted too, as the authors' evaluation does.

    Their code pads every sentence to 28 tokens and masks pad *inputs* only, so the position
    whose input is ``<eos>`` and whose target is ``<pad>`` (one per sentence) enters the mean.
    A model trained on that target (theirs, and ours in the published setting) predicts it almost
    for free; our causal models are not trained on it, so it is counted here with cross-entropy 0 for
    every model, as the oracle of ``semlm.fusion.leakage`` does:
    the same CE sum over one more target per sentence. Shown only to compare with their numbers.
    """
    keep = _kept(scores, exclude_targets)
    n_pad = scores.pad_cross_entropy.numel() if scores.pad_cross_entropy is not None else 0
    return math.exp(scores.cross_entropy[keep].sum().item() / (int(keep.sum()) + n_pad))


def _kept(scores: TokenScores, exclude_targets: Iterable[int]) -> torch.Tensor:
    """The positions whose target is not in ``exclude_targets``."""
    return ~torch.isin(scores.targets, torch.tensor(sorted(set(exclude_targets)), dtype=torch.long))


def perplexity(source, data=None, *, alpha: float | None = None, exclude_targets: Iterable[int] = (),
               batch_size: int = 64) -> float:
    """Perplexity, exp(mean next-token cross-entropy): the one perplexity of the book.

    ``perplexity(scores)`` takes :class:`TokenScores`; ``perplexity(model, data)`` scores ``model``
    on ``data`` first: paper A's ``LMTensors`` (through :func:`score_tokens`), or blocks of token
    ids (paper B: any data whose ``batches(batch_size)`` yield ``inputs`` and ``targets``, with
    :data:`NO_TARGET` past the end of the text), for any causal LM whose output has
    ``logits`` (the idea-gated GPT, a LoRA model, a transformers model). ``alpha`` is passed to
    idea-gated models (``alpha=0``: the ungated logits). Positions whose target is in
    ``exclude_targets`` are dropped (NaN if none remain). The model is left in the mode it was in.
    """
    if isinstance(source, TokenScores):
        if data is not None:
            raise TypeError("perplexity(scores) takes no data; pass the targets to drop as exclude_targets=")
        scores = source
    else:
        was_training = source.training
        try:
            if not isinstance(data, LMTensors):
                return _block_perplexity(source, data, alpha, batch_size)
            scores = score_tokens(source, data)
        finally:
            source.train(was_training)
    keep = _kept(scores, exclude_targets)
    return math.exp(scores.cross_entropy[keep].mean().item()) if keep.any() else float("nan")


@torch.no_grad()
def _block_perplexity(model: torch.nn.Module, blocks, alpha: float | None, batch_size: int) -> float:
    model.eval()
    device = next(model.parameters()).device
    kwargs = {} if alpha is None else {"alpha": alpha}
    total, count = 0.0, 0
    for batch in blocks.batches(batch_size):
        inputs, targets = batch.inputs.to(device), batch.targets.to(device)
        with autocast("bf16_on_cuda", device):  # bf16 on a GPU, as paper B's training
            logits = model(inputs, **kwargs).logits
        total += F.cross_entropy(logits.float().flatten(0, 1), targets.flatten(), ignore_index=NO_TARGET,
                                 reduction="sum").item()
        count += int((targets != NO_TARGET).sum())
    return math.exp(total / max(count, 1))


def focus_cross_entropy(scores: TokenScores, vocab: Vocabulary,
                        tokens: Sequence[str] = FOCUS_TOKENS) -> dict[str, float]:
    """Mean CE (nats) per focus token, over positions where it is the gold target; NaN if it never is."""
    out = {}
    for token in tokens:
        hits = scores.targets == vocab.id(token)
        out[token] = scores.cross_entropy[hits].mean().item() if hits.any() else float("nan")
    return out


def evaluate_language_model(model: torch.nn.Module, data: LMTensors, vocab: Vocabulary,
                            held_out_ids: Iterable[int], focus_tokens: Sequence[str] = FOCUS_TOKENS,
                            never_scored: Iterable[int] = ()) -> dict:
    """Table-1 metrics of one model on one split, as a JSON-ready dict.

    ``never_scored`` are targets left out of every perplexity (control codes: inputs, not text).
    """
    scores = score_tokens(model, data)
    never_scored = list(never_scored)
    unseen = list(held_out_ids) + never_scored
    result = {
        "ppl": perplexity(scores, exclude_targets=never_scored),
        "ppl_seen_only": perplexity(scores, exclude_targets=unseen),
        "focus_ce": focus_cross_entropy(scores, vocab, focus_tokens),
        "n_tokens": int(scores.targets.numel()),
        "ppl_authors_denominator": perplexity_authors_denominator(scores, never_scored),
        "ppl_seen_only_authors_denominator": perplexity_authors_denominator(scores, unseen),
        "n_pad_targets": int(scores.pad_cross_entropy.numel()) if scores.pad_cross_entropy is not None else 0,
    }
    if scores.feature_squared_error is not None:
        result["sem_mse"] = scores.feature_squared_error.mean().item()
    return result


# --- rates -------------------------------------------------------------------------------------

def proportion(successes: int, n: int) -> dict:
    """``{value, ci_low, ci_high, k, n}``: :meth:`semlm.core.records.Interval.of_proportion` as JSON."""
    return Interval.of_proportion(successes, n).to_dict()


# --- statistics over seeds / samples ---------------------------------------------------------

def mean_interval(values: Sequence[float], bounds: tuple[float, float] | None = None) -> dict:
    """``{mean, ci_low, ci_high, values}``: :meth:`semlm.core.records.Interval.of_mean` (two-sided 95%
    Student t over independent replicates, e.g. seeds) as JSON; ``bounds`` clips the interval."""
    return Interval.of_mean(values, bounds).to_dict()


# --- domain retention and diversity (paper B, Section 5; the authors' evaluation script) -------

def words_of(text: str) -> list[str]:
    """Lower-cased words of a generation: letters, digits and inner hyphens/apostrophes; WikiText's
    `` @-@ `` hyphen marker is joined back first."""
    text = text.replace(" @-@ ", "-").replace(" @,@ ", ",").replace(" @.@ ", ".")
    return re.findall(r"[a-z0-9]+(?:[-'][a-z0-9]+)*", text.lower())


def stickiness(words: Sequence[str], domain_terms: Iterable[str], stopwords: Iterable[str]) -> float:
    """Domain-word hits / content words (stopwords removed); NaN if there are no content words."""
    stop = set(stopwords)
    content = [w for w in words if w not in stop]
    terms = set(domain_terms)
    return sum(w in terms for w in content) / len(content) if content else float("nan")


def unique_domain_density(words: Sequence[str], domain_terms: Iterable[str]) -> float:
    """Distinct domain terms per 100 words (NaN for an empty text)."""
    terms = set(domain_terms)
    return 100.0 * len({w for w in words if w in terms}) / len(words) if words else float("nan")


def _ngrams(tokens: Sequence, n: int) -> list[tuple]:
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    return [tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]


def distinct_n(tokens: Sequence, n: int = 2) -> float:
    """Distinct n-grams / n-grams of one text (NaN when shorter than n)."""
    grams = _ngrams(tokens, n)
    return len(set(grams)) / len(grams) if grams else float("nan")


def repetition_rate(tokens: Sequence, n: int = 4) -> float:
    """Share of n-grams of a text that already occurred earlier in it (0 = no repeats, near 1 = a loop)."""
    grams = _ngrams(tokens, n)  # every n-gram but the first occurrence of each is a repeat
    return (len(grams) - len(set(grams))) / len(grams) if grams else float("nan")


def summarise(values: Sequence[float]) -> dict:
    """``{mean, ci_low, ci_high, n}``: :meth:`~semlm.core.records.Interval.of_mean` of the finite values (NaNs,
    e.g. empty texts, are dropped; ``n`` counts what is left)."""
    finite = [float(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    if not finite:
        return Interval(float("nan"), float("nan"), float("nan"), 0).to_dict()
    return replace(Interval.of_mean(finite), values=None).to_dict()
