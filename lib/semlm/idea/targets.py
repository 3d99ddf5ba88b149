"""Idea-head targets and loss (paper B, Section 3: the bag-of-words objective).

For position t the idea head predicts *which* tokens occur among the next K tokens (not their order):

    y_idea[t, v] = 1  if v in {x_{t+1}, ..., x_{t+K}}                         (bag of the window)

built from a block's ``future`` ids, ``future[:, j] = x_{j+1}``, which may run up to K - 1 tokens past the
block (as in the authors' pipeline) and hold ``NO_TARGET`` where the text ends; one ``unfold`` + ``scatter``.

Stopwords (the authors' v1 ``train.py``): the targets keep the true bag, and the per-vocabulary BCE is
multiplied by a mask ``m`` (:func:`vocabulary_mask`) that is 0 at a fixed list of frequent tokens, so the idea
BCE sends those columns no gradient (the gate's token CE still does). The loss is BCE with logits, optionally
with ``pos_weight`` on the positives, summed over the unmasked vocabulary and averaged over positions (v1,
weight 0.01) or averaged over both (v2, weight 0.1).
"""

from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F

from semlm.core.metrics import NO_TARGET
from semlm.idea.model import IdeaGate
from semlm.idea.profiles import IDEA_LOSS_REDUCTIONS


def top_frequent_ids(token_ids: torch.Tensor, n: int) -> list[int]:
    """The ``n`` most frequent ids of ``token_ids`` (ties broken by the smaller id; ``NO_TARGET`` skipped)."""
    if n < 0:
        raise ValueError(f"number of stopwords must be >= 0, got {n}")
    counts = torch.bincount(token_ids[token_ids >= 0].flatten())
    # stable sort on -count keeps the smaller id first among equal counts (deterministic)
    order = torch.sort(-counts, stable=True).indices
    return order[counts[order] > 0][:n].tolist()


def vocabulary_mask(vocab_size: int, stopword_ids: Sequence[int] | torch.Tensor = (),
                    device: torch.device | str | None = None) -> torch.Tensor:
    """``[V]`` float mask: 1 for every vocabulary column that the idea loss counts, 0 at ``stopword_ids``."""
    if vocab_size < 1:
        raise ValueError(f"vocab_size must be >= 1, got {vocab_size}")
    stop = torch.as_tensor(stopword_ids, dtype=torch.long, device=device)
    if stop.numel() and (stop.min() < 0 or stop.max() >= vocab_size):
        raise ValueError(f"stopword ids must be in [0, {vocab_size}), got {stop.tolist()}")
    mask = torch.ones(vocab_size, device=device)
    mask[stop] = 0.0
    return mask


def _windows(future: torch.Tensor, window: int, length: int | None) -> torch.Tensor:
    """``[B, length, K]``: the next ``window`` ids of each position (default length ``T - window + 1``: every
    window full), ``NO_TARGET`` past the end of ``future`` [B, T]."""
    if window < 1:
        raise ValueError(f"window K must be >= 1, got {window}")
    T = future.shape[1]
    length = T - window + 1 if length is None else length
    if not 1 <= length <= T:
        raise ValueError(f"length must be in 1..{T} for future of length {T}, got {length}")
    need = length + window - 1
    return F.pad(future, (0, max(0, need - T)), value=NO_TARGET)[:, :need].unfold(1, window, 1)


def _check_reduction(reduction: str) -> None:
    if reduction not in IDEA_LOSS_REDUCTIONS:
        raise ValueError(f"unknown reduction {reduction!r}; choose one of: {', '.join(IDEA_LOSS_REDUCTIONS)}")


def _check_positives(positives: torch.Tensor, idea_logits: torch.Tensor) -> None:
    if positives.shape[:-1] != idea_logits.shape[:-1]:
        raise ValueError(f"window ids {tuple(positives.shape)} do not match idea logits {tuple(idea_logits.shape)}; "
                         "build them with window_ids(future, window, length)")


def idea_targets(future: torch.Tensor, window: int, vocab_size: int, length: int | None = None) -> torch.Tensor:
    """Multi-hot bags ``[B, L, V]`` of the next ``window`` tokens of each of ``length`` positions (default: every
    window full) from ``future`` [B, T]; later positions get truncated windows."""
    if future.dim() != 2:
        raise ValueError(f"future must be [batch, time], got shape {tuple(future.shape)}")
    windows = _windows(future, window, length)
    if future.numel() and (future.max() >= vocab_size or future.min() < NO_TARGET):
        raise ValueError(f"future ids must be in [0, {vocab_size}) or {NO_TARGET} (padding)")
    index = torch.where(windows == NO_TARGET, vocab_size, windows)  # padding goes to a spare column
    bags = torch.zeros(*windows.shape[:2], vocab_size + 1, device=future.device)
    bags.scatter_(2, index, 1.0)
    return bags[..., :vocab_size]


