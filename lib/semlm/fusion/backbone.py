"""The shared Transformer backbone of the semantic-fusion paper (Appendix B).

Dimensions in :class:`semlm.fusion.config.BackboneConfig`; sinusoidal positions, tied
input/output embeddings. Each block is post-LayerNorm with a ReLU MLP, the maths of
PyTorch's ``nn.TransformerEncoderLayer`` that the authors used, written out so the
attention goes through ``scaled_dot_product_attention`` (faster on CPU).

``causal=True`` (our default) passes a causal attention mask, so position t attends
to positions <= t: a language model. ``causal=False`` is the **published setting**:
the authors call the encoder with a padding mask only, so position t also sees
t+1, the token it must predict (``nn.TransformerEncoder`` called with ``src_key_padding_mask``
only, in SemanticFusion.py, github.com/YongchaoHuang/semantic_fusion). It exists for the leakage audit.

KV cache (causal setting only): with a transformers ``Cache``, each layer appends the keys and
values of the new positions and attends over past + new, so generation feeds only the new
tokens. The published setting cannot be cached: adding a token changes every earlier position.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .config import BackboneConfig  # relative: copied beside saved weights (see semlm.fusion.model)


def _sinusoid_table(d_model: int, max_positions: int, device=None) -> torch.Tensor:
    position = torch.arange(max_positions, device=device).unsqueeze(1)
    frequency = torch.exp(torch.arange(0, d_model, 2, device=device) * (-math.log(10000.0) / d_model))
    table = torch.zeros(max_positions, d_model, device=device)
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency)
    return table


class SinusoidalPositions(nn.Module):
    """Fixed sin/cos position codes added to the input (Vaswani et al.)."""

    def __init__(self, d_model: int, max_positions: int):
        super().__init__()
        self.register_buffer("table", _sinusoid_table(d_model, max_positions), persistent=False)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """``x`` holds positions ``offset .. offset + L - 1`` (``offset`` > 0 after a KV cache)."""
        end = offset + x.shape[1]
        if end > self.table.shape[0]:
            raise ValueError(f"sequence of length {end} exceeds max_positions={self.table.shape[0]}")
        return x + self.table[offset:end]

    @torch.no_grad()
    def reset_table(self) -> None:
        """Recompute the (non-persistent) table, e.g. after ``from_pretrained`` left it uninitialised."""
        fresh = _sinusoid_table(self.table.shape[1], self.table.shape[0], device="cpu")
        self.table.copy_(fresh.to(self.table.device))


class SelfAttention(nn.Module):
    """Multi-head self-attention; causal unless the block is told otherwise."""

    def __init__(self, config: BackboneConfig, layer_idx: int = 0):
        super().__init__()
        self.n_heads, self.dropout, self.layer_idx = config.n_heads, config.dropout, layer_idx
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model)
        self.out = nn.Linear(config.d_model, config.d_model)

    def forward(self, h: torch.Tensor, causal: bool, key_padding: torch.Tensor | None,
                cache=None) -> torch.Tensor:
        B, L, d = h.shape
        q, k, v = self.qkv(h).view(B, L, 3, self.n_heads, d // self.n_heads).permute(2, 0, 3, 1, 4)
        # key_padding: [B, L] True where the key is a real token (only needed without the causal mask).
        mask = None if key_padding is None else key_padding[:, None, None, :]
        if cache is not None:  # past keys and values, then this call's appended
            past = cache.get_seq_length(self.layer_idx)
            k, v = cache.update(k, v, self.layer_idx)
            if past:  # queries sit at past .. past + L - 1: bottom-right causal mask (none for one query)
                mask = None if L == 1 else _causal_after_cache(past, L, h.device)
                causal = False
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal,
                                           dropout_p=self.dropout if self.training else 0.0)
        return self.out(a.transpose(1, 2).reshape(B, L, d))


def _causal_after_cache(past: int, length: int, device) -> torch.Tensor:
    """[L, past + L] bool: new query i (position past + i) sees keys 0 .. past + i."""
    keys = torch.arange(past + length, device=device)
    return keys[None, :] <= (past + torch.arange(length, device=device))[:, None]


class Block(nn.Module):
    """Post-LN Transformer block: h = LN(h + Drop(Attn(h))); h = LN(h + Drop(MLP(h)))."""

    def __init__(self, config: BackboneConfig, layer_idx: int = 0):
        super().__init__()
        self.attention = SelfAttention(config, layer_idx)
        self.mlp = nn.Sequential(nn.Linear(config.d_model, config.d_ff), nn.ReLU(), nn.Dropout(config.dropout),
                                 nn.Linear(config.d_ff, config.d_model))
        self.norm1, self.norm2 = nn.LayerNorm(config.d_model), nn.LayerNorm(config.d_model)
        self.drop1, self.drop2 = nn.Dropout(config.dropout), nn.Dropout(config.dropout)

    def forward(self, h: torch.Tensor, causal: bool, key_padding: torch.Tensor | None,
                cache=None) -> torch.Tensor:
        h = self.norm1(h + self.drop1(self.attention(h, causal, key_padding, cache)))
        return self.norm2(h + self.drop2(self.mlp(h)))


class Backbone(nn.Module):
    """Token embedding (tied to the LM head), positions, Transformer layers."""

    def __init__(self, config: BackboneConfig):
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.d_model)
        self.positions = SinusoidalPositions(config.d_model, config.max_positions)
        self.blocks = nn.ModuleList(Block(config, i) for i in range(config.n_layers))
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

    def encode(self, h0: torch.Tensor, padding_mask: torch.Tensor | None, cache=None) -> torch.Tensor:
        """Run the blocks on already-embedded inputs ``h0`` [B, L, d]; ``padding_mask`` is True on real tokens.

        Causal mode ignores ``padding_mask``: padding only trails a sentence, so a real
        query never attends to it, and padded queries are never scored. With a ``cache``
        (causal only), ``h0`` holds the positions after the cached ones.
        """
        causal = self.config.causal
        if cache is not None and not causal:
            raise ValueError("the published (non-causal) backbone cannot use a KV cache: every new token changes "
                             "the earlier positions; decode with use_cache=False")
        key_padding = None if causal or padding_mask is None else padding_mask.bool()
        h = self.positions(h0, cache.get_seq_length() if cache is not None else 0)
        for block in self.blocks:
            h = block(h, causal, key_padding, cache)
        return h

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Tied LM head: ``softmax(E^T H_t)``."""
        return hidden @ self.embed.weight.T
