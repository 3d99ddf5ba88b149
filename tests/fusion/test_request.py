"""One request type for every paper-A variant: its feature values, its codes, its hard reading."""

import pytest
import torch

from semlm.data import synthetic as syn
from semlm.data.vocab import Vocabulary
from semlm.fusion.decoding import ClauseGrammar, HardControl
from semlm.fusion.decoding.grammar import PUNCT
from semlm.fusion.request import PAPER_REQUESTS, REQUEST_FEATURES, Request


def test_a_request_of_writes_whole_triplets_and_the_punctuation_flags():
    request = Request.of("negative", "!", 0.8)
    features = request.features()
    assert set(features) == set(REQUEST_FEATURES)
    assert features["neg_high"] == 1.0 > features["pos_high"]
    assert (features["is_exclamation"], features["is_question"]) == (1.0, 0.0)
    assert (request.polarity, request.punctuation) == ("negative", "!")
    assert Request.of(punctuation="?").features() == {"is_question": 1.0, "is_exclamation": 0.0}


def test_the_vector_leaves_unset_predicates_at_the_mean():
    mean = torch.full((len(REQUEST_FEATURES),), 0.25)
    row = Request({"pos_high": 0.9}).vector(mean)
    changed = (row != mean).nonzero().flatten().tolist()
    assert changed == [REQUEST_FEATURES.index("pos_high")] and row[changed[0]] == pytest.approx(0.9)


def test_the_paper_requests_are_hard_and_heard_as_their_codes():
    assert {name: (r.hard_class, r.codes()) for name, r in PAPER_REQUESTS.items()} == {
        "pos": ("positive", ("<pos>", "<!>")), "neg": ("negative", ("<neg>", "<?>"))}
    assert Request({"pos_high": 0.5}).hard_class is None  # below the threshold: a soft request only


def test_hard_control_fixes_the_punctuation_the_request_names():
    vocab = Vocabulary.build(syn.LEXICON)
    grammar = ClauseGrammar(vocab)
    for punctuation in syn.END_PUNCTUATION:
        keep = HardControl(grammar, Request({}, punctuation)).keep[PUNCT]
        assert {vocab.tokens[i] for i in keep.nonzero().flatten()} & set(syn.END_PUNCTUATION) == {punctuation}
    assert HardControl(grammar, Request({"is_question": 1.0})).keep.all()  # a value alone does not restrict
