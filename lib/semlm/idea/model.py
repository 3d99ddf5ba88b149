"""The idea-gated GPT of paper B (Fofadiya, arXiv 2512.03343, Section 3), as a transformers model.

A decoder-only GPT (nanoGPT's layout, the backbone of the authors' v1 code): learned token and
position embeddings, pre-LayerNorm blocks with causal multi-head attention through
``scaled_dot_product_attention`` and a GELU MLP, dropout, a final LayerNorm, and a token head
tied to the input embedding. The idea-gated model adds, on the same final hidden state h_t:

    z_idea = W_2 ReLU(W_1 h_t)              Idea Head (untied, d -> d -> V)
    p_idea = sigmoid(z_idea)                "will token v occur in the next K tokens?"
    gate   = G(log(p_idea + eps))           <= 0: a log-space penalty on unlikely tokens
    z_final = z_token + gate                gated logits; the token loss is CE on these

with G one of the two forms in the authors' repository (github.com/DarshanFofadiya/idea-gated-transformers:
the WikiText GPT's ``model.py`` and the Mistral/LoRA script), selected by name:

* ``clamp_then_scale`` (v1, the authors' WikiText GPT): alpha * clamp(log(p + eps), min=beta),
  so the gate lies in [alpha * beta, 0];
* ``scale_then_clamp`` (v2, the paper's equation): max(alpha * log(p + eps), beta), in [beta, 0].

At alpha = 0 both gates are exactly zero and the gated logits equal the token head's.

The gate is one value, :class:`IdeaGate` (strength, clamp, variant, eps, the training ramp and an optional
decay for generation); the model's own is ``model.gate`` (from its config), and ``forward`` / ``generate`` take
another as ``gate=``.

``IdeaGPTForCausalLM`` is a ``PreTrainedModel`` with ``GenerationMixin`` (``save_pretrained``,
``from_pretrained``, ``generate()`` with the gate at ``config.alpha``). ``generate()`` keeps a KV cache
(``DynamicCache``); past ``n_positions`` tokens the model re-reads the last ``n_positions`` without it
(nanoGPT's crop), so cached and uncached decoding agree token for token at every length.
"""

from __future__ import annotations

import functools
import math
from contextlib import contextmanager
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import nn
from transformers import (AutoConfig, AutoModelForCausalLM, DynamicCache, GenerationConfig, GenerationMixin,
                          PreTrainedConfig, PreTrainedModel)
from transformers.cache_utils import Cache
from transformers.utils import ModelOutput

# This file imports nothing from semlm: ``save_pretrained`` copies it beside the weights as the model's
# remote code (``auto_map``), which ``trust_remote_code=True`` runs without semlm installed. The two
# name lists below are semlm.idea.profiles' (tests/test_auto_registration.py keeps them equal).
DROPOUT_SCOPES: tuple[str, ...] = ("embeddings", "everywhere")
INITS: tuple[str, ...] = ("authors_v1", "gpt2_scaled")
GATE_VARIANTS: tuple[str, ...] = ("clamp_then_scale", "scale_then_clamp")


def check_gate_variant(variant: str) -> str:
    if variant not in GATE_VARIANTS:
        raise ValueError(f"unknown gate variant {variant!r}; choose one of: {', '.join(GATE_VARIANTS)}")
    return variant


@dataclass(frozen=True)
class ConcentrationDecay:
    """alpha_t = alpha * (1 - c_t)^power, c_t = share of the top-``k`` idea tokens among the last ``window`` tokens.

    A schedule an :class:`IdeaGate` may hold for generation (chapter 7's loop study): it shrinks each sequence's
    gate strength as the idea head's plan is made of tokens just generated. It touches no token's score, so it is
    not a repetition penalty."""

    top_k: int = 20
    window: int = 32
    power: float = 1.0

    def __post_init__(self):
        if self.top_k < 1 or self.window < 1 or self.power <= 0:
            raise ValueError(f"top_k and window must be >= 1 and power > 0, got {self.top_k}, {self.window}, "
                             f"{self.power}")

    def concentration(self, input_ids: torch.Tensor, idea_logits: torch.Tensor) -> torch.Tensor:
        """[B] in [0, 1]: how much of the current plan is made of tokens just generated."""
        B, V = idea_logits.shape
        recent = torch.zeros(B, V, dtype=torch.bool, device=idea_logits.device)
        recent.scatter_(1, input_ids[:, -self.window:], True)
        top = idea_logits.topk(min(self.top_k, V), dim=-1).indices
        return recent.gather(1, top).float().mean(-1)

    def strength(self, alpha: float, input_ids: torch.Tensor, idea_logits: torch.Tensor) -> torch.Tensor:
        return alpha * (1.0 - self.concentration(input_ids, idea_logits)).pow(self.power)


