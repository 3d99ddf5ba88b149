"""Paper A's Transformer dimensions (Appendix B), written once and torch-free.

d=128, 4 layers, 4 heads, FFN 256, dropout 0.1 are the paper's; a profile holds a
:class:`BackboneConfig` without ``vocab_size`` (the data decide it) and the model's
transformers config (:class:`semlm.fusion.model.FusionLMConfig`) inherits these fields, so
they stay flat keys of a saved model's config.json.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(unsafe_hash=True)  # not frozen: the transformers config inherits the fields
class BackboneConfig:
    vocab_size: int | None = None  # None in a profile: the data's vocabulary sets it
    d_model: int = 128
    n_layers: int = 4
    n_heads: int = 4
    d_ff: int = 256
    dropout: float = 0.1
    max_positions: int = 512
    causal: bool = True              # False: the published (non-causal) setting

    def __post_init__(self):
        self.check_dimensions()

    def check_dimensions(self) -> None:
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
