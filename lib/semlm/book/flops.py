"""Floating-point operations of the book's models, counted from their configs, and what they say about speed.

Pure arithmetic, torch-free, for the benchmarks, the GPU throughput run and the recorded runs' MFU. A multiply-add
counts 2; a training step is three forward passes' worth (the backward computes two products per forward product).
Embeddings, LayerNorms and the attention softmax are left out (O(d) per position).
"""

from __future__ import annotations

from pathlib import Path

#: Dense bf16 peak of the accelerators the book's GPU runs name (tensor cores, no sparsity).
PEAK_BF16_FLOPS = {"H100": 989e12, "H200": 989e12, "A100": 312e12}

#: Element-wise operations per vocabulary entry and position that the math of a step needs, one FLOP
#: each (exp and log count one, as a multiply-add counts two). Token loss (both models): softmax
#: cross-entropy, forward exp(z - max) and the sum (3), backward p = e / sum and the scale (2). Idea
#: gate forward: sigmoid (exp, add, divide), log, clamp, scale, add to the token logits (7); backward:
#: the clamp's test, 1 - p, x alpha, x upstream (4). Idea BCE forward: softplus (exp, add, log), x mask,
#: sum (5); backward: sigmoid (3), x mask, x the position's gradient (5). The two gradients of z_idea
#: summed (1); the idea head's bias, added and its gradient summed (2).
ELEMENTWISE_OPS_PER_ENTRY = {
    "training": {"token loss": 5, "idea gate": 7 + 4, "idea loss": 5 + 5, "idea gradient sum and bias": 1 + 2},
    "generation": {"token loss": 0, "idea gate": 7, "idea loss": 0, "idea gradient sum and bias": 1},
}


# --- paper A: the synthetic baseline and fusion models ---------------------------------------


def synthetic_forward_flops_per_position(backbone, vocab_size: int, kind: str, n_features: int,
                                         context: float) -> dict[str, float]:
    """Forward FLOPs of one position of the baseline / fusion model of paper A, by part: the layers and the tied
    token head of :func:`forward_flops_per_position` at the backbone's ``d_ff``; fusion adds W_s (F d), the gate
    W_g ((d + F) d) and the auxiliary head (d h + h F, h = max(64, 2F)).
    """
    d, F = backbone.d_model, n_features
    parts = forward_flops_per_position(backbone.n_layers, d, vocab_size, context, False, backbone.d_ff)
    if kind == "fusion":
        h = max(64, 2 * F)
        parts["fusion input (W_s, W_g)"] = 2 * (F * d + (d + F) * d)
        parts["auxiliary head"] = 2 * (d * h + h * F)
        parts["total"] = sum(value for name, value in parts.items() if name != "total")
    return parts


def nominal_cpu_peak_flops() -> dict:
    """Nominal float32 peak per core from ``/proc/cpuinfo``: clock x SIMD lanes x 2 (FMA) x FMA units.

    The clock is the TSC rate, BogoMIPS / 2 (virtual machines rarely report a max MHz); lanes are 16 with
    AVX-512, 8 with AVX2; two FMA units are assumed (server cores). Turbo, AVX-512 down-clocking and a shared
    host all move the real ceiling, so the measured matmul peak can exceed it.
    """
    flags, bogomips = set(), None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags") and not flags:
                flags = set(line.split(":", 1)[1].split())
            elif line.lower().startswith("bogomips") and bogomips is None:
                bogomips = float(line.split(":", 1)[1])
    except OSError:
        return {"formula": "unavailable (/proc/cpuinfo not readable)", "per_core": None}
    lanes = 16 if "avx512f" in flags else 8 if "avx2" in flags else 4
    clock = bogomips / 2 * 1e6 if bogomips else None
    return {"per_core": clock * lanes * 2 * 2 if clock else None,
            "formula": f"clock ({clock / 1e9 if clock else float('nan'):.2f} GHz, BogoMIPS/2) x {lanes} fp32 lanes "
                       f"x 2 (FMA) x 2 FMA units"}


# --- paper B: the plain and the idea-gated GPT -------------------------------------------------


