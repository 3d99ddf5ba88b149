"""The idea-gated GPT of paper B (Fofadiya, arXiv 2512.03343, Section 3), as a transformers model.

A decoder-only GPT (nanoGPT's layout, the backbone of the authors' v1 code): learned token and
position embeddings, pre-LayerNorm blocks with causal multi-head attention through
``scaled_dot_product_attention`` and a GELU MLP, dropout, a final LayerNorm, and a token head
tied to the input embedding. The idea-gated model adds, on the same final hidden state h_t:

    z_idea = W_2 ReLU(W_1 h_t)              Idea Head (untied, d -> d -> V)
    p_idea = sigmoid(z_idea)                "will token v occur in the next K tokens?"
    gate   = G(log(p_idea + eps))           <= 0: a log-space penalty on unlikely tokens
    z_final = z_token + gate                gated logits; the token loss is CE on these

with G one of the two published forms (NOTES.md), selected by name:

* ``clamp_then_scale`` (v1, the authors' WikiText GPT): alpha * clamp(log(p + eps), min=beta),
  so the gate lies in [alpha * beta, 0];
* ``scale_then_clamp`` (v2, the paper's equation): max(alpha * log(p + eps), beta), in [beta, 0].

At alpha = 0 both gates are exactly zero and the gated logits equal the token head's.

``IdeaGPTForCausalLM`` is a ``PreTrainedModel`` with ``GenerationMixin``: ``save_pretrained`` /
``from_pretrained`` / ``generate()`` work, and the gate then acts inside ``generate()`` through the
model's own forward (``config.alpha``). There is no KV cache: every step re-reads the last
``n_positions`` tokens, which keeps the model short and is fast enough at our sizes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import GenerationConfig, GenerationMixin, PreTrainedConfig, PreTrainedModel
from transformers.utils import ModelOutput

GATE_VARIANTS: tuple[str, ...] = ("clamp_then_scale", "scale_then_clamp")


def check_gate_variant(variant: str) -> str:
    if variant not in GATE_VARIANTS:
        raise ValueError(f"unknown gate variant {variant!r}; choose one of: {', '.join(GATE_VARIANTS)}")
    return variant


def idea_gate(idea_logits: torch.Tensor, alpha: float, beta: float = -2.0,
              variant: str = "clamp_then_scale", eps: float = 1e-8) -> torch.Tensor:
    """The additive gate from idea logits (paper B, Section 3.3; both published variants).

    ``clamp_then_scale``: alpha * clamp(log(sigmoid(z) + eps), min=beta)   (v1; >= alpha * beta)
    ``scale_then_clamp``: max(alpha * log(sigmoid(z) + eps), beta)         (v2; >= beta)
    The clamp is what keeps a confidently wrong idea head from removing a token outright.
    """
    check_gate_variant(variant)
    if alpha < 0:
        raise ValueError(f"gate strength alpha must be >= 0, got {alpha}")
    if beta > 0:
        raise ValueError(f"clamp floor beta must be <= 0, got {beta}")
    z = idea_logits.float()
    if variant == "clamp_then_scale" and beta >= math.log(eps) + 2.0:
        # log(sigmoid(z) + eps) and logsigmoid(z) differ by at most eps / sigmoid(z) < eps * e^-beta
        # where the clamp does not act, and both are clamped where it does: same values, one fused op.
        return (alpha * F.logsigmoid(z).clamp(min=beta)).to(idea_logits.dtype)
    log_p = torch.log(torch.sigmoid(z) + eps)
    if variant == "clamp_then_scale":
        gate = alpha * log_p.clamp(min=beta)
    else:
        gate = (alpha * log_p).clamp(min=beta)
    return gate.to(idea_logits.dtype)


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
    use_cache: bool = False
    bos_token_id: int | None = 0
    eos_token_id: int | None = 0
    pad_token_id: int | None = 0
    tie_word_embeddings: bool = True


@dataclass
class IdeaGPTOutput(ModelOutput):
    """``logits`` are the gated logits (the token head's when there is no idea head or alpha = 0)."""

    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    token_logits: torch.Tensor | None = None
    idea_logits: torch.Tensor | None = None
    hidden_states: torch.Tensor | None = None


class CausalSelfAttention(nn.Module):
    def __init__(self, config: IdeaGPTConfig):
        super().__init__()
        self.n_head, self.dropout = config.n_head, config.dropout
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd)
        self.c_proj._is_residual = True  # GPT-2 init: scaled by 1/sqrt(2 * n_layer)
        self.resid_dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        B, L, d = x.shape
        q, k, v = self.c_attn(x).view(B, L, 3, self.n_head, d // self.n_head).permute(2, 0, 3, 1, 4)
        dropout = self.dropout if self.training else 0.0
        # Position t attends to positions <= t only (is_causal), or to an explicit causal & padding mask.
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=mask is None, dropout_p=dropout)
        return self.resid_dropout(self.c_proj(y.transpose(1, 2).reshape(B, L, d)))


class MLP(nn.Module):
    def __init__(self, config: IdeaGPTConfig):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd)
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd)
        self.c_proj._is_residual = True
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.c_proj(F.gelu(self.c_fc(x))))


