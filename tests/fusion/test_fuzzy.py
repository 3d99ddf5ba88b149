import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from semlm.fusion import fuzzy


def test_membership_is_one_at_the_centre():
    for c in fuzzy.CENTRES:
        assert fuzzy.membership(c, c) == pytest.approx(1.0)


def test_membership_drops_by_factor_0_9_per_bandwidth():
    assert fuzzy.membership(0.2 + 0.35, 0.2, 0.35) == pytest.approx(0.9)
    assert fuzzy.membership(1.0, 0.3, 0.35) == pytest.approx(0.81)


def test_membership_of_zero_signal_matches_hand_computation():
    expected = [0.9 ** (0.2 / 0.35), 0.9 ** (0.6 / 0.35), 0.9 ** (1.0 / 0.35)]
    np.testing.assert_allclose(fuzzy.triangular_memberships(0.0), expected)
    assert expected[0] == pytest.approx(0.9415, abs=1e-4)


@given(st.floats(0, 1), st.floats(0, 1), st.floats(0.01, 2))
def test_membership_lies_in_zero_one(x, c, tau):
    mu = float(fuzzy.membership(x, c, tau))
    assert 0 < mu <= 1


@given(st.floats(0, 1), st.floats(0, 1), st.floats(0, 1))
def test_membership_decreases_with_distance(c, x1, x2):
    near, far = sorted([x1, x2], key=lambda x: abs(x - c))
    assert fuzzy.membership(near, c) >= fuzzy.membership(far, c)


def test_triplet_shape_follows_input():
    assert fuzzy.triangular_memberships(np.zeros((4, 5))).shape == (4, 5, 3)


def test_bank_has_the_papers_22_predicates_in_order():
    assert len(fuzzy.FEATURE_NAMES) == 22
    assert fuzzy.FEATURE_NAMES[:3] == ("is_noun", "is_verb", "is_adj")
    assert fuzzy.FEATURE_NAMES[-3:] == ("coref_subject", "is_capitalized", "is_pronoun")
    assert fuzzy.feature_index("str_high") == 18


def test_unknown_feature_name_lists_the_valid_ones():
    with pytest.raises(ValueError, match="unknown feature 'pos_hgih'.*pos_high"):
        fuzzy.feature_index("pos_hgih")


def test_non_positive_bandwidth_is_rejected():
    with pytest.raises(ValueError, match="tau must be > 0"):
        fuzzy.membership(0.5, 0.2, 0.0)


@given(st.lists(st.floats(0, 1), min_size=1, max_size=16), st.floats(0.01, 2))
def test_numpy_and_torch_memberships_come_from_one_function_and_agree(xs, tau):
    import torch

    from_numpy = fuzzy.triangular_memberships(np.array(xs), tau=tau)
    from_torch = fuzzy.triangular_memberships(torch.tensor(xs, dtype=torch.float64), tau=tau)
    assert isinstance(from_numpy, np.ndarray) and isinstance(from_torch, torch.Tensor)
    assert from_torch.dtype == torch.float64 and from_torch.shape == (len(xs), 3)
    np.testing.assert_allclose(from_torch.numpy(), from_numpy, rtol=1e-12)
    float32 = fuzzy.triangular_memberships(torch.tensor(xs, dtype=torch.float32), tau=tau)
    assert float32.dtype == torch.float32
    np.testing.assert_allclose(float32.numpy(), from_numpy, rtol=1e-5)


def test_torch_membership_is_differentiable_and_stays_a_tensor():
    import torch

    x = torch.tensor([0.2, 0.55], requires_grad=True)
    mu = fuzzy.membership(x, 0.2)
    mu.sum().backward()
    assert x.grad is not None and x.grad[1] < 0  # moving away from the centre lowers the membership
    assert mu.detach().tolist() == pytest.approx([1.0, 0.9])