def forward_flops_per_position(n_layer: int, n_embd: int, vocab_size: int, context: float, idea_head: bool,
                               d_ff: int | None = None) -> dict[str, float]:
    """Floating-point operations of one forward position of the (idea-gated) GPT, by part.

    Per layer: the q, k, v and output projections (4 d^2 MACs), the attention scores and the weighted sum over
    ``context`` attended keys (2 x context x d MACs) and the MLP (2 d d_ff MACs, d_ff = 4d by default); then the
    token head (d V) and, if present, the idea head (d^2 + d V). The O(V) element-wise work of the losses and the
    gate is :func:`elementwise_flops_per_position`'s.
    """
    d, n, V = n_embd, n_layer, vocab_size
    parts = {"attention projections": n * 2 * 4 * d * d, "attention scores": n * 2 * 2 * context * d,
             "MLP": n * 2 * 2 * d * (d_ff or 4 * d), "token head": 2 * d * V,
             "idea head": 2 * (d * d + d * V) if idea_head else 0.0}
    parts["total"] = sum(parts.values())
    return parts


def training_flops_per_token(n_layer: int, n_embd: int, vocab_size: int, block_size: int, idea_head: bool) -> float:
    """Forward + backward FLOPs per trained token: 3 x forward (the backward computes two products per
    forward product), causal attention over (block + 1) / 2 keys on average."""
    return 3 * forward_flops_per_position(n_layer, n_embd, vocab_size, (block_size + 1) / 2, idea_head)["total"]


def model_flops_utilisation(tokens_per_second: float, flops_per_token: float, device_name: str | None) -> float | None:
    """Achieved FLOP/s (tokens/s x FLOPs per token) over the dense bf16 peak of the GPU named ``device_name``
    (``torch.cuda.get_device_name()``, :data:`PEAK_BF16_FLOPS`); None if the peak is unknown."""
    peak = next((v for k, v in PEAK_BF16_FLOPS.items() if device_name and k in device_name), None)
    return tokens_per_second * flops_per_token / peak if peak else None


def elementwise_flops_per_position(vocab_size: int, idea_head: bool, kind: str = "training") -> dict[str, float]:
    """Element-wise FLOPs over the vocabulary per position (:data:`ELEMENTWISE_OPS_PER_ENTRY`), by part.

    ``kind="training"`` counts forward and backward of the token loss, the gate and the idea loss;
    ``"generation"`` the gate's forward and the idea head's bias (the plain model has none of these).
    """
    if kind not in ELEMENTWISE_OPS_PER_ENTRY:
        raise ValueError(f"unknown kind {kind!r}; choose one of: {', '.join(ELEMENTWISE_OPS_PER_ENTRY)}")
    parts = {name: float(ops * vocab_size) if idea_head or name == "token loss" else 0.0
             for name, ops in ELEMENTWISE_OPS_PER_ENTRY[kind].items()}
    parts["total"] = sum(parts.values())
    return parts


def idea_flop_ratios(n_layer: int, n_embd: int, vocab_size: int, block_size: int, prompt_tokens: int,
                     new_tokens: int) -> dict:
    """Gated / plain FLOP ratios of a training step (every position of a block, forward and backward) and of one
    cached generation step (one new position reading ``prompt_tokens + new_tokens / 2`` cached keys on average),
    with the parts: the matrix products (x 3 for training) plus the element-wise work over the vocabulary;
    ``matmul_ratio`` is the ratio of the matrix products alone.
    """
    out = {}
    for kind, context in (("training", (block_size + 1) / 2), ("generation", prompt_tokens + new_tokens / 2)):
        scale = 3 if kind == "training" else 1
        matmul = {idea: forward_flops_per_position(n_layer, n_embd, vocab_size, context, idea)
                  for idea in (False, True)}
        elementwise = {idea: elementwise_flops_per_position(vocab_size, idea, kind) for idea in (False, True)}
        plain, gated = (scale * matmul[idea]["total"] + elementwise[idea]["total"] for idea in (False, True))
        out[kind] = {"plain_flops_per_token": plain, "gated_flops_per_token": gated, "ratio": gated / plain,
                     "matmul_ratio": matmul[True]["total"] / matmul[False]["total"], "parts_gated": matmul[True],
                     "elementwise_parts_gated": elementwise[True], "context": context}
    return out