@dataclass(frozen=True)
class IdeaGate:
    """The additive gate of paper B (Section 3.3), both published variants, as one value: every place that gates
    logits (the model's forward, the losses, the LoRA model, sparse decoding, generation) reads one of these.

    ``clamp_then_scale``: alpha * clamp(log(sigmoid(z) + eps), min=beta)   (v1; >= alpha * beta)
    ``scale_then_clamp``: max(alpha * log(sigmoid(z) + eps), beta)         (v2; >= beta)

    The clamp keeps a confidently wrong idea head from removing a token outright. ``ramp_steps``: training raises
    the strength linearly from 0 to ``alpha`` over that many optimiser steps (:meth:`at_step`). ``decay``: during
    generation each sequence's strength shrinks as :class:`ConcentrationDecay` says (chapter 7).

    The expression is written here only: :meth:`formula` (and :meth:`apply`, the checked call of it), :meth:`gated`
    (the same, in place, added to the token logits) and :meth:`grad` (its derivative, for the two hand-written
    backwards: :class:`_GatedLogits` and the fused loss of :mod:`semlm.idea.targets`); tests keep them equal.
    """

    alpha: float = 0.5
    beta: float = -2.0
    variant: str = "clamp_then_scale"
    eps: float = 1e-8
    ramp_steps: int = 0
    decay: ConcentrationDecay | None = None

    def __post_init__(self):
        check_gate_variant(self.variant)
        if self.alpha < 0:
            raise ValueError(f"gate strength alpha must be >= 0, got {self.alpha}")
        if self.beta > 0:
            raise ValueError(f"clamp floor beta must be <= 0, got {self.beta}")
        if self.ramp_steps < 0:
            raise ValueError(f"ramp_steps must be >= 0, got {self.ramp_steps}")

    @classmethod
    def of(cls, config) -> "IdeaGate":
        """The gate a model's config holds (``alpha``, ``beta``, ``gate_variant``, ``eps``)."""
        return cls(float(config.alpha), float(config.beta), config.gate_variant, float(config.eps))

    def with_alpha(self, alpha: float) -> "IdeaGate":
        return replace(self, alpha=float(alpha))

    def at_step(self, step: int | None) -> "IdeaGate":
        """The gate after ``step`` optimiser steps of the ramp (``None``: the full strength)."""
        if step is None or self.ramp_steps == 0:
            return self
        return self.with_alpha(self.alpha * min(1.0, step / self.ramp_steps))

    @property
    def off(self) -> bool:
        """At alpha = 0 both variants are exactly zero: the gated logits are the token head's."""
        return self.alpha == 0

    @property
    def floor(self) -> float:
        """The log-probability below which the clamp acts: beta (v1) or beta / alpha (v2)."""
        return self.beta if self.variant == "clamp_then_scale" else self.beta / self.alpha

    @property
    def drops_eps(self) -> bool:
        """True when log(p + eps) may be computed as log(p): wherever the clamp does not act, p > e^floor, so the
        two differ by less than eps / p < eps * e^-floor (in value, and relatively in the derivative)."""
        return self.eps <= 0 or math.log(self.eps) - self.floor <= math.log(1e-6)

    @property
    def threshold(self) -> float:
        """The idea probability p below which the clamp acts (its derivative is 0 there)."""
        return math.exp(self.floor) - (0.0 if self.drops_eps else self.eps)

    def clamped_value(self) -> float:
        """The gate of a clamped token, from the formula at a hopeless idea logit (so bit-equal to it)."""
        return _clamped_value(self.alpha, self.beta, self.variant, self.eps)

    @staticmethod
    def formula(idea_logits: torch.Tensor, alpha: float | torch.Tensor, beta: float, variant: str, eps: float,
                drop_eps: bool = False) -> torch.Tensor:
        """The gate's expression, unchecked and without a branch on a tensor, so ``torch.compile`` traces it (the
        compiled loss passes a 0-d ``alpha``, so the strength ramp does not recompile)."""
        z = idea_logits.float()
        log_p = torch.log(torch.sigmoid(z)) if drop_eps else torch.log(torch.sigmoid(z) + eps)
        gate = alpha * log_p.clamp(min=beta) if variant == "clamp_then_scale" else (alpha * log_p).clamp(min=beta)
        return gate.to(idea_logits.dtype)

    def apply(self, idea_logits: torch.Tensor, alpha: torch.Tensor | None = None) -> torch.Tensor:
        """The gate of ``idea_logits``; ``alpha``, a tensor, replaces the strength (one per row, ``[B, 1]``: the
        decay), and the gate is then computed with eps."""
        if alpha is not None:
            return self.formula(idea_logits, alpha, self.beta, self.variant, self.eps)
        if self.off:
            return torch.zeros_like(idea_logits)
        # log(sigmoid) in two vectorised passes when eps cannot matter; logsigmoid is ~3x slower on CPU
        return self.formula(idea_logits, self.alpha, self.beta, self.variant, self.eps, self.drops_eps)

    def gated(self, token_logits: torch.Tensor, idea_logits: torch.Tensor,
              softplus: torch.Tensor | None = None) -> torch.Tensor:
        """``token_logits + gate`` in few passes, in one float32 buffer: sigmoid, log, clamp, then scale-and-add in
        place. Both variants are alpha * clamp(log p, floor), since max(alpha x, beta) = alpha max(x, beta / alpha)
        for alpha > 0. ``softplus``: softplus(z) already computed (the fused loss): log p = z - softplus(z) in its
        buffer when eps cannot matter, else the buffer is reused. Not differentiable itself (:class:`_GatedLogits`)."""
        if self.off:
            return token_logits
        if softplus is not None and self.drops_eps:
            log_p = torch.sub(idea_logits, softplus, out=softplus)
        else:
            p = torch.sigmoid(idea_logits.float(), out=softplus)
            log_p = p.log_() if self.drops_eps else p.add_(self.eps).log_()
        log_p.clamp_(min=self.floor)
        if log_p.dtype == token_logits.dtype:
            return torch.add(token_logits, log_p, alpha=self.alpha, out=log_p)  # scale and add in one pass
        return token_logits + log_p.mul_(self.alpha).to(token_logits.dtype)

    def grad(self, p: torch.Tensor, upstream: torch.Tensor, scaled: bool = True) -> torch.Tensor:
        """d L / d z_idea through the gate, in ``p``'s buffer (``p`` = sigmoid(z_idea), overwritten), from
        ``upstream`` = d L / d z_final:

            alpha * (1 - p) * p / (p + eps) * upstream   where the clamp does not act, else 0

        (the factor p / (p + eps) is 1 to float precision when :attr:`drops_eps`). ``scaled=False`` leaves out
        alpha, for a caller that adds the result with alpha as its scale."""
        ratio = None if self.drops_eps else p / (p + self.eps)
        torch.threshold_(p, self.threshold, 1.0)  # clamped entries -> p = 1 -> 1 - p = 0
        grad = torch.addcmul(upstream, upstream, p, value=-1.0, out=p)  # (1 - p) upstream
        if scaled:
            grad.mul_(self.alpha)
        return grad.mul_(ratio) if ratio is not None else grad