class Block(nn.Module):
    """Pre-LN: x + Attn(LN(x)), then x + MLP(LN(x))."""

    def __init__(self, config: IdeaGPTConfig):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(config.n_embd), nn.LayerNorm(config.n_embd)
        self.attn, self.mlp = CausalSelfAttention(config), MLP(config)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x), mask)
        return x + self.mlp(self.ln_2(x))


class GPTBody(nn.Module):
    def __init__(self, config: IdeaGPTConfig):
        super().__init__()
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.n_positions, config.n_embd)
        self.drop = nn.Dropout(config.dropout)
        self.h = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.n_embd)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        B, L = input_ids.shape
        if L > self.wpe.num_embeddings:
            raise ValueError(f"sequence of length {L} exceeds n_positions={self.wpe.num_embeddings}; crop the input")
        mask, positions = None, torch.arange(L, device=input_ids.device).expand(B, L)
        if attention_mask is not None and not bool(attention_mask.all()):
            keep = attention_mask.bool()
            # left padding: real tokens count positions from 0, and never attend to pads
            positions = (keep.long().cumsum(-1) - 1).clamp_min(0)
            causal = torch.ones(L, L, dtype=torch.bool, device=input_ids.device).tril()
            mask = (causal[None] & keep[:, None, :])[:, None]
            mask = mask | torch.eye(L, dtype=torch.bool, device=input_ids.device)  # a pad query attends to itself
        x = self.drop(self.wte(input_ids) + self.wpe(positions))
        for block in self.h:
            x = block(x, mask)
        return self.ln_f(x)


class IdeaGPTForCausalLM(PreTrainedModel, GenerationMixin):
    """GPT with a tied token head and, if ``config.idea_head``, the Idea Head and gate."""

    config_class = IdeaGPTConfig
    base_model_prefix = "transformer"
    main_input_name = "input_ids"
    _tied_weights_keys = {"lm_head.weight": "transformer.wte.weight"}
    _no_split_modules = ["Block"]
    _supports_sdpa = True

    def __init__(self, config: IdeaGPTConfig):
        super().__init__(config)
        check_gate_variant(config.gate_variant)
        if config.n_embd % config.n_head:
            raise ValueError(f"n_embd ({config.n_embd}) must be divisible by n_head ({config.n_head})")
        self.transformer = GPTBody(config)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.idea_head = (nn.Sequential(nn.Linear(config.n_embd, config.n_embd), nn.ReLU(),
                                        nn.Linear(config.n_embd, config.vocab_size))
                          if config.idea_head else None)
        self.post_init()
        self.generation_config = GenerationConfig(use_cache=False, bos_token_id=config.bos_token_id,
                                                  eos_token_id=config.eos_token_id, pad_token_id=config.pad_token_id)

    @torch.no_grad()
    def _init_weights(self, module):
        """GPT-2's scheme: N(0, 0.02), zero biases, residual projections scaled by 1/sqrt(2 * n_layer)."""
        std = self.config.initializer_range
        if isinstance(module, nn.Linear):
            scale = 1 / math.sqrt(2 * self.config.n_layer) if getattr(module, "_is_residual", False) else 1.0
            nn.init.normal_(module.weight, mean=0.0, std=std * scale)
            if module.bias is not None:
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

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                labels: torch.Tensor | None = None, alpha: float | None = None,
                return_dict: bool | None = None, **kwargs) -> IdeaGPTOutput:
        """Gated and ungated logits plus idea logits. ``alpha`` overrides ``config.alpha`` (training ramps it).

        ``labels`` (optional, -100 = ignore) are the input ids as in transformers' causal LMs: the
        loss is the cross-entropy of the gated logits at t against labels at t + 1.
        """
        hidden = self.transformer(input_ids, attention_mask)
        token_logits = self.lm_head(hidden)
        idea_logits, logits = None, token_logits
        if self.idea_head is not None:
            idea_logits = self.idea_head(hidden)
            a = self.config.alpha if alpha is None else alpha
            if a != 0:
                logits = token_logits + idea_gate(idea_logits, a, self.config.beta, self.config.gate_variant,
                                                  self.config.eps)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), labels[:, 1:].flatten(), ignore_index=-100)
        return IdeaGPTOutput(loss=loss, logits=logits, token_logits=token_logits, idea_logits=idea_logits,
                             hidden_states=hidden)

    def prepare_inputs_for_generation(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                                      **kwargs) -> dict:
        """No cache: feed the last ``n_positions`` tokens (nanoGPT's crop) and their mask.

        ``generate(..., alpha=a)`` reaches ``forward`` (``alpha=0.0`` switches the built-in gate off,
        e.g. when an ``IdeaGateLogitsProcessor`` applies it instead).
        """
        window = self.config.n_positions
        inputs = {"input_ids": input_ids[:, -window:]}
        if attention_mask is not None:
            inputs["attention_mask"] = attention_mask[:, -window:]
        if kwargs.get("alpha") is not None:
            inputs["alpha"] = kwargs["alpha"]
        return inputs


def parameter_count(model: nn.Module) -> int:
    """Distinct trainable parameters (the tied head counted once)."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
