import random

import numpy as np
import pytest
import torch

from semlm.data import synthetic as syn
from semlm.fusion.features import SyntheticFeatures
from semlm.fusion.fuzzy import FEATURE_INDEX, triangular_memberships

SENTENCE = "Bob cooks the meal , slightly bad but he trains the task , very good !".split()


def row(features, tokens, word, occurrence=0):
    positions = [i for i, t in enumerate(tokens) if t == word]
    return dict(zip(FEATURE_INDEX, features[positions[occurrence]].tolist()))


@pytest.fixture(scope="module")
def matrix(vocab):
    ids = torch.tensor(vocab.encode(SENTENCE))
    return SyntheticFeatures(vocab)(ids).numpy(), vocab.decode(ids, skip_special=False)


def test_hand_checked_adjective_row(matrix):
    features, tokens = matrix
    good = row(features, tokens, "good")
    assert good["is_adj"] == 1 and good["is_noun"] == 0
    np.testing.assert_allclose([good["pos_low"], good["pos_med"], good["pos_high"]], triangular_memberships(1.0), rtol=1e-6)
    np.testing.assert_allclose([good["neg_low"], good["neg_med"], good["neg_high"]], triangular_memberships(0.0), rtol=1e-6)
    # strength comes from the preceding "very" (0.8)
    np.testing.assert_allclose([good["str_low"], good["str_med"], good["str_high"]], triangular_memberships(0.8), rtol=1e-6)


def test_hand_checked_roles_and_flags(matrix):
    features, tokens = matrix
    bob, cooks, meal, he, trains = (row(features, tokens, w) for w in ("Bob", "cooks", "meal", "he", "trains"))
    assert bob["is_subject"] == 1 and bob["is_capitalized"] == 1 and bob["coref_subject"] == 0
    assert cooks["is_verb"] == 1 and cooks["is_head"] == 1
    assert trains["is_verb"] == 1 and trains["is_head"] == 0  # only the main clause's verb is the head
    assert meal["is_noun"] == 1 and meal["is_object"] == 1
    assert he["is_pronoun"] == 1 and he["is_subject"] == 1 and he["coref_subject"] == 1
    assert row(features, tokens, "<bos>")["is_bos"] == 1
    assert row(features, tokens, ",")["is_comma"] == 1
    assert row(features, tokens, "<eos>")["is_eos"] == 1
    assert row(features, tokens, "bad")["neg_high"] == pytest.approx(1.0)


def test_words_without_intensifier_have_zero_strength(matrix):
    features, tokens = matrix
    meal = row(features, tokens, "meal")
    np.testing.assert_allclose([meal["str_low"], meal["str_med"], meal["str_high"]], triangular_memberships(0.0), rtol=1e-6)


def test_padding_rows_are_zero(vocab):
    ids = torch.tensor([vocab.encode(["Eve", "cooks"]) + [vocab.pad_id] * 3])
    assert SyntheticFeatures(vocab)(ids)[0, -3:].abs().sum() == 0


def random_sentences(n, seed):
    rng = random.Random(seed)
    return [syn.sample_sentence(rng, syn.POSITIVE_ADJECTIVES, syn.NEGATIVE_ADJECTIVES) for _ in range(n)]


@pytest.mark.parametrize("seed", range(5))
def test_features_at_t_ignore_every_token_after_t(vocab, seed):
    """Replace the suffix after each cut point with random words: rows <= t must not move."""
    featurize = SyntheticFeatures(vocab)
    rng = random.Random(seed)
    words = list(vocab.tokens[3:])
    for sentence in random_sentences(20, seed):
        ids = torch.tensor(vocab.encode(sentence))
        base = featurize(ids)
        for t in range(1, len(ids) - 1):
            changed = ids.clone()
            changed[t + 1:] = torch.tensor(vocab.ids(rng.choice(words) for _ in range(len(ids) - t - 1)))
            assert torch.equal(featurize(changed)[: t + 1], base[: t + 1]), (sentence, t)


def test_published_features_read_the_final_punctuation(vocab):
    published = SyntheticFeatures(vocab, published=True)
    a = torch.tensor(vocab.encode("Alice reviews the paper , very good !".split()))
    b = torch.tensor(vocab.encode("Alice reviews the paper , very good ?".split()))
    # the first row (<bos>) already differs: the published mode is not causal
    assert not torch.allclose(published(a)[0], published(b)[0])
    causal = SyntheticFeatures(vocab)
    assert torch.equal(causal(a)[:8], causal(b)[:8])


def test_published_nudge_is_capped_at_one(vocab):
    published = SyntheticFeatures(vocab, published=True)
    ids = torch.tensor(vocab.encode("Alice reviews the paper , extremely good !".split()))
    good = published(ids)[7]
    lo = FEATURE_INDEX["str_low"]
    np.testing.assert_allclose(good[lo:lo + 3].numpy(), triangular_memberships(1.0), rtol=1e-6)


def test_published_roles_sit_at_the_authors_fixed_positions_and_their_nouns_include_the(vocab):
    from semlm.fusion.fuzzy import FEATURE_INDEX

    words = ["Bob", "cooks", "the", "meal", ",", "very", "good", "and", "he", "starts", "the", "task", ",",
             "slightly", "bad", "."]
    ids = torch.tensor(vocab.encode(words))
    published, causal = SyntheticFeatures(vocab, published=True)(ids), SyntheticFeatures(vocab)(ids)
    subject, obj, noun = FEATURE_INDEX["is_subject"], FEATURE_INDEX["is_object"], FEATURE_INDEX["is_noun"]
    assert published[:, subject].nonzero().flatten().tolist() == [1]        # first clause only
    assert published[:, obj].nonzero().flatten().tolist() == [4]
    assert causal[:, subject].nonzero().flatten().tolist() == [1, 9]        # every clause
    assert causal[:, obj].nonzero().flatten().tolist() == [4, 12]
    the, very, meal = words.index("the") + 1, words.index("very") + 1, words.index("meal") + 1
    assert published[the, noun] == 1 and published[very, noun] == 1 and published[meal, noun] == 1
    assert causal[the, noun] == 0 and causal[very, noun] == 0 and causal[meal, noun] == 1