@functools.cache
def _clamped_value(alpha: float, beta: float, variant: str, eps: float) -> float:
    gate = IdeaGate(alpha, beta, variant, eps)
    return float(gate.apply(torch.tensor([-1e4])))  # once per setting: sparse decoding needs it on every step


class _GatedLogits(torch.autograd.Function):
    """z_final = z_token + G(z_idea) with a hand-written backward (:meth:`IdeaGate.gated` and :meth:`IdeaGate.grad`).

    Autograd through :meth:`IdeaGate.apply` runs about eight passes over the [B, T, V] logits for the gate alone
    (sigmoid, log, clamp, scale, add; their backwards, a comparison and a select). Here the forward is sigmoid,
    log, clamp, then scale-and-add in place, and the backward a sigmoid and three in-place passes. The backward
    recomputes p from z_idea (which the idea loss keeps anyway) rather than holding a [B, T, V] buffer through the
    loss.
    """

    @staticmethod
    def forward(ctx, token_logits, idea_logits, gate):
        out = gate.gated(token_logits, idea_logits)
        ctx.save_for_backward(idea_logits)  # p is recomputed: one [B, T, V] buffer less held through the loss
        ctx.gate, ctx.idea_dtype = gate, idea_logits.dtype
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out):
        grad_idea = None
        if ctx.needs_input_grad[1]:
            p = torch.sigmoid(ctx.saved_tensors[0].float())
            grad_idea = ctx.gate.grad(p, grad_out).to(ctx.idea_dtype)
        grad_token = grad_out if ctx.needs_input_grad[0] else None
        return grad_token, grad_idea, None


