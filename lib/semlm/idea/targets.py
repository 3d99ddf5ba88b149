"""Idea-head targets and loss (paper B, Section 3: the bag-of-words objective).

For position t the idea head predicts *which* tokens occur among the next K tokens
(not their order): the target is the multi-hot vector

    y_idea[t, v] = 1  if v in {x_{t+1}, ..., x_{t+K}}                         (bag of the window)

built from the ``future`` ids of a block, ``future[:, j] = x_{j+1}``, which may run past the
block by up to K - 1 tokens (as in the authors' data pipeline) and is padded with
``PAD_ID = -1`` where the text ends. Everything is one ``unfold`` + ``scatter`` on the batch:
no Python loop over positions.

Stopword masking (the authors' v1 ``train.py``, github.com/DarshanFofadiya/idea-gated-transformers):
the targets keep the true bag, and the per-vocabulary BCE is multiplied by a vocabulary mask
``m`` that is 0 at a fixed list of frequent tokens (" the", ",", "." ...), so the idea BCE sends
those columns no gradient: the head is neither trained to predict them nor trained to believe they
never occur. They are not frozen, though: the gate adds alpha * log p(idea) to the token logits,
so the token cross-entropy still sends gradient into every idea column that is not clamped at the
floor, stopwords included. :func:`vocabulary_mask` builds ``m``; ids come from an explicit list (the authors list 18
strings) or from the N most frequent training tokens (:func:`top_frequent_ids`; the paper says
"top-N").

The loss is BCE with logits, optionally with ``pos_weight`` on the rare positives, masked by ``m``
and either summed over the unmasked vocabulary and averaged over positions (authors' v1, weight
0.01) or averaged over both (v2, weight 0.1; the vocabulary mean divides by the number of
unmasked columns, ``sum(m)``).
"""

from __future__ import annotations

from typing import Iterable, Sequence

import torch
import torch.nn.functional as F

PAD_ID = -1
REDUCTIONS: tuple[str, ...] = ("sum_vocab", "mean")


def top_frequent_ids(token_ids: torch.Tensor, n: int, exclude: Iterable[int] = ()) -> list[int]:
    """The ``n`` most frequent ids of ``token_ids`` (ties broken by the smaller id), skipping ``exclude``."""
    if n < 0:
        raise ValueError(f"number of stopwords must be >= 0, got {n}")
    ids = token_ids[token_ids >= 0].flatten()
    exclude = [i for i in exclude if i >= 0]
    counts = torch.bincount(ids, minlength=max(exclude, default=-1) + 1)
    if exclude:
        counts[exclude] = 0
    # stable sort on -count keeps the smaller id first among equal counts (deterministic)
    order = torch.sort(-counts, stable=True).indices
    order = order[counts[order] > 0]
    return order[:n].tolist()


def vocabulary_mask(vocab_size: int, stopword_ids: Sequence[int] | torch.Tensor = (),
                    device: torch.device | str | None = None) -> torch.Tensor:
    """``[V]`` float mask: 1 for every vocabulary column that the idea loss counts, 0 at ``stopword_ids``."""
    if vocab_size < 1:
        raise ValueError(f"vocab_size must be >= 1, got {vocab_size}")
    stop = torch.as_tensor(stopword_ids, dtype=torch.long, device=device)
    if stop.numel() and (stop.min() < 0 or stop.max() >= vocab_size):
        raise ValueError(f"stopword ids must be in [0, {vocab_size}), got {stop.tolist()}")
    mask = torch.ones(vocab_size, device=device)
    if stop.numel():
        mask[stop] = 0.0
    return mask


def idea_targets(future: torch.Tensor, window: int, vocab_size: int, length: int | None = None) -> torch.Tensor:
    """Multi-hot bags ``[B, L, V]`` of the next ``window`` tokens for each of ``length`` positions.

    ``future``: [B, T] ids with ``future[:, j]`` the (j+1)-th next token of position 0, i.e. the
    next-token targets continued past the block; ``PAD_ID`` marks "no token". ``length``
    defaults to ``T - window + 1`` (every position sees a full window); positions near the end
    of ``future`` get truncated windows. Stopwords stay in the bag (the loss masks their columns).
    """
    if window < 1:
        raise ValueError(f"window K must be >= 1, got {window}")
    if future.dim() != 2:
        raise ValueError(f"future must be [batch, time], got shape {tuple(future.shape)}")
    B, T = future.shape
    length = T - window + 1 if length is None else length
    if not 1 <= length <= T:
        raise ValueError(f"length must be in 1..{T} for future of length {T}, got {length}")
    if future.numel() and (future.max() >= vocab_size or future.min() < PAD_ID):
        raise ValueError(f"future ids must be in [0, {vocab_size}) or {PAD_ID} (padding)")
    need = length + window - 1
    padded = F.pad(future, (0, max(0, need - T)), value=PAD_ID)[:, :need]
    windows = padded.unfold(1, window, 1)                      # [B, L, K]
    index = torch.where(windows == PAD_ID, vocab_size, windows)  # padding goes to a spare column
    bags = torch.zeros(B, length, vocab_size + 1, device=future.device)
    bags.scatter_(2, index, 1.0)
    return bags[..., :vocab_size]