def window_ids(future: torch.Tensor, window: int, length: int) -> torch.Tensor:
    """The distinct ids of each position's window, ``[B, L, K]`` with ``NO_TARGET`` elsewhere: the sparse form of
    :func:`idea_targets` (``idea_targets(...)[b, t, v] == 1`` exactly when ``v`` is in ``window_ids(...)[b, t]``)."""
    windows = _windows(future, window, length).sort(dim=-1).values          # pads first
    repeated = torch.zeros_like(windows, dtype=torch.bool)
    repeated[..., 1:] = windows[..., 1:] == windows[..., :-1]
    return windows.masked_fill(repeated, NO_TARGET)


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
        valid = (positives != NO_TARGET).to(z.dtype)
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
    """BCE-with-logits of the idea head against the bags of :func:`window_ids` ``positives``, averaged over the
    positions of ``mask`` [B, L] (all by default), over the columns of ``vocab_mask`` [V] summed (``"sum_vocab"``,
    v1) or averaged (``"mean"``, v2). Per position sum_v softplus(z_v) plus, for each positive v,
    w softplus(-z_v) - softplus(z_v): one pass over the logits and a gather of K entries (:class:`_SparseBCERows`;
    tested equal to the dense BCE against :func:`idea_targets`)."""
    _check_reduction(reduction)
    _check_positives(positives, idea_logits)
    w = 1.0 if pos_weight is None else float(pos_weight)
    m = None if vocab_mask is None else vocab_mask.to(idea_logits.device, torch.float32)
    columns = idea_logits.shape[-1] if m is None else m.sum().clamp_min(1.0)
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

    with y[t] the bag of the next K tokens, m the vocabulary mask, w = ``pos_weight`` and T the scored positions.
    The CE is on the **gated** logits (the caller's, at its alpha), so the gate trains end to end; ``positives``
    are :func:`window_ids`; with ``idea_logits=None`` (the plain GPT) the loss is the CE.
    """
    ce = F.cross_entropy(gated_logits.float().flatten(0, 1), targets.flatten(), ignore_index=ignore_index)
    if idea_logits is None:
        return ce, ce, None
    if positives is None:
        raise ValueError("an idea-gated model needs the window ids (positives) of its idea targets")
    bce = idea_bce_sparse(idea_logits, positives, targets != ignore_index, pos_weight, reduction, vocab_mask)
    return ce + idea_weight * bce, ce, bce


# --- the same objective in plain autograd, for torch.compile on a GPU -----------------------------


def idea_gated_loss_autograd(token_logits: torch.Tensor, idea_logits: torch.Tensor | None, alpha: torch.Tensor,
                             beta: float, variant: str, eps: float, targets: torch.Tensor,
                             positives: torch.Tensor | None, vocab_mask: torch.Tensor | None, idea_weight: float,
                             pos_weight: float | None = None, reduction: str = "sum_vocab",
                             ignore_index: int = -1) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """The gate, the token CE and the idea BCE of :func:`idea_gated_loss` in element-wise torch ops only.

    No custom autograd function and no branch on a tensor's value, so ``torch.compile`` fuses it into a few
    kernels; ``alpha`` is a 0-d tensor (the ramp does not recompile). Float32 throughout; tested equal.
    """
    z_token = token_logits.float()
    # the means over scored positions count them in float32: cross_entropy's own mean counts in int64, and
    # Triton 3.6 failed to build a reduction kernel holding both counters (H200, 96-token vocabulary)
    scored = (targets != ignore_index).float()
    n_scored = scored.sum().clamp_min(1.0)
    if idea_logits is None:
        ce = F.cross_entropy(z_token.flatten(0, 1), targets.flatten(), ignore_index=ignore_index,
                             reduction="sum") / n_scored
        return ce, ce, None
    z = idea_logits.float()
    gated = z_token + IdeaGate.formula(z, alpha, beta, variant, eps)
    ce = F.cross_entropy(gated.flatten(0, 1), targets.flatten(), ignore_index=ignore_index, reduction="sum") / n_scored
    index, valid = positives.clamp_min(0), (positives != NO_TARGET).float()
    softplus = F.softplus(z)
    if vocab_mask is None:
        negatives, columns = softplus.sum(-1), z.shape[-1]
    else:
        m = vocab_mask.to(z.device, torch.float32)
        negatives, columns, valid = (softplus * m).sum(-1), m.sum().clamp_min(1.0), valid * m[index]
    z_pos = z.gather(-1, index)
    w = 1.0 if pos_weight is None else float(pos_weight)
    per_position = negatives + ((w * F.softplus(-z_pos) - F.softplus(z_pos)) * valid).sum(-1)
    if reduction == "mean":
        per_position = per_position / columns
    bce = (per_position * scored).sum() / n_scored
    return ce + idea_weight * bce, ce, bce


# --- the same objective fused with the gate, chunked over positions -------------------------------

#: Positions per chunk of :func:`idea_gated_loss_fused`: a chunk's few [chunk, V] buffers stay in the
#: CPU's cache while it runs its passes (measured on the benchmark's V = 2,048; see ``semlm.book.bench``).
FUSED_CHUNK_POSITIONS = 64


class _FusedGatedLoss(torch.autograd.Function):
    """L = CE(z_token + G_alpha(z_idea), targets) + lambda * L_idea(z_idea), one chunk of positions at a time.

    The loss is a scalar, so its gradients are known once the forward has run: the forward computes
    the values *and* d L / d z_token and d L / d z_idea chunk by chunk, writing the two gradients into
    their final [B, T, V] buffers (the only [B, T, V] tensors it makes), and the backward scales them by
    the incoming gradient. Per chunk, with p = sigmoid(z_idea), s = softplus(z_idea) and log p = z_idea - s:

        forward   z_final = z_token + alpha * max(log p, floor)     (log(p + eps) when eps matters)
                  CE rows  = -log softmax(z_final)[target];  BCE rows = s @ m + the window's correction
        gradients d/dz_token = (softmax(z_final) - onehot(target)) * c_t
                  d/dz_idea  = alpha (1 - p) [unclamped] (p / (p + eps)) d/dz_token
                               + lambda b_t (m p + window correction)

    with c_t = 1 / (scored positions) and b_t the BCE's weight of position t (0 at unscored ones); the
    window's part of the BCE ([N, K] entries) is computed for all positions at once. The gated logits,
    their softmax, the softplus and the separate gradients of the gate and the BCE never exist as
    [B, T, V] tensors; a CE whose softmax entry underflows (below 1e-30) is taken from log_softmax.
    The gate and its derivative are :meth:`semlm.idea.model.IdeaGate.gated` and :meth:`~semlm.idea.model.IdeaGate.grad`
    on a chunk (tests check them equal to the gate's formula); the BCE's mask follows :class:`_SparseBCERows`. Not a
    ``torch.compile`` of the unfused loss: inductor (C++ backend) gave the same CPU time after minutes of compiling.
    """

    @staticmethod
    def forward(ctx, token_logits, idea_logits, targets, positives, vocab_mask, options):
        gate, idea_weight, pos_weight, reduction, ignore_index, chunk = options
        V = token_logits.shape[-1]
        token, idea = token_logits.reshape(-1, V), idea_logits.reshape(-1, V)
        scored = targets.reshape(-1) != ignore_index
        target = torch.where(scored, targets.reshape(-1), 0).unsqueeze(-1)            # [N, 1]
        columns = 1.0 if reduction == "sum_vocab" else (float(V) if vocab_mask is None else vocab_mask.sum().clamp_min(1.0))
        bce_weight = scored.float() / scored.sum().clamp_min(1.0) / columns            # [N]: the BCE's mean
        # the window's part of the BCE, values and gradients, for all positions at once ([N, K] is small)
        index = positives.reshape(-1, positives.shape[-1]).clamp_min(0)                 # [N, K]
        valid = (positives.reshape(index.shape) != NO_TARGET).float()
        if vocab_mask is not None:
            valid = valid * vocab_mask[index]
        z_pos = idea.gather(-1, index).float()
        correction = ((pos_weight * F.softplus(-z_pos) - F.softplus(z_pos)) * valid).sum(-1)
        p_pos = torch.sigmoid(z_pos)
        b = (idea_weight * bce_weight).unsqueeze(-1)                                    # [N, 1]
        window_grad = (-pos_weight * (1.0 - p_pos) - p_pos) * valid * b
        ce_weight = (scored.float() / scored.sum()).unsqueeze(-1)      # F.cross_entropy's mean (NaN if none scored)
        masked_columns = None
        if vocab_mask is not None and bool(((vocab_mask == 0) | (vocab_mask == 1)).all()):
            masked_columns = (vocab_mask == 0).nonzero().flatten()
        grads = ctx.needs_input_grad[0] or ctx.needs_input_grad[1]
        grad_token = torch.empty_like(token, dtype=torch.float32) if grads else None
        grad_idea = torch.empty_like(idea, dtype=torch.float32) if grads else None
        ce_rows, bce_rows = [], []
        for start in range(0, len(token), chunk):
            rows = slice(start, start + chunk)
            z, tok = idea[rows].float(), token[rows].float()
            softplus = F.softplus(z)
            bce_rows.append(softplus @ vocab_mask if vocab_mask is not None else softplus.sum(-1))
            final = gate.gated(tok, z, softplus=softplus)  # in the softplus' buffer (tok itself when off)
            probs = torch.softmax(final, -1)      # one pass less than log_softmax, then exp for the gradient
            p_target = probs.gather(-1, target[rows])
            if float(p_target.min()) < 1e-30:     # a target far down the softmax: its log from log_softmax
                ce_rows.append(-torch.log_softmax(final, -1).gather(-1, target[rows]))
            else:
                ce_rows.append(-p_target.log_())
            if not grads:
                continue
            g_token = torch.mul(probs, ce_weight[rows], out=grad_token[rows])
            g_token.scatter_add_(-1, target[rows], -ce_weight[rows])
            p = torch.sigmoid(z, out=probs)
            g_idea = torch.mul(p, b[rows], out=grad_idea[rows])
            if masked_columns is not None:
                g_idea.index_fill_(-1, masked_columns, 0.0)
            elif vocab_mask is not None:
                g_idea.mul_(vocab_mask)
            g_idea.scatter_add_(-1, index[rows], window_grad[rows])
            if not gate.off:
                g_idea.add_(gate.grad(p, g_token, scaled=False), alpha=gate.alpha)  # through the gate, in p's buffer
        ce = torch.cat(ce_rows).squeeze(-1)[scored].sum() / scored.sum()
        bce = ((torch.cat(bce_rows) + correction) * bce_weight).sum()
        if grads:
            ctx.save_for_backward(grad_token, grad_idea)
        ctx.shapes = (token_logits.shape, token_logits.dtype, idea_logits.shape, idea_logits.dtype)
        ctx.mark_non_differentiable(ce, bce)
        return ce + idea_weight * bce, ce, bce

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_total, _grad_ce, _grad_bce):
        grad_token, grad_idea = ctx.saved_tensors
        token_shape, token_dtype, idea_shape, idea_dtype = ctx.shapes
        if grad_total.device.type != "cpu" or float(grad_total) != 1.0:
            grad_token, grad_idea = grad_token.mul_(grad_total), grad_idea.mul_(grad_total)
        grad_token = grad_token.view(token_shape).to(token_dtype) if ctx.needs_input_grad[0] else None
        grad_idea = grad_idea.view(idea_shape).to(idea_dtype) if ctx.needs_input_grad[1] else None
        return grad_token, grad_idea, None, None, None, None


def idea_gated_loss_fused(token_logits: torch.Tensor, idea_logits: torch.Tensor, gate: IdeaGate,
                          targets: torch.Tensor, positives: torch.Tensor,
                          vocab_mask: torch.Tensor | None, idea_weight: float, pos_weight: float | None = None,
                          reduction: str = "sum_vocab", ignore_index: int = -1,
                          chunk_positions: int = FUSED_CHUNK_POSITIONS
                          ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`idea_gated_loss` of ``gated_logits(token_logits, idea_logits, gate)``, fused.

    Over chunks of ``chunk_positions`` positions (:class:`_FusedGatedLoss`): no [B, T, V] tensor besides the two
    gradients, the unfused values and gradients to float precision (tested). Only ``total`` carries gradients.
    """
    _check_reduction(reduction)
    if token_logits.shape != idea_logits.shape or targets.shape != token_logits.shape[:-1]:
        raise ValueError(f"token logits {tuple(token_logits.shape)}, idea logits {tuple(idea_logits.shape)} and "
                         f"targets {tuple(targets.shape)} must agree as [..., V], [..., V] and [...]")
    _check_positives(positives, idea_logits)
    if chunk_positions < 1:
        raise ValueError(f"chunk_positions must be >= 1, got {chunk_positions}")
    m = None if vocab_mask is None else vocab_mask.to(idea_logits.device, torch.float32)
    w = 1.0 if pos_weight is None else float(pos_weight)
    options = (gate, float(idea_weight), w, reduction, ignore_index, int(chunk_positions))
    return _FusedGatedLoss.apply(token_logits, idea_logits, targets, positives, m, options)
