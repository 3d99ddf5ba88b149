"""Paper B's training objective as the trainer's ``loss_fn``: the token CE on the gated logits plus the idea BCE.

:func:`idea_loss_fn` applies the run's gate (:func:`training_gate`, ramping) once: inside the fused CPU loss,
in the model's forward on CUDA, or inside the compiled loss with ``compile_on_cuda``.
"""

from __future__ import annotations

import functools
import warnings
from typing import Sequence

import torch

from semlm.core.metrics import NO_TARGET
from semlm.core.precision import autocast
from semlm.idea.data import TokenBatch
from semlm.idea.model import IdeaGate, gated_logits
from semlm.idea.profiles import IdeaSettings
from semlm.idea.targets import (idea_gated_loss, idea_gated_loss_autograd, idea_gated_loss_fused, vocabulary_mask,
                                window_ids)


def training_gate(settings: IdeaSettings) -> IdeaGate:
    """The gate ``settings`` train: strength, clamp, variant, eps and the ramp of the strength from 0 to ``alpha``
    over ``alpha_ramp_steps`` optimiser steps (:meth:`~semlm.idea.model.IdeaGate.at_step`)."""
    return IdeaGate(settings.alpha, settings.beta, settings.gate_variant, settings.eps, settings.alpha_ramp_steps)


def autocast_for(device: torch.device | str):
    """bf16 autocast on CUDA only; CPU runs in float32 (``semlm.core.precision``, as paper B's training)."""
    return autocast("bf16_on_cuda", device)


#: why this process's compiled loss fell back to eager (empty while the compiled loss runs); tests assert it stays empty
COMPILE_FALLBACKS: list[str] = []


@functools.cache
def _compiled_gpu_loss(mode: str | None = None):
    """:func:`~semlm.idea.targets.idea_gated_loss_autograd` compiled once per process and ``torch.compile`` mode.
    Persistent reductions are off (Triton failed to build that kernel over a 96-token vocabulary, H100, torch
    2.11); should the backend still fail, the loss warns once, records why in :data:`COMPILE_FALLBACKS` and runs
    eagerly."""
    from torch._inductor import list_mode_options  # a mode is a set of options; this one's are added to them

    options = {**(list_mode_options(mode) if mode else {}), "triton.persistent_reductions": False}
    compiled = torch.compile(idea_gated_loss_autograd, options=options)

    def loss(*args):
        if COMPILE_FALLBACKS:
            return idea_gated_loss_autograd(*args)
        try:
            return compiled(*args)
        except torch._dynamo.exc.BackendCompilerFailed as error:  # raised before anything ran: nothing lost
            errors = [line.strip() for line in str(error).splitlines() if "Error" in line] or [str(error)]
            COMPILE_FALLBACKS.append(errors[-1][:300])  # the innermost error (the backend's, e.g. Triton's)
            warnings.warn(f"torch.compile of paper B's loss failed ({COMPILE_FALLBACKS[-1]}); running it eagerly "
                          f"(same values, slower)", RuntimeWarning, stacklevel=2)
            return idea_gated_loss_autograd(*args)

    return loss


def idea_loss_fn(settings: IdeaSettings, stopword_ids: Sequence[int], idea: bool, fused: bool = True,
                 compile_on_cuda: bool | str = False):
    """``loss_fn(model, batch, step) -> (loss, parts)`` for :func:`semlm.core.train.train`: paper B's loss
    (:func:`semlm.idea.targets.idea_gated_loss`) with the gate of :func:`training_gate` at ``step``
    (``step=None``: full strength), the stopwords masked out of the idea BCE. ``parts``: detached token CE, idea
    BCE, the BCE per counted column (comparable between the two reductions) and alpha.

    The gate is applied once, with the same numbers to float precision: off CUDA (``fused``) inside the loss
    (:func:`~semlm.idea.targets.idea_gated_loss_fused`; the model runs ungated), on CUDA in the model's forward
    (``gate=``), or with ``compile_on_cuda`` inside the compiled :func:`~semlm.idea.targets.idea_gated_loss_autograd`
    (a string: in that ``torch.compile`` mode).
    """
    stop = torch.tensor(sorted(set(stopword_ids)), dtype=torch.long)
    mode = compile_on_cuda if isinstance(compile_on_cuda, str) else None
    ramp = training_gate(settings) if idea else None
    masks: dict = {}  # the vocabulary mask per (vocabulary size, device): built once

    def loss_fn(model, batch: TokenBatch, step: int | None = None):
        device = batch.inputs.device
        compiled = compile_on_cuda and batch.inputs.is_cuda
        if ramp is None:  # the plain GPT: the token CE
            out = model(batch.inputs)
            if compiled:
                loss, ce, _ = _compiled_gpu_loss(mode)(out.logits, None, torch.zeros((), device=device), 0.0,
                                                   "clamp_then_scale", 0.0, batch.targets, None, None, 0.0, None,
                                                   "mean", NO_TARGET)
            else:
                loss, ce, _ = idea_gated_loss(out.logits, batch.targets, None, None, None, 0.0, ignore_index=NO_TARGET)
            return loss, {"token_ce": ce.detach()}
        gate = ramp.at_step(step)
        in_loss = compiled or (fused and not batch.inputs.is_cuda)  # the model runs ungated, the loss gates
        # ungated logits as alpha=0.0, a constant: a compiled model guards on it (a new IdeaGate per step would not be)
        out = model(batch.inputs, alpha=0.0) if in_loss else model(batch.inputs, gate=gate)
        vocab = out.idea_logits.shape[-1]
        if (vocab, str(device)) not in masks:
            masks[vocab, str(device)] = vocabulary_mask(vocab, stop, device)
        mask = masks[vocab, str(device)]
        positives = window_ids(batch.future, settings.window, batch.inputs.shape[1])
        losses = (mask, settings.idea_weight, settings.pos_weight, settings.idea_loss_reduction, NO_TARGET)
        if compiled:
            loss, ce, bce = _compiled_gpu_loss(mode)(out.token_logits, out.idea_logits,
                                                 torch.full((), gate.alpha, device=device), gate.beta, gate.variant,
                                                 gate.eps, batch.targets, positives, *losses)
        elif not in_loss:  # the model's gated logits
            loss, ce, bce = idea_gated_loss(out.logits, batch.targets, out.idea_logits, positives, *losses)
        elif out.token_logits.dtype == out.idea_logits.dtype == torch.float32:
            loss, ce, bce = idea_gated_loss_fused(out.token_logits, out.idea_logits, gate, batch.targets, positives,
                                                  *losses)
        else:  # a CPU run in bf16: the gate applied here once
            logits = gated_logits(out.token_logits, out.idea_logits, gate)
            loss, ce, bce = idea_gated_loss(logits, batch.targets, out.idea_logits, positives, *losses)
        bce = bce.detach()  # parts are detached tensors: the loop decides when to wait for the device
        per_column = bce / mask.sum() if settings.idea_loss_reduction == "sum_vocab" else bce
        return loss, {"token_ce": ce.detach(), "idea_bce": bce, "idea_bce_per_column": per_column,
                      "alpha": gate.alpha}

    return loss_fn