def idea_bce(idea_logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor | None = None,
             pos_weight: float | None = None, reduction: str = "sum_vocab",
             vocab_mask: torch.Tensor | None = None) -> torch.Tensor:
    """BCE-with-logits of the idea head against multi-hot targets.

    ``mask`` [B, L] marks the positions that count (all by default); ``vocab_mask`` [V] the
    vocabulary columns that count (:func:`vocabulary_mask`; all by default). ``reduction``:
    ``"sum_vocab"`` sums over the counted columns and averages over positions (authors' v1);
    ``"mean"`` averages over both (v2), i.e. divides the column sum by ``vocab_mask.sum()``.
    """
    if reduction not in REDUCTIONS:
        raise ValueError(f"unknown reduction {reduction!r}; choose one of: {', '.join(REDUCTIONS)}")
    if idea_logits.shape != targets.shape:
        raise ValueError(f"idea logits {tuple(idea_logits.shape)} and targets {tuple(targets.shape)} differ in shape")
    weight = None if pos_weight is None else torch.tensor(float(pos_weight), device=idea_logits.device)
    per_entry = F.binary_cross_entropy_with_logits(idea_logits.float(), targets.float(), pos_weight=weight,
                                                   reduction="none")
    columns = per_entry.shape[-1]
    if vocab_mask is not None:
        per_entry = per_entry * vocab_mask.to(per_entry.device, per_entry.dtype)
        columns = vocab_mask.sum().clamp_min(1.0)
    per_position = per_entry.sum(-1) if reduction == "sum_vocab" else per_entry.sum(-1) / columns
    if mask is None:
        return per_position.mean()
    mask = mask.to(per_position.dtype)
    return (per_position * mask).sum() / mask.sum().clamp_min(1.0)


def window_ids(future: torch.Tensor, window: int, length: int) -> torch.Tensor:
    """The distinct ids of each position's window, as ``[B, L, K]`` with ``PAD_ID`` elsewhere.

    The sparse form of :func:`idea_targets`: ``idea_targets(...)[b, t, v] == 1`` exactly when
    ``v`` is in ``window_ids(...)[b, t]``. A repeated id in a window is kept once.
    """
    if window < 1:
        raise ValueError(f"window K must be >= 1, got {window}")
    B, T = future.shape
    need = length + window - 1
    padded = F.pad(future, (0, max(0, need - T)), value=PAD_ID)[:, :need]
    windows = padded.unfold(1, window, 1).sort(dim=-1).values          # [B, L, K], pads first
    repeated = torch.zeros_like(windows, dtype=torch.bool)
    repeated[..., 1:] = windows[..., 1:] == windows[..., :-1]
    return windows.masked_fill(repeated, PAD_ID)


class _SparseBCERows(torch.autograd.Function):
    """Per-position idea BCE from window ids, ``[..., V] -> [...]``, with a hand-written backward.

    forward:  sum_v m_v softplus(z_v) + sum_{v in window} m_v (w softplus(-z_v) - softplus(z_v))
    backward: d/dz_v = g (m_v sigmoid(z_v)) at every column, plus g m_v (-w (1 - sigmoid(z_v)) - sigmoid(z_v))
              at the window's ids, with g the incoming gradient of the position.
    Autograd would expand the row gradient, multiply by the mask, run softplus' backward, scatter
    the window part into a fresh zero [B, T, V] tensor and add the two: five dense passes. Here it
    is one sigmoid, one in-place product, the masked columns zeroed (a 0/1 mask on the CPU; else a
    second product) and a scatter-add of K entries per position.
    """

    @staticmethod
    def forward(ctx, idea_logits, positives, vocab_mask, pos_weight):
        z = idea_logits.float()
        index = positives.clamp_min(0)
        valid = (positives != PAD_ID).to(z.dtype)
        if vocab_mask is not None:
            negatives = F.softplus(z) @ vocab_mask                         # [...]: masked sum over V
            valid = valid * vocab_mask[index]                               # masked positives count for nothing
        else:
            negatives = F.softplus(z).sum(-1)
        z_pos = z.gather(-1, index)                                         # [..., K]
        correction = (pos_weight * F.softplus(-z_pos) - F.softplus(z_pos)) * valid
        ctx.save_for_backward(idea_logits, index, valid, z_pos, vocab_mask)
        ctx.pos_weight, ctx.masked_columns = pos_weight, None
        if vocab_mask is not None and vocab_mask.device.type == "cpu" and bool(((vocab_mask == 0) | (vocab_mask == 1)).all()):
            ctx.masked_columns = (vocab_mask == 0).nonzero().flatten()
        return negatives + correction.sum(-1)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_rows):
        idea_logits, index, valid, z_pos, vocab_mask = ctx.saved_tensors
        if not ctx.needs_input_grad[0]:
            return None, None, None, None
        grad_rows = grad_rows.float().unsqueeze(-1)                         # [..., 1]
        grad = torch.sigmoid(idea_logits.float()).mul_(grad_rows)
        if ctx.masked_columns is not None:      # a 0/1 mask: zero its few masked columns, not a dense product
            grad.index_fill_(-1, ctx.masked_columns, 0.0)
        elif vocab_mask is not None:
            grad.mul_(vocab_mask)
        p_pos = torch.sigmoid(z_pos)
        grad.scatter_add_(-1, index, (-ctx.pos_weight * (1.0 - p_pos) - p_pos) * valid * grad_rows)
        return grad.to(idea_logits.dtype), None, None, None


