"""The three training losses of the semantic-fusion paper (Section 2, Eqs. 5-8).

    L = L_LM^LS + lambda_aux * L_aux + lambda_uni * L_uni          (Eq. 5)

All three average over the scored (non-pad) positions given by ``mask``. :class:`FusionLoss`
is Eq. 5 as the loss an experiment hands to the trainer (``loss_fn(model, batch, step)``).

Paper B's objective is :func:`semlm.idea.targets.idea_gated_loss`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import torch
import torch.nn.functional as F


def _masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    mask = mask.to(values.dtype)
    return (values * mask).sum() / mask.sum().clamp_min(1.0)


def label_smoothed_cross_entropy(logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor,
                                 epsilon: float = 0.0) -> torch.Tensor:
    """Eq. 6: CE against q = (1 - eps) onehot(y) + eps / |V|, averaged over non-pad positions.

    ``epsilon=0`` is the plain cross-entropy used for every evaluation number.
    """
    if not 0.0 <= epsilon < 1.0:
        raise ValueError(f"label smoothing epsilon must be in [0, 1), got {epsilon}")
    per_token = F.cross_entropy(logits.flatten(0, -2), targets.flatten(), reduction="none", label_smoothing=epsilon)
    return _masked_mean(per_token, mask.flatten())


def auxiliary_bce(feature_pred: torch.Tensor, features: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Eq. 7: BCE with soft targets s_{t,f} in [0, 1], averaged over non-pad token-feature pairs."""
    per_pair = F.binary_cross_entropy(feature_pred, features, reduction="none")  # [B, L, F]
    return _masked_mean(per_pair.mean(-1), mask)


def adjective_uniformizer(logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor,
                          classes: Sequence[torch.Tensor]) -> torch.Tensor:
    """Eq. 8: KL(softmax(logits restricted to class C) || Uniform(C)) at positions whose target is in C.

    ``classes`` holds the token ids of each adjective class (positive, negative). As in the
    authors' code, the KL is averaged within each class that occurs in the batch and then
    across those classes; the class includes held-out adjectives, so the term pushes mass
    toward words the model never sees as targets. Returns 0 when no target is an adjective.
    """
    flat_logits, flat_targets, flat_mask = logits.flatten(0, -2), targets.flatten(), mask.flatten().bool()
    per_class = []
    for ids in classes:
        ids = ids.to(flat_logits.device)
        rows = flat_mask & torch.isin(flat_targets, ids)
        if not rows.any():
            continue
        log_p = torch.log_softmax(flat_logits[rows][:, ids], dim=-1)
        kl = (log_p.exp() * (log_p + math.log(len(ids)))).sum(-1)  # sum p (log p - log 1/K)
        per_class.append(kl.mean())
    if not per_class:
        return flat_logits.new_zeros(())
    return torch.stack(per_class).mean()


@dataclass(frozen=True, eq=False)
class FusionLoss:
    """Eq. 5 for one batch of ``LMTensors``: ``loss_fn(model, batch, step) -> (loss, parts)`` of the trainer.

    The auxiliary term only exists for models with an aux head and a non-zero ``aux_weight``; the
    uniformizer only with adjective classes and a non-zero ``uniformizer_weight``. ``parts`` holds
    each term as a detached 0-d tensor, not a Python float: converting is the caller's choice (a
    ``.item()`` per term would wait for the device at every step).
    """

    label_smoothing: float
    aux_weight: float
    uniformizer_weight: float
    adjective_classes: tuple[torch.Tensor, ...] = ()

    @classmethod
    def from_config(cls, config, adjective_classes: Sequence[torch.Tensor] = ()) -> "FusionLoss":
        """The loss weights of a :class:`semlm.core.train_config.TrainConfig` and the adjective classes of Eq. 8."""
        return cls(config.label_smoothing, config.aux_weight, config.uniformizer_weight, tuple(adjective_classes))

    def __call__(self, model, batch, step: int | None = None) -> tuple[torch.Tensor, dict]:
        out = model(batch.input_ids, batch.features, batch.mask)
        lm = label_smoothed_cross_entropy(out.logits, batch.targets, batch.scored, self.label_smoothing)
        loss, parts = lm, {"lm": lm.detach()}  # no <pad> targets
        if self.uniformizer_weight and self.adjective_classes:
            uni = adjective_uniformizer(out.logits, batch.targets, batch.scored, self.adjective_classes)
            loss = loss + self.uniformizer_weight * uni
            parts["uniformizer"] = uni.detach()
        if out.feature_pred is not None and self.aux_weight:
            aux = auxiliary_bce(out.feature_pred, batch.features, batch.mask)
            loss = loss + self.aux_weight * aux
            parts["aux"] = aux.detach()
        return loss, parts
