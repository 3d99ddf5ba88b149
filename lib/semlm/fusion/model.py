"""Baseline and semantic-fusion language models (semantic-fusion paper, Section 2, Eqs. 2-4).

Fusion injects the semantic vector s_t before the Transformer:

    u_t = W_s s_t                          (semantic projection)
    g_t = sigmoid(W_g [e_t ; s_t])         (Eq. 2, per-dimension gate)
    h_t = e_t + u_t + g_t * u_t            (Eq. 3: the semantic part is scaled by 1 + g_t in (1, 2))

and an auxiliary head reconstructs s_t from the last hidden state:
``s_hat_t = sigmoid(MLP(H_t))`` with MLP d -> max(64, 2F) -> F. The LM head stays
tied to the input embedding because the fused input keeps width d.

``gate=False`` is the ablation h_t = e_t + u_t (no gate), used by the leakage audit.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import NamedTuple

import torch
from torch import nn

from semlm.fusion.fuzzy import NUM_FEATURES
from semlm.fusion.backbone import Backbone, BackboneConfig


class LMOutput(NamedTuple):
    logits: torch.Tensor                        # [B, L, V]
    feature_pred: torch.Tensor | None           # [B, L, F] in (0, 1), fusion only
    hidden: torch.Tensor                        # [B, L, d]


@dataclass(frozen=True)
class LMConfig:
    """Which model to build: ``kind`` is "baseline" or "fusion"."""

    backbone: BackboneConfig
    kind: str = "fusion"
    n_features: int = NUM_FEATURES
    gate: bool = True

    KINDS = ("baseline", "fusion")

    def __post_init__(self):
        if self.kind not in self.KINDS:
            raise ValueError(f"unknown model kind {self.kind!r}; choose one of {', '.join(self.KINDS)}")

    def to_dict(self) -> dict:
        return {"backbone": asdict(self.backbone), "kind": self.kind, "n_features": self.n_features, "gate": self.gate}

    @classmethod
    def from_dict(cls, d: dict) -> "LMConfig":
        return cls(backbone=BackboneConfig(**d["backbone"]), kind=d["kind"], n_features=d["n_features"], gate=d["gate"])


class BaselineLM(nn.Module):
    """The backbone alone: features, if given, are ignored."""

    uses_features = False

    def __init__(self, config: LMConfig):
        super().__init__()
        self.config = config
        self.backbone = Backbone(config.backbone)

    def forward(self, input_ids: torch.Tensor, features: torch.Tensor | None = None,
                attention_mask: torch.Tensor | None = None) -> LMOutput:
        hidden = self.backbone.encode(self.backbone.embed(input_ids), attention_mask)
        return LMOutput(self.backbone.logits(hidden), None, hidden)


class FusionLM(nn.Module):
    """Backbone + gated semantic channel + auxiliary feature-reconstruction head."""

    uses_features = True

    def __init__(self, config: LMConfig):
        super().__init__()
        self.config = config
        d, F = config.backbone.d_model, config.n_features
        self.backbone = Backbone(config.backbone)
        self.semantic_projection = nn.Linear(F, d)             # W_s
        self.gate = nn.Linear(d + F, d) if config.gate else None  # W_g
        hidden = max(64, 2 * F)
        self.aux_head = nn.Sequential(nn.Linear(d, hidden), nn.ReLU(), nn.Linear(hidden, F))

    def fuse(self, embeddings: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
        u = self.semantic_projection(features)
        if self.gate is None:
            return embeddings + u
        g = torch.sigmoid(self.gate(torch.cat([embeddings, features], dim=-1)))
        return embeddings + u + g * u

    def forward(self, input_ids: torch.Tensor, features: torch.Tensor | None = None,
                attention_mask: torch.Tensor | None = None) -> LMOutput:
        if features is None:
            raise ValueError("FusionLM needs the semantic features of the inputs (features=[B, L, F])")
        if features.shape[:2] != input_ids.shape or features.shape[-1] != self.config.n_features:
            raise ValueError(
                f"features must have shape {tuple(input_ids.shape) + (self.config.n_features,)}, got {tuple(features.shape)}"
            )
        hidden = self.backbone.encode(self.fuse(self.backbone.embed(input_ids), features), attention_mask)
        return LMOutput(self.backbone.logits(hidden), torch.sigmoid(self.aux_head(hidden)), hidden)


def build_model(config: LMConfig) -> nn.Module:
    return FusionLM(config) if config.kind == "fusion" else BaselineLM(config)
