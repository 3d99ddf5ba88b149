"""The sharpening control of paper B's claims: a plain model sampled at the temperature that gives it the gated
model's mean next-token entropy, measured teacher-forced on held-out text.

A lower entropy alone lowers topic drift and raises stickiness, so a gate has shown something only if it also
beats the plain model sharpened to its entropy (chapter 9's ``B-topic-drift``, chapter 6's ``B-stickiness``).
"""

from __future__ import annotations

import math
from dataclasses import replace

import torch

from semlm.core.metrics import NO_TARGET


@torch.no_grad()
def next_token_logits(model, blocks) -> torch.Tensor:
    """The model's next-token logits (gated, if it has a gate) at every scored position of ``blocks``,
    teacher-forced: ``[positions, vocab]`` in float32, on the CPU."""
    model.eval()
    device = next(model.parameters()).device
    out = []
    for batch in blocks.batches(64):
        logits = model(batch.inputs.to(device)).logits.float()
        out.append(logits[batch.targets.to(device) != NO_TARGET].cpu())
    return torch.cat(out)


def mean_entropy(logits: torch.Tensor, temperature: float = 1.0) -> float:
    """Mean entropy (nats) of softmax(logits / temperature) over positions."""
    logp = torch.log_softmax(logits / temperature, dim=-1)
    return float(-(logp.exp() * logp).sum(-1).mean())


def matched_temperature(logits: torch.Tensor, target: float, low: float = 0.05, high: float = 20.0,
                        iterations: int = 40) -> float:
    """The temperature at which ``logits`` have mean next-token entropy ``target`` (bisection in log
    temperature; the entropy rises with temperature). Refuses a target outside the reachable range."""
    lo_h, hi_h = mean_entropy(logits, low), mean_entropy(logits, high)
    if not lo_h <= target <= hi_h:
        raise ValueError(f"entropy {target:.3f} nats is out of reach: between {lo_h:.3f} (T={low}) and "
                         f"{hi_h:.3f} (T={high})")
    a, b = math.log(low), math.log(high)
    for _ in range(iterations):
        mid = (a + b) / 2
        a, b = (mid, b) if mean_entropy(logits, math.exp(mid)) < target else (a, mid)
    return math.exp((a + b) / 2)


def sharpening_temperature(plain, gated, blocks, sampling_temperature: float = 1.0,
                           max_blocks: int | None = None) -> tuple[float, float]:
    """``(temperature, target entropy)``: the temperature at which ``plain`` has the mean next-token entropy that
    ``gated`` (gate on) has when sampled at ``sampling_temperature``, on the first ``max_blocks`` of ``blocks``."""
    blocks = replace(blocks, input_ids=blocks.input_ids[:max_blocks])
    target = mean_entropy(next_token_logits(gated, blocks), sampling_temperature)
    return matched_temperature(next_token_logits(plain, blocks), target), target
