import math

import pytest
import torch

from semlm.core.metrics import TokenScores, focus_cross_entropy, perplexity


@pytest.fixture
def scores():
    return TokenScores(cross_entropy=torch.tensor([1.0, 2.0, 3.0, 0.5], dtype=torch.float64),
                       targets=torch.tensor([5, 6, 7, 5]), feature_squared_error=None)


def test_perplexity_is_exp_of_mean_cross_entropy(scores):
    assert perplexity(scores) == pytest.approx(math.exp(6.5 / 4))


def test_seen_only_perplexity_drops_held_out_targets(scores):
    assert perplexity(scores, exclude_targets=[7]) == pytest.approx(math.exp(3.5 / 3))


def test_seen_only_perplexity_is_nan_when_nothing_is_left(scores):
    assert math.isnan(perplexity(scores, exclude_targets=[5, 6, 7]))


def test_focus_cross_entropy_averages_per_occurrence(vocab):
    good, bad = vocab.id("good"), vocab.id("bad")
    s = TokenScores(torch.tensor([1.0, 3.0, 2.0], dtype=torch.float64), torch.tensor([good, good, bad]), None)
    out = focus_cross_entropy(s, vocab, ["good", "bad", "!"])
    assert out["good"] == pytest.approx(2.0) and out["bad"] == pytest.approx(2.0)
    assert math.isnan(out["!"])


from semlm.core.records import Interval
from semlm.fusion.metrics import control_accuracy, held_out_hit_rate, polarity_confusion, realised_polarity

POS = "Bob cooks the meal , very good !".split()
NEG = "Eve starts the task , slightly awful ?".split()


def test_realised_polarity_reads_the_adjective_slot():
    assert realised_polarity(POS) == "POS" and realised_polarity(NEG) == "NEG"
    assert realised_polarity(["Bob"]) == "OTHER"


def test_control_accuracy_counts_adjective_and_punctuation():
    out = control_accuracy([POS, NEG, POS], "POS", "!")
    assert out["adj_acc"]["k"] == 2 and out["punct_acc"]["value"] == pytest.approx(2 / 3)
    assert out["adj_acc"]["ci_low"] < 2 / 3 < out["adj_acc"]["ci_high"]


def test_wilson_bounds_match_a_known_value_and_stay_in_range():
    rate = Interval.of_proportion(200, 200)
    assert rate.high == 1.0 and rate.low == pytest.approx(0.9812, abs=1e-4)
    rate = Interval.of_proportion(10, 20)
    assert (rate.low, rate.high) == pytest.approx((0.2993, 0.7007), abs=1e-4)
    assert math.isnan(Interval.of_proportion(0, 0).low)


def test_confusion_and_held_out_hits():
    assert polarity_confusion({"POS": [POS, NEG], "NEG": [NEG]}) == {
        "POS": {"POS": 1, "NEG": 1, "OTHER": 0}, "NEG": {"POS": 0, "NEG": 1, "OTHER": 0}}
    assert held_out_hit_rate([POS, NEG], {"awful"})["value"] == 0.5


def test_mean_interval_matches_a_hand_computed_t_interval():
    from semlm.core.metrics import mean_interval

    got = mean_interval([1.0, 2.0, 3.0])  # mean 2, sd 1, t(0.975, 2) = 4.302653
    assert got["mean"] == pytest.approx(2.0)
    assert got["ci_low"] == pytest.approx(2.0 - 4.302653 / 3 ** 0.5)
    assert got["ci_high"] == pytest.approx(2.0 + 4.302653 / 3 ** 0.5)
    clipped = mean_interval([0.0, 1.0, 1.0], bounds=(0.0, 1.0))
    assert clipped["ci_low"] == 0.0 and clipped["ci_high"] == 1.0
    assert mean_interval([5.0]) == {"mean": 5.0, "ci_low": 5.0, "ci_high": 5.0, "values": [5.0]}
    with pytest.raises(ValueError, match="at least one"):
        mean_interval([])


def test_the_pad_after_eos_is_an_input_but_never_a_scored_target():
    from semlm.data.synthetic import SyntheticConfig
    from semlm.fusion.synthetic_experiment import prepare_data

    data = prepare_data(SyntheticConfig(n_train=16, n_val=16))
    pad, eos = data.vocab.pad_id, data.vocab.eos_id
    for tensors in (data.train, data.val):
        assert not (tensors.targets[tensors.scored] == pad).any()
        assert (tensors.scored == (tensors.mask & (tensors.targets != pad))).all()
    extra = data.val.mask & ~data.val.scored  # validation keeps one <eos> -> <pad> position per sentence
    assert (extra.sum(1) == 1).all() and (data.val.input_ids[extra] == eos).all()


def test_training_loss_ignores_the_pad_target_after_eos():
    import torch

    from semlm.data.synthetic import SyntheticConfig
    from semlm.fusion.synthetic_experiment import prepare_data
    from semlm.fusion.losses import label_smoothed_cross_entropy

    data = prepare_data(SyntheticConfig(n_train=16, n_val=16))
    val = data.val
    logits = torch.randn(*val.targets.shape, len(data.vocab), requires_grad=True)
    label_smoothed_cross_entropy(logits, val.targets, val.scored, 0.02).backward()
    extra = val.mask & ~val.scored
    assert logits.grad[extra].abs().sum() == 0 and logits.grad[val.scored].abs().sum() > 0


def test_perplexity_of_scores_refuses_a_second_positional_argument():
    scores = TokenScores(torch.tensor([1.0, 2.0], dtype=torch.float64), torch.tensor([5, 7]), None)
    with pytest.raises(TypeError, match="exclude_targets"):
        perplexity(scores, [7])


def test_block_perplexity_scores_no_target_positions_of_no_block():
    """Blocks of token ids mark "no token" past the end of the text with NO_TARGET: never
    scored, so a block padded with it has the perplexity of its real targets alone."""
    from types import SimpleNamespace

    from semlm.core.metrics import NO_TARGET

    class Uniform(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bias = torch.nn.Parameter(torch.zeros(4))

        def forward(self, inputs):
            return SimpleNamespace(logits=self.bias.expand(*inputs.shape, 4))

    def blocks(targets):
        batch = SimpleNamespace(inputs=torch.zeros_like(targets), targets=targets)
        return SimpleNamespace(batches=lambda size: [batch])

    real = torch.tensor([[1, 2, 3]])
    padded = torch.tensor([[1, 2, 3, NO_TARGET, NO_TARGET]])
    assert perplexity(Uniform(), blocks(real)) == pytest.approx(4.0)
    assert perplexity(Uniform(), blocks(padded)) == pytest.approx(4.0)
