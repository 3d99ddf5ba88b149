"""The SST-2 weak-supervision feature bank: hand-checked sentences and causality."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from semlm.fusion.fuzzy import FEATURE_INDEX, triangular_memberships
from semlm.fusion.sst2_features import (
    COARSE_TAGS, SST2Features, TagPrior, build_sst2_tables, build_vocabulary, capitalised_words, heuristic_tag,
    load_spacy_tagger, map_unknown, tag_prior, vader_lexicon,
)

SENTENCES = [
    "the movie is not very good , but he loved it".split(),
    "a wonderful cast makes it extremely funny !".split(),
    "she hated the slow ending ?".split(),
]
#: Hand-set tag prior (no tagger in these tests): word -> majority tag.
TAGS = {"movie": "NOUN", "cast": "NOUN", "ending": "NOUN", "is": "VERB", "loved": "VERB", "makes": "VERB",
        "hated": "VERB", "good": "ADJ", "wonderful": "ADJ", "funny": "ADJ", "slow": "ADJ"}


def one_hot(tag):
    return tuple(float(t == tag) for t in COARSE_TAGS)


@pytest.fixture(scope="module")
def bank():
    vocab = build_vocabulary(SENTENCES, min_freq=1)
    words = {w for s in SENTENCES for w in s}
    prior = TagPrior({w: one_hot(TAGS.get(w, "OTHER")) for w in words}, "hand-set")
    return SST2Features(vocab, build_sst2_tables(vocab, prior, vader_lexicon(), capitalised=set())), vocab


def features_of(bank, words):
    featurize, vocab = bank
    ids = torch.tensor(vocab.encode(map_unknown(words, vocab)))
    return featurize(ids).numpy(), ["<bos>"] + list(words) + ["<eos>"]


def column(feats, tokens, word, name, occurrence=0):
    rows = [i for i, t in enumerate(tokens) if t == word]
    return feats[rows[occurrence], FEATURE_INDEX[name]]


def test_negated_intensified_adjective(bank):
    feats, tokens = features_of(bank, SENTENCES[0])
    good = feats[tokens.index("good")]
    # "not" two tokens back flips VADER's +1.9 (x = 1.9 / 4) onto the negative channel, damped by 0.74
    np.testing.assert_allclose(good[FEATURE_INDEX["neg_low"]:FEATURE_INDEX["neg_high"] + 1],
                               triangular_memberships(1.9 / 4 * 0.74), rtol=1e-5)
    np.testing.assert_allclose(good[FEATURE_INDEX["pos_low"]:FEATURE_INDEX["pos_high"] + 1],
                               triangular_memberships(0.0), rtol=1e-5)
    # "very" just before it sets the strength to 0.8 (the paper's map)
    np.testing.assert_allclose(good[FEATURE_INDEX["str_low"]:FEATURE_INDEX["str_high"] + 1],
                               triangular_memberships(0.8), rtol=1e-5)
    assert good[FEATURE_INDEX["is_adj"]] == 1.0


def test_positive_word_after_booster(bank):
    feats, tokens = features_of(bank, SENTENCES[1])
    funny = feats[tokens.index("funny")]
    np.testing.assert_allclose(funny[FEATURE_INDEX["pos_low"]:FEATURE_INDEX["pos_high"] + 1],
                               triangular_memberships(1.9 / 4), rtol=1e-5)
    np.testing.assert_allclose(funny[FEATURE_INDEX["str_low"]:FEATURE_INDEX["str_high"] + 1],
                               triangular_memberships(1.0), rtol=1e-5)


def test_shallow_roles_come_from_the_prefix(bank):
    feats, tokens = features_of(bank, SENTENCES[0])
    assert column(feats, tokens, "movie", "is_subject") == 1.0
    assert column(feats, tokens, "is", "is_head") == 1.0
    assert column(feats, tokens, "loved", "is_head") == 0.0  # verb of the second clause
    assert column(feats, tokens, "he", "is_subject") == 1.0  # "but" opens a new clause
    assert column(feats, tokens, "it", "is_object") == 1.0   # after the clause's verb
    assert column(feats, tokens, "it", "is_subject") == 0.0


def test_boundaries_pronouns_and_coreference(bank):
    feats, tokens = features_of(bank, SENTENCES[0])
    assert feats[0, FEATURE_INDEX["is_bos"]] == 1.0 and feats[-1, FEATURE_INDEX["is_eos"]] == 1.0
    assert column(feats, tokens, ",", "is_comma") == 1.0
    assert column(feats, tokens, "he", "is_pronoun") == 1.0
    assert column(feats, tokens, "he", "coref_subject") == 1.0  # a noun ("movie") came before
    feats, tokens = features_of(bank, SENTENCES[2])
    assert column(feats, tokens, "she", "coref_subject") == 0.0  # nothing before it to refer to
    assert column(feats, tokens, "?", "is_question") == 1.0


def test_words_outside_the_vocabulary_are_unk_with_neutral_features(bank):
    feats, tokens = features_of(bank, "the zyzzyva is good".split())
    np.testing.assert_allclose(feats[2, FEATURE_INDEX["pos_low"]:FEATURE_INDEX["pos_high"] + 1],
                               triangular_memberships(0.0), rtol=1e-5)


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_feature_at_t_ignores_tokens_after_t(bank, data):
    featurize, vocab = bank
    length = data.draw(st.integers(3, 14))
    ids = torch.tensor([vocab.bos_id] + data.draw(st.lists(st.integers(3, len(vocab) - 1), min_size=length - 1,
                                                           max_size=length - 1)))
    t = data.draw(st.integers(1, length - 1))
    changed = ids.clone()
    changed[t:] = torch.tensor(data.draw(st.lists(st.integers(3, len(vocab) - 1), min_size=length - t,
                                                  max_size=length - t)))
    torch.testing.assert_close(featurize(ids)[:t], featurize(changed)[:t], rtol=0, atol=0)


def test_published_features_read_the_end_of_the_sentence(bank):
    featurize, vocab = bank
    published = SST2Features(vocab, featurize.tables, published=True)
    calm = torch.tensor(vocab.encode("a wonderful cast makes it extremely funny".split()))
    loud = torch.tensor(vocab.encode("a wonderful cast makes it extremely funny !".split()))
    first = slice(0, 3)
    assert torch.equal(featurize(calm)[first], featurize(loud)[first])
    assert not torch.equal(published(calm)[first], published(loud)[first])


def test_vocabulary_keeps_frequent_words_and_unk():
    vocab = build_vocabulary([["a", "b", "a"], ["a", "c", "b"]], min_freq=2)
    assert vocab.tokens == ("<pad>", "<bos>", "<eos>", "<unk>", "a", "b")
    assert map_unknown(["a", "c"], vocab) == ["a", "<unk>"]
    with pytest.raises(ValueError, match="min_freq must be >= 1"):
        build_vocabulary([["a"]], min_freq=0)


def test_heuristic_tagger_without_spacy():
    lexicon = vader_lexicon()
    assert heuristic_tag("is") == "VERB"
    assert heuristic_tag("the") == "OTHER"
    assert heuristic_tag("wonderful") == "ADJ"
    assert heuristic_tag("happiness") == "NOUN"
    prior = tag_prior([["the", "movie", "is", "dull"]], None, lexicon)
    assert prior.source.startswith("heuristic") and prior.majority("dull") == "ADJ"


def test_spacy_tag_prior_in_context():
    tagger = load_spacy_tagger()
    if tagger is None:
        pytest.skip("no spaCy English model installed (the feature bank falls back to heuristic_tag)")
    prior = tag_prior([["the", "movie", "is", "good"], ["a", "good", "film"]], tagger)
    assert prior.majority("good") == "ADJ" and prior.majority("movie") == "NOUN" and prior.majority("is") == "VERB"
    assert sum(prior.get("good")) == pytest.approx(1.0)


def test_capitalised_words_from_phrase_trees():
    trees = ["(3 (2 Paris) (3 (2 loves) (2 Paris)))", "(2 (2 The) (2 (2 the) (2 end)))"]
    assert capitalised_words(trees) == frozenset({"paris"})