def gated_logits(token_logits: torch.Tensor, idea_logits: torch.Tensor, gate: IdeaGate) -> torch.Tensor:
    """z_final = z_token + gate(z_idea) (paper B, Section 3.3), computed in few passes.

    Equal to ``token_logits + gate.apply(idea_logits)`` to float precision, values and gradients (tests check
    both). With the gate off it returns ``token_logits`` itself.
    """
    if gate.off:
        return token_logits
    if not (torch.is_grad_enabled() and (token_logits.requires_grad or idea_logits.requires_grad)):
        with torch.no_grad():
            return gate.gated(token_logits, idea_logits)
    return _GatedLogits.apply(token_logits, idea_logits, gate)


class IdeaGPTConfig(PreTrainedConfig):
    """Sizes of the GPT and the gate. ``idea_head=False`` is the plain baseline GPT."""

    model_type = "idea_gpt"
    attribute_map = {"hidden_size": "n_embd", "max_position_embeddings": "n_positions",
                     "num_attention_heads": "n_head", "num_hidden_layers": "n_layer"}

    vocab_size: int = 50257
    n_positions: int = 256
    n_embd: int = 384
    n_layer: int = 6
    n_head: int = 6
    dropout: float = 0.1
    idea_head: bool = True
    gate_variant: str = "clamp_then_scale"
    alpha: float = 0.5           # gate strength used at inference (training ramps up to it)
    beta: float = -2.0
    eps: float = 1e-8
    initializer_range: float = 0.02
    # The authors' v1 choices (semlm.idea.profiles.GPTSize): "authors_v1" draws every weight from
    # N(0, initializer_range) with PyTorch's default biases and no residual scaling; "gpt2_scaled" is
    # GPT-2's scheme. dropout_scope "embeddings" keeps only the dropout after the embedding sum.
    init: str = "gpt2_scaled"
    dropout_scope: str = "everywhere"
    use_cache: bool = False      # forward() builds a cache only when asked; generate() asks (its own config)
    bos_token_id: int | None = 0
    eos_token_id: int | None = 0
    pad_token_id: int | None = 0
    tie_word_embeddings: bool = True
    # Execution only: the embedding and both heads get vocab_size rounded up to this multiple of rows, and the
    # logits are cut back to vocab_size (the same function; tensor cores want the matrices' sides aligned)
    vocab_pad_multiple: int = 1

    @property
    def padded_vocab_size(self) -> int:
        return -(-self.vocab_size // self.vocab_pad_multiple) * self.vocab_pad_multiple


@dataclass
class IdeaGPTOutput(ModelOutput):
    """``logits`` are the gated logits (the token head's when there is no idea head or alpha = 0)."""

    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    token_logits: torch.Tensor | None = None
    idea_logits: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    past_key_values: Cache | None = None
    gate_strength: torch.Tensor | None = None   # [B]: each row's strength under a decaying gate (else None)


def _block_dropout(config: IdeaGPTConfig) -> float:
    """Dropout on attention weights and residual branches: none when it is only after the embeddings."""
    if config.dropout_scope not in DROPOUT_SCOPES or config.init not in INITS:
        raise ValueError(f"dropout_scope must be one of {DROPOUT_SCOPES} and init one of {INITS}; got "
                         f"{config.dropout_scope!r}, {config.init!r}")
    return config.dropout if config.dropout_scope == "everywhere" else 0.0


class CausalSelfAttention(nn.Module):
    def __init__(self, config: IdeaGPTConfig, layer_idx: int = 0):
        super().__init__()
        self.n_head, self.dropout, self.layer_idx = config.n_head, _block_dropout(config), layer_idx
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd)
        self.c_proj._is_residual = True  # GPT-2 init: scaled by 1/sqrt(2 * n_layer)
        self.resid_dropout = nn.Dropout(self.dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None, cache: Cache | None = None,
                is_causal: bool = True) -> torch.Tensor:
        B, L, d = x.shape
        q, k, v = self.c_attn(x).view(B, L, 3, self.n_head, d // self.n_head).permute(2, 0, 3, 1, 4)
        if cache is not None:  # keys and values of the past positions, then this call's appended
            k, v = cache.update(k, v, self.layer_idx)
        dropout = self.dropout if self.training else 0.0
        # Position t attends to positions <= t only: is_causal (no cache, no padding), an explicit causal
        # & padding mask, or nothing when one new token reads a cache of its own past.
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal and mask is None,
                                           dropout_p=dropout)
        return self.resid_dropout(self.c_proj(y.transpose(1, 2).reshape(B, L, d)))