def idea_bce_sparse(idea_logits: torch.Tensor, positives: torch.Tensor, mask: torch.Tensor | None = None,
                    pos_weight: float | None = None, reduction: str = "sum_vocab",
                    vocab_mask: torch.Tensor | None = None) -> torch.Tensor:
    """:func:`idea_bce` computed from :func:`window_ids` instead of a dense ``[B, L, V]`` target.

    Per position, BCE summed over the vocabulary is sum_v softplus(z_v) (every token as a negative)
    plus, for each positive v, w * softplus(-z_v) - softplus(z_v). One elementwise pass over the
    logits and a gather of K entries, instead of several dense passes: the same value (a test
    checks it), at a fraction of the cost; the backward is written out (:class:`_SparseBCERows`) and
    a test checks it against autograd through the dense :func:`idea_bce`. With ``vocab_mask`` both
    sums run over the counted columns only (masked columns contribute nothing, so their gradient is
    exactly zero).
    """
    if reduction not in REDUCTIONS:
        raise ValueError(f"unknown reduction {reduction!r}; choose one of: {', '.join(REDUCTIONS)}")
    if positives.shape[:-1] != idea_logits.shape[:-1]:
        raise ValueError(f"window ids {tuple(positives.shape)} do not match idea logits {tuple(idea_logits.shape)}; "
                         "build them with window_ids(future, window, length)")
    w = 1.0 if pos_weight is None else float(pos_weight)
    columns = idea_logits.shape[-1]
    m = None
    if vocab_mask is not None:
        m = vocab_mask.to(idea_logits.device, torch.float32)
        columns = m.sum().clamp_min(1.0)
    per_position = _SparseBCERows.apply(idea_logits, positives, m, w)
    if reduction == "mean":
        per_position = per_position / columns
    if mask is None:
        return per_position.mean()
    mask = mask.to(per_position.dtype)
    return (per_position * mask).sum() / mask.sum().clamp_min(1.0)


# --- the training objective (paper B, Section 3) ------------------------------------------------


def idea_gated_loss(gated_logits: torch.Tensor, targets: torch.Tensor, idea_logits: torch.Tensor | None,
                    positives: torch.Tensor | None, vocab_mask: torch.Tensor | None, idea_weight: float,
                    pos_weight: float | None = None, reduction: str = "sum_vocab",
                    ignore_index: int = -1) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Paper B's training objective for one batch; returns ``(total, token_ce, idea_bce)``.

        L = CE(z_final, x_{t+1}) + lambda * L_idea

        z_final = z_token + G_alpha(sigmoid(z_idea))          (the model's gated logits)
        L_idea  = 1/|T| sum_t  sum_v m_v BCE_w(z_idea[t, v], y[t, v])            ("sum_vocab", v1)
             or 1/|T| sum_t (sum_v m_v BCE_w(z_idea[t, v], y[t, v])) / sum_v m_v   ("mean", v2)

    with y[t] the bag of the next K tokens (stopwords included), m the vocabulary mask (0 at the
    stopwords, so the idea BCE sends their columns no gradient; the authors' v1 ``train.py``; the
    gate still passes token-CE gradient into every unclamped idea column), w = ``pos_weight``
    on the positives, and T the scored (non-``ignore_index``) positions. The CE is on the **gated**
    logits, so the gate is trained end to end. The gate strength alpha is the caller's: it runs the
    model with alpha ramped linearly from 0 (``semlm.idea.wikitext_experiment.alpha_at``) and passes the
    resulting ``gated_logits`` here. ``positives`` are the window ids of
    :func:`semlm.idea.targets.window_ids`; with ``idea_logits=None`` (the plain GPT) the loss is the CE.
    """
    ce = F.cross_entropy(gated_logits.float().flatten(0, 1), targets.flatten(), ignore_index=ignore_index)
    if idea_logits is None:
        return ce, ce, None
    if positives is None:
        raise ValueError("an idea-gated model needs the window ids (positives) of its idea targets")
    bce = idea_bce_sparse(idea_logits, positives, targets != ignore_index, pos_weight, reduction, vocab_mask)
    return ce + idea_weight * bce, ce, bce
