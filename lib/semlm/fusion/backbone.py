"""The shared Transformer backbone of the semantic-fusion paper (Appendix B).

d=128, 4 layers, 4 heads, FFN 256, dropout 0.1, sinusoidal positions, tied
input/output embeddings. Each block is post-LayerNorm with a ReLU MLP, the maths of
PyTorch's ``nn.TransformerEncoderLayer`` that the authors used, written out so the
attention goes through ``scaled_dot_product_attention`` (faster on CPU).

``causal=True`` (our default) passes a causal attention mask, so position t attends
to positions <= t: a language model. ``causal=False`` is the **published setting**:
the authors call the encoder with a padding mask only, so position t also sees
t+1, the token it must predict (``nn.TransformerEncoder`` called with ``src_key_padding_mask``
only, in SemanticFusion.py, github.com/YongchaoHuang/semantic_fusion). It exists for the leakage audit.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class BackboneConfig:
    vocab_size: int
    d_model: int = 128
    n_layers: int = 4
    n_heads: int = 4
    d_ff: int = 256
    dropout: float = 0.1
    max_positions: int = 512
    causal: bool = True

    def __post_init__(self):
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")

    @property
    def setting(self) -> str:
        return "causal" if self.causal else "published (non-causal)"

    def to_dict(self) -> dict:
        return asdict(self)


class SinusoidalPositions(nn.Module):
    """Fixed sin/cos position codes added to the input (Vaswani et al.)."""

    def __init__(self, d_model: int, max_positions: int):
        super().__init__()
        position = torch.arange(max_positions).unsqueeze(1)
        frequency = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        table = torch.zeros(max_positions, d_model)
        table[:, 0::2] = torch.sin(position * frequency)
        table[:, 1::2] = torch.cos(position * frequency)
        self.register_buffer("table", table, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[1] > self.table.shape[0]:
            raise ValueError(f"sequence of length {x.shape[1]} exceeds max_positions={self.table.shape[0]}")
        return x + self.table[: x.shape[1]]


class SelfAttention(nn.Module):
    """Multi-head self-attention; causal unless the block is told otherwise."""

    def __init__(self, config: BackboneConfig):
        super().__init__()
        self.n_heads, self.dropout = config.n_heads, config.dropout
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model)
        self.out = nn.Linear(config.d_model, config.d_model)

    def forward(self, h: torch.Tensor, causal: bool, key_padding: torch.Tensor | None) -> torch.Tensor:
        B, L, d = h.shape
        q, k, v = self.qkv(h).view(B, L, 3, self.n_heads, d // self.n_heads).permute(2, 0, 3, 1, 4)
        # key_padding: [B, L] True where the key is a real token (only needed without the causal mask).
        mask = None if key_padding is None else key_padding[:, None, None, :]
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal,
                                           dropout_p=self.dropout if self.training else 0.0)
        return self.out(a.transpose(1, 2).reshape(B, L, d))


class Block(nn.Module):
    """Post-LN Transformer block: h = LN(h + Drop(Attn(h))); h = LN(h + Drop(MLP(h)))."""

    def __init__(self, config: BackboneConfig):
        super().__init__()
        self.attention = SelfAttention(config)
        self.mlp = nn.Sequential(nn.Linear(config.d_model, config.d_ff), nn.ReLU(), nn.Dropout(config.dropout),
                                 nn.Linear(config.d_ff, config.d_model))
        self.norm1, self.norm2 = nn.LayerNorm(config.d_model), nn.LayerNorm(config.d_model)
        self.drop1, self.drop2 = nn.Dropout(config.dropout), nn.Dropout(config.dropout)

    def forward(self, h: torch.Tensor, causal: bool, key_padding: torch.Tensor | None) -> torch.Tensor:
        h = self.norm1(h + self.drop1(self.attention(h, causal, key_padding)))
        return self.norm2(h + self.drop2(self.mlp(h)))


class Backbone(nn.Module):
    """Token embedding (tied to the LM head), positions, Transformer layers."""

    def __init__(self, config: BackboneConfig):
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.d_model)
        self.positions = SinusoidalPositions(config.d_model, config.max_positions)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layers))
        self._init_like_torch_encoder()

    @torch.no_grad()
    def _init_like_torch_encoder(self) -> None:
        """Start from the weights ``nn.TransformerEncoder`` would give the authors' model.

        ``nn.MultiheadAttention`` draws its input projection with Xavier-uniform and zeroes
        both attention biases, and ``nn.TransformerEncoder`` deep-copies one layer, so every
        block starts identical (dropout makes them diverge). We do the same.
        """
        first = self.blocks[0]
        nn.init.xavier_uniform_(first.attention.qkv.weight)
        nn.init.zeros_(first.attention.qkv.bias)
        nn.init.zeros_(first.attention.out.bias)
        for block in self.blocks[1:]:
            block.load_state_dict(first.state_dict())

    def encode(self, h0: torch.Tensor, padding_mask: torch.Tensor | None) -> torch.Tensor:
        """Run the blocks on already-embedded inputs ``h0`` [B, L, d]; ``padding_mask`` is True on real tokens.

        Causal mode ignores ``padding_mask``: padding only trails a sentence, so a real
        query never attends to it, and padded queries are never scored.
        """
        causal = self.config.causal
        key_padding = None if causal or padding_mask is None else padding_mask.bool()
        h = self.positions(h0)
        for block in self.blocks:
            h = block(h, causal, key_padding)
        return h

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Tied LM head: ``softmax(E^T H_t)``."""
        return hidden @ self.embed.weight.T