class MLP(nn.Module):
    def __init__(self, config: IdeaGPTConfig):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd)
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd)
        self.c_proj._is_residual = True
        self.dropout = nn.Dropout(_block_dropout(config))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.c_proj(F.gelu(self.c_fc(x))))


class Block(nn.Module):
    """Pre-LN: x + Attn(LN(x)), then x + MLP(LN(x))."""

    def __init__(self, config: IdeaGPTConfig, layer_idx: int = 0):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(config.n_embd), nn.LayerNorm(config.n_embd)
        self.attn, self.mlp = CausalSelfAttention(config, layer_idx), MLP(config)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None, cache: Cache | None = None,
                is_causal: bool = True) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x), mask, cache, is_causal)
        return x + self.mlp(self.ln_2(x))


class GPTBody(nn.Module):
    def __init__(self, config: IdeaGPTConfig):
        super().__init__()
        self.wte = nn.Embedding(config.padded_vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.n_positions, config.n_embd)
        self.drop = nn.Dropout(config.dropout)
        self.h = nn.ModuleList(Block(config, i) for i in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.n_embd)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                cache: Cache | None = None, position_ids: torch.Tensor | None = None,
                states: list | None = None) -> torch.Tensor:
        """Final hidden states of the ``input_ids`` (the new tokens when ``cache`` holds a past).

        ``attention_mask`` covers past and new tokens ([B, past + L], transformers' convention). ``states``, if a
        list, receives every layer's input and the final (normalised) output, as transformers' GPT-2 returns its
        ``hidden_states``: the embeddings first, ``n_layer + 1`` tensors in all.
        """
        B, L = input_ids.shape
        past = cache.get_seq_length() if cache is not None else 0
        total, device = past + L, input_ids.device
        if total > self.wpe.num_embeddings:
            raise ValueError(f"sequence of length {total} exceeds n_positions={self.wpe.num_embeddings}; "
                             "crop the input")
        if attention_mask is not None and attention_mask.shape[-1] != total:
            raise ValueError(f"attention_mask covers {attention_mask.shape[-1]} positions, expected past + new = "
                             f"{total}")
        padded = attention_mask is not None and not bool(attention_mask.all())
        mask, is_causal = None, past == 0  # one new token after a cache reads every cached key: no mask
        if padded or (past > 0 and L > 1):
            query = torch.arange(past, total, device=device)
            allowed = torch.arange(total, device=device)[None, :] <= query[:, None]        # [L, total] causal
            if padded:  # left padding: never attend to pads; a pad query attends to itself (no empty row)
                allowed = (allowed[None] & attention_mask.bool()[:, None, :]) | (
                    torch.arange(total, device=device)[None, :] == query[:, None])[None]
            mask = allowed[:, None] if allowed.dim() == 3 else allowed
        if position_ids is None:
            if padded:  # real tokens count positions from 0
                position_ids = (attention_mask.long().cumsum(-1) - 1).clamp_min(0)[:, past:]
            else:
                position_ids = torch.arange(past, total, device=device).expand(B, L)
        x = self.drop(self.wte(input_ids) + self.wpe(position_ids))
        for block in self.h:
            if states is not None:
                states.append(x)
            x = block(x, mask, cache, is_causal)
        x = self.ln_f(x)
        if states is not None:
            states.append(x)
        return x


