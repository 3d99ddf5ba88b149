"""A language model's prediction at t may depend only on tokens <= t (features included)."""

import pytest
import torch

from semlm.core.causality import CAUSAL_TOLERANCE, future_sensitivity
from semlm.fusion.features import SyntheticFeatures
from semlm.fusion.config import BackboneConfig
from semlm.fusion.model import lm_config, build_model

SENTENCE = "Carol starts the model , very good and she cooks the meal , slightly bad .".split()


def tiny_model(vocab, kind, causal):
    torch.manual_seed(0)
    backbone = BackboneConfig(len(vocab), d_model=32, n_layers=2, n_heads=2, d_ff=64, causal=causal)
    return build_model(lm_config(backbone, kind=kind)).eval()


@pytest.mark.parametrize("kind", ["baseline", "fusion"])
def test_prediction_at_t_ignores_tokens_after_t(vocab, kind):
    model, featurize = tiny_model(vocab, kind, causal=True), SyntheticFeatures(vocab)
    ids = torch.tensor(vocab.encode(SENTENCE))
    for t in range(1, len(ids)):
        for replacement in (vocab.id("awful"), vocab.id("?"), vocab.id("Bob")):
            assert future_sensitivity(model, featurize, ids, t, replacement) < CAUSAL_TOLERANCE, (t, replacement)


@pytest.mark.parametrize("kind", ["baseline", "fusion"])
def test_published_setting_reads_the_future(vocab, kind):
    """The authors' setting has no causal mask: earlier logits move when a later token changes."""
    model = tiny_model(vocab, kind, causal=False)
    featurize = SyntheticFeatures(vocab, published=True)
    ids = torch.tensor(vocab.encode(SENTENCE))
    assert future_sensitivity(model, featurize, ids, 7, vocab.id("awful")) > 1e-3


def test_published_features_alone_break_causality_of_a_causal_model(vocab):
    """Even with the causal mask, sentence-level features leak the final punctuation."""
    model = tiny_model(vocab, "fusion", causal=True)
    ids = torch.tensor(vocab.encode(SENTENCE))
    leaky = SyntheticFeatures(vocab, published=True)
    assert future_sensitivity(model, leaky, ids, len(ids) - 2, vocab.id("!")) > 1e-4


def test_probe_rejects_a_position_outside_the_sequence(vocab):
    model = tiny_model(vocab, "baseline", causal=True)
    with pytest.raises(ValueError, match="position must be in"):
        future_sensitivity(model, SyntheticFeatures(vocab), torch.tensor(vocab.encode(["Bob"])), 0, 3)
