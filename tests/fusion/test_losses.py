import math

import pytest
import torch

from semlm.fusion.losses import adjective_uniformizer, auxiliary_bce, label_smoothed_cross_entropy


def test_cross_entropy_without_smoothing_is_mean_negative_log_likelihood():
    logits = torch.tensor([[[2.0, 0.0, 0.0], [0.0, 1.0, 0.0], [5.0, 5.0, 5.0]]])
    targets = torch.tensor([[0, 2, 1]])
    mask = torch.tensor([[True, True, False]])
    p0 = math.exp(2) / (math.exp(2) + 2)
    p1 = 1 / (2 + math.e)
    expected = -(math.log(p0) + math.log(p1)) / 2
    assert label_smoothed_cross_entropy(logits, targets, mask).item() == pytest.approx(expected, rel=1e-6)


def test_label_smoothing_matches_the_smoothed_target_formula():
    logits = torch.tensor([[[1.0, -1.0, 0.5, 0.0]]])
    targets, mask, eps = torch.tensor([[2]]), torch.tensor([[True]]), 0.02
    log_p = torch.log_softmax(logits[0, 0], -1)
    q = torch.full((4,), eps / 4)
    q[2] += 1 - eps
    expected = -(q * log_p).sum().item()
    assert label_smoothed_cross_entropy(logits, targets, mask, eps).item() == pytest.approx(expected, rel=1e-6)


def test_label_smoothing_out_of_range_is_rejected():
    with pytest.raises(ValueError, match="epsilon"):
        label_smoothed_cross_entropy(torch.zeros(1, 1, 3), torch.zeros(1, 1, dtype=torch.long), torch.ones(1, 1), 1.0)


def test_auxiliary_bce_with_soft_targets_averages_over_features_then_real_positions():
    pred = torch.tensor([[[0.8, 0.3], [0.5, 0.5]]])
    target = torch.tensor([[[0.9, 0.0], [1.0, 1.0]]])
    mask = torch.tensor([[True, False]])

    def bce(p, y):
        return -(y * math.log(p) + (1 - y) * math.log(1 - p))

    expected = (bce(0.8, 0.9) + bce(0.3, 0.0)) / 2
    assert auxiliary_bce(pred, target, mask).item() == pytest.approx(expected, rel=1e-6)


def test_uniformizer_is_kl_to_uniform_within_the_targets_class():
    V = 6
    positive, negative = torch.tensor([1, 2]), torch.tensor([3, 4, 5])
    logits = torch.zeros(1, 3, V)
    logits[0, 0, 1], logits[0, 1, 3] = 2.0, 1.0
    targets = torch.tensor([[2, 5, 0]])  # positive adjective, negative adjective, other
    mask = torch.ones(1, 3, dtype=torch.bool)

    def kl_to_uniform(scores):
        p = torch.softmax(torch.tensor(scores), -1)
        return (p * (p.log() + math.log(len(scores)))).sum().item()

    expected = (kl_to_uniform([2.0, 0.0]) + kl_to_uniform([1.0, 0.0, 0.0])) / 2
    assert adjective_uniformizer(logits, targets, mask, [positive, negative]).item() == pytest.approx(expected, rel=1e-6)


def test_uniformizer_is_zero_for_flat_class_logits_and_without_adjective_targets():
    logits = torch.randn(1, 2, 6)
    logits[..., 1:3] = 0.7
    assert adjective_uniformizer(logits, torch.tensor([[1, 2]]), torch.ones(1, 2), [torch.tensor([1, 2])]).item() == pytest.approx(0, abs=1e-7)
    assert adjective_uniformizer(logits, torch.tensor([[0, 0]]), torch.ones(1, 2), [torch.tensor([1, 2])]).item() == 0


def test_fusion_loss_is_eq5_the_weighted_sum_of_its_terms():
    from types import SimpleNamespace

    from semlm.fusion.losses import FusionLoss
    from semlm.core.train_config import TrainConfig

    torch.manual_seed(0)
    logits, features = torch.randn(2, 3, 6), torch.rand(2, 3, 4)
    out = SimpleNamespace(logits=logits, feature_pred=torch.rand(2, 3, 4) * 0.8 + 0.1)
    batch = SimpleNamespace(input_ids=None, features=features, mask=torch.ones(2, 3, dtype=torch.bool),
                            targets=torch.tensor([[1, 2, 3], [4, 1, 0]]), scored=torch.ones(2, 3, dtype=torch.bool))
    classes = (torch.tensor([1, 2]), torch.tensor([3, 4]))
    loss_fn = FusionLoss.from_config(TrainConfig(label_smoothing=0.1, aux_weight=0.5, uniformizer_weight=0.2), classes)
    loss, parts = loss_fn(lambda *args: out, batch, step=0)
    lm = label_smoothed_cross_entropy(logits, batch.targets, batch.scored, 0.1)
    uni = adjective_uniformizer(logits, batch.targets, batch.scored, classes)
    aux = auxiliary_bce(out.feature_pred, features, batch.mask)
    assert loss.item() == pytest.approx((lm + 0.2 * uni + 0.5 * aux).item(), rel=1e-6)
    assert set(parts) == {"lm", "uniformizer", "aux"} and not any(p.requires_grad for p in parts.values())
    plain = FusionLoss.from_config(TrainConfig(label_smoothing=0.1, aux_weight=0.5, uniformizer_weight=0.0), classes)
    _, parts = plain(lambda *args: SimpleNamespace(logits=logits, feature_pred=None), batch, step=0)
    assert set(parts) == {"lm"}  # no aux head, no uniformizer weight: only the LM term