class IdeaGPTForCausalLM(PreTrainedModel, GenerationMixin):
    """GPT with a tied token head and, if ``config.idea_head``, the Idea Head and gate."""

    config_class = IdeaGPTConfig
    base_model_prefix = "transformer"
    main_input_name = "input_ids"
    _tied_weights_keys = {"lm_head.weight": "transformer.wte.weight"}
    _no_split_modules = ["Block"]
    _supports_sdpa = True
    # The loss is a mean over the batch's labels: transformers' Trainer must average micro-batches itself
    # under gradient accumulation (it would otherwise expect a sum over num_items_in_batch from **kwargs).
    accepts_loss_kwargs = False

    def __init__(self, config: IdeaGPTConfig):
        super().__init__(config)
        check_gate_variant(config.gate_variant)
        if config.n_embd % config.n_head:
            raise ValueError(f"n_embd ({config.n_embd}) must be divisible by n_head ({config.n_head})")
        self.transformer = GPTBody(config)
        self.lm_head = nn.Linear(config.n_embd, config.padded_vocab_size, bias=False)
        self.idea_head = (nn.Sequential(nn.Linear(config.n_embd, config.n_embd), nn.ReLU(),
                                        nn.Linear(config.n_embd, config.padded_vocab_size))
                          if config.idea_head else None)
        self.post_init()
        self.generation_config = GenerationConfig(use_cache=True, bos_token_id=config.bos_token_id,
                                                  eos_token_id=config.eos_token_id, pad_token_id=config.pad_token_id)

    @torch.no_grad()
    def _init_weights(self, module):
        """GPT-2's scheme: N(0, 0.02), zero biases, residual projections scaled by 1/sqrt(2 * n_layer);
        with ``init="authors_v1"`` the authors' ``model.py``: N(0, 0.02) weights, no residual scaling,
        Linear biases left at PyTorch's default U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
        std, authors = self.config.initializer_range, self.config.init == "authors_v1"
        if isinstance(module, nn.Linear):
            residual = getattr(module, "_is_residual", False) and not authors
            scale = 1 / math.sqrt(2 * self.config.n_layer) if residual else 1.0
            nn.init.normal_(module.weight, mean=0.0, std=std * scale)
            if module.bias is not None and authors:
                bound = 1 / math.sqrt(module.in_features)
                nn.init.uniform_(module.bias, -bound, bound)
            elif module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=std)
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)

    def get_input_embeddings(self) -> nn.Embedding:
        return self.transformer.wte

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.transformer.wte = value

    def get_output_embeddings(self) -> nn.Linear:
        return self.lm_head

    def set_output_embeddings(self, value: nn.Linear) -> None:
        self.lm_head = value

    @property
    def gate(self) -> IdeaGate:
        """The model's own gate, from its config (``alpha`` 0 for the plain GPT)."""
        return IdeaGate.of(self.config)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                labels: torch.Tensor | None = None, alpha: float | None = None,
                past_key_values: Cache | None = None, use_cache: bool | None = None,
                position_ids: torch.Tensor | None = None, return_dict: bool | None = None,
                gate: IdeaGate | None = None, recent_ids: torch.Tensor | None = None,
                **kwargs) -> IdeaGPTOutput:
        """Gated and ungated logits plus idea logits. ``gate`` replaces the model's own (:attr:`gate`); ``alpha``
        is short for ``gate=model.gate.with_alpha(alpha)``. A gate with a ``decay`` sets each row's strength from
        the idea logits of its last position and ``recent_ids`` (default ``input_ids``; generation passes the
        sequences so far), returned as ``gate_strength``. ``labels`` (-100 = ignore) as in transformers' causal
        LMs. With a cache, ``input_ids`` are only the tokens not yet in it and
        ``attention_mask`` covers cached and new tokens. ``output_hidden_states=True`` (or the config's) returns
        ``hidden_states`` as transformers does: a tuple of ``n_layer + 1`` tensors, the embeddings first and the
        final normalised states last."""
        wanted = kwargs.get("output_hidden_states")
        states = [] if (self.config.output_hidden_states if wanted is None else wanted) else None
        use_cache = past_key_values is not None if use_cache is None else use_cache
        if use_cache and past_key_values is None:
            past_key_values = DynamicCache()
        cache = past_key_values if use_cache else None
        hidden = self.transformer(input_ids, attention_mask, cache, position_ids, states)
        V = self.config.vocab_size  # a padded head's extra rows are cut off (a view) before any logit is used
        cut = (lambda logits: logits[..., :V]) if self.config.padded_vocab_size != V else (lambda logits: logits)
        token_logits = cut(self.lm_head(hidden))
        idea_logits, logits, strength = None, token_logits, None
        if self.idea_head is not None:
            idea_logits = cut(self.idea_head(hidden))
            gate = self.gate if gate is None else gate
            gate = gate if alpha is None else gate.with_alpha(alpha)
            if gate.decay is not None and not gate.off:  # one strength per row, from its last position's plan
                recent = input_ids if recent_ids is None else recent_ids
                strength = gate.decay.strength(gate.alpha, recent, idea_logits[:, -1].float())
                logits = token_logits + gate.apply(idea_logits.float(), strength[:, None, None]).to(token_logits.dtype)
            else:
                logits = gated_logits(token_logits, idea_logits, gate)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), labels[:, 1:].flatten(), ignore_index=-100)
        return IdeaGPTOutput(loss=loss, logits=logits, token_logits=token_logits, idea_logits=idea_logits,
                             hidden_states=None if states is None else tuple(states), past_key_values=cache,
                             gate_strength=strength)

    def prepare_inputs_for_generation(self, input_ids: torch.Tensor, past_key_values: Cache | None = None,
                                      attention_mask: torch.Tensor | None = None, use_cache: bool | None = None,
                                      **kwargs) -> dict:
        """The tokens ``forward`` has not seen yet, with the cache and the full attention mask; without a cache, or
        past ``n_positions``, the last ``n_positions`` tokens afresh (nanoGPT's crop). The cache's own length
        locates the new tokens; ``generate(..., gate=IdeaGate(...))`` or ``generate(..., alpha=a)`` reaches
        ``forward``, a decaying gate with the last ``decay.window`` tokens of every sequence."""
        window = self.config.n_positions
        if use_cache and past_key_values is None:
            past_key_values = DynamicCache()
        past = past_key_values.get_seq_length() if past_key_values is not None else 0
        if use_cache is not False and past_key_values is not None and input_ids.shape[1] <= window:
            inputs = {"input_ids": input_ids[:, past:], "past_key_values": past_key_values, "use_cache": True}
            if attention_mask is not None:
                inputs["attention_mask"] = attention_mask
        else:
            inputs = {"input_ids": input_ids[:, -window:], "use_cache": False}
            if attention_mask is not None:
                inputs["attention_mask"] = attention_mask[:, -window:]
        if kwargs.get("alpha") is not None:
            inputs["alpha"] = kwargs["alpha"]
        gate = kwargs.get("gate")
        if gate is not None:
            inputs["gate"] = gate
            if gate.decay is not None:
                inputs["recent_ids"] = input_ids[:, -gate.decay.window:]
        return inputs


