"""Intent features: the request of the clause being written, causal in the tokens."""

import pytest
import torch

from semlm.core.causality import CAUSAL_TOLERANCE, future_sensitivity
from semlm.data import synthetic as syn
from semlm.data.synthetic import LEXICON
from semlm.data.vocab import Vocabulary
from semlm.fusion.intent import (INTENT_INDEX, MAX_CLAUSES, N_INTENT_FEATURES, TRAINED_STRENGTHS, ClauseIntent,
                                 IntentFeatures, SentenceIntent, declared_intent, intent_rows)
from semlm.fusion.request import REQUEST_FEATURES, Request
from semlm.fusion.config import BackboneConfig
from semlm.fusion.model import build_model, lm_config

VOCAB = Vocabulary.build(LEXICON)
SENTENCE = "Alice cooks the meal , slightly good but she trains the model , extremely awful ?".split()


def features_of(words):
    ids = torch.tensor([VOCAB.encode(words)[:-1]])
    return ids, IntentFeatures(VOCAB)(ids, intent_rows([declared_intent(words)]))[0]


def test_declared_intent_reads_back_the_generator_draws():
    intent = declared_intent(SENTENCE)
    assert [(c.polarity, c.intensity) for c in intent.clauses] == [("positive", 0.2), ("negative", 1.0)]
    assert intent.punctuation == "?"


def test_the_conjunction_position_already_describes_the_next_clause():
    ids, feats = features_of(SENTENCE)
    words = ["<bos>"] + SENTENCE
    conj = words.index("but")
    pos_high, neg_high = INTENT_INDEX["pos_high"], INTENT_INDEX["neg_high"]
    assert feats[: conj, pos_high].eq(1.0).all()            # <bos> .. "good": the positive first clause
    assert feats[conj:, neg_high].eq(1.0).all()             # "but" onwards: the negative second clause
    assert feats[:, INTENT_INDEX["is_question"]].eq(1.0).all()  # the sentence-level request everywhere
    assert feats.shape == (len(words), N_INTENT_FEATURES)


def test_an_intent_model_stays_causal_in_the_tokens():
    torch.manual_seed(0)
    backbone = BackboneConfig(vocab_size=len(VOCAB), d_model=32, n_layers=2, n_heads=2, d_ff=64, dropout=0.0)
    model = build_model(lm_config(backbone, kind="fusion", n_features=N_INTENT_FEATURES))
    mean = torch.full((11,), 0.5)
    request = Request.of("negative", "!", 0.8).vector(mean).expand(1, MAX_CLAUSES, -1)
    featurize = IntentFeatures(VOCAB)
    ids = torch.tensor([VOCAB.encode(SENTENCE)[:-1]])
    for position in range(1, ids.shape[1]):
        change = future_sensitivity(model, lambda x: featurize(x, request), ids, position, VOCAB.id("and"))
        assert change < CAUSAL_TOLERANCE, position


def test_a_strength_request_writes_the_triplet_training_writes_for_that_intensifier():
    mean = torch.full((11,), 0.5)
    strength = slice(REQUEST_FEATURES.index("str_low"), REQUEST_FEATURES.index("str_high") + 1)
    for word, level in syn.INTENSITY.items():
        trained = intent_rows([SentenceIntent((ClauseIntent("positive", level),), ".")])[0, 0, strength]
        assert torch.equal(Request.of("positive", ".", level).vector(mean)[strength], trained), word
    assert TRAINED_STRENGTHS == (0.2, 0.5, 0.8, 1.0)
    assert torch.equal(Request.of("positive", ".").vector(mean)[strength], mean[strength])  # no request: the mean
    with pytest.raises(ValueError, match="strength level"):
        Request.of("positive", ".", 1.5)


def test_a_request_says_the_same_as_control_codes():
    assert Request.of("negative", "?").codes() == ("<neg>", "<?>")
    with pytest.raises(ValueError, match="needs a polarity and a punctuation"):
        Request.of(punctuation="!").codes()  # a code model cannot be asked for punctuation alone