@contextmanager
def quiet_transformers():
    """No progress bars or info lines from transformers while saving / loading / generating."""
    from transformers.utils import logging

    was, verbosity = logging.is_progress_bar_enabled(), logging.get_verbosity()
    logging.disable_progress_bar()
    logging.set_verbosity_error()
    try:
        yield
    finally:
        logging.set_verbosity(verbosity)
        if was:
            logging.enable_progress_bar()


def pad_vocabulary(model: IdeaGPTForCausalLM, multiple: int = 64) -> IdeaGPTForCausalLM:
    """A copy of ``model`` whose embedding and heads have ``vocab_size`` rounded up to ``multiple`` rows, the new
    rows zero: the same logits, losses and (on the real rows) gradients, with matrix sides the tensor cores align.
    Execution only (``python -m semlm.bench --only gpu`` measures it); the padded rows get no gradient."""
    config = IdeaGPTConfig.from_dict({**model.config.to_dict(), "vocab_pad_multiple": multiple})
    padded = IdeaGPTForCausalLM(config).to(model.device)
    state = padded.state_dict()
    with torch.no_grad():
        for name, value in model.state_dict().items():
            state[name].zero_()[tuple(slice(0, n) for n in value.shape)] = value
    padded.load_state_dict(state)
    return padded.train(model.training)


def parameter_count(model: nn.Module) -> int:
    """Distinct trainable parameters (the tied head counted once)."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


# ``AutoConfig`` / ``AutoModelForCausalLM`` know the model once this module is imported (``import semlm``
# imports it on the first lookup of "idea_gpt"), so a saved folder loads with
# ``AutoModelForCausalLM.from_pretrained(path)``. ``save_pretrained`` also writes ``auto_map`` and copies
# this file beside the weights, so ``trust_remote_code=True`` loads the folder without semlm.
AutoConfig.register(IdeaGPTConfig.model_type, IdeaGPTConfig, exist_ok=True)
AutoModelForCausalLM.register(IdeaGPTConfig, IdeaGPTForCausalLM, exist_ok=True)
IdeaGPTConfig.register_for_auto_class()
IdeaGPTForCausalLM.register_for_auto_class("AutoModelForCausalLM")
