"""The CTRL-style control-code baseline: codes on the data, the grammar shifted past them."""

import importlib

import pytest
import torch

from semlm.fusion.control_codes import CODE_TOKENS, sentence_polarity, with_codes
from semlm.data.synthetic import SyntheticConfig
from semlm.fusion.config import BackboneConfig
from semlm.fusion.decoding import ClauseGrammar, generate
from semlm.fusion.model import build_model, lm_config
from semlm.fusion.request import Request
from semlm.fusion.synthetic_experiment import prepare_data


def test_codes_describe_polarity_and_punctuation():
    one = ["Alice", "cooks", "the", "meal", ",", "very", "good", "!"]
    mixed = one[:-1] + ["but", "she", "starts", "the", "task", ",", "slightly", "bad", "?"]
    assert with_codes([one, mixed]) == [["<pos>", "<!>"] + one, ["<mixed>", "<?>"] + mixed]
    assert sentence_polarity(["Bob", "bad", "poor"]) == "negative"


def test_code_tokens_are_inputs_but_never_scored_targets():
    data = prepare_data(SyntheticConfig(n_train=8, n_val=4), codes=True)
    assert set(CODE_TOKENS) <= set(data.vocab.tokens)
    first = data.corpus.train[0]
    expected = with_codes([first])[0][:2]
    assert data.vocab.decode(data.train.input_ids[0, 1:3]) == expected
    assert sorted(data.code_ids) == sorted(data.vocab.ids(CODE_TOKENS))


def _uniform(vocab_size):
    """A baseline LM whose head is zero, so every next word is equally likely (the grammar alone decides)."""
    model = build_model(lm_config(BackboneConfig(vocab_size, d_model=8, n_layers=1, n_heads=2, d_ff=8), "baseline"))
    with torch.no_grad():
        model.backbone.embed.weight.zero_()
    return model.eval()


def test_generation_after_codes_follows_the_grammar_and_drops_the_codes():
    data = prepare_data(SyntheticConfig(n_train=8, n_val=4), codes=True)
    grammar = ClauseGrammar(data.vocab, offset=2)
    out = generate(_uniform(len(data.vocab)), data.featurizer, grammar, 5, Request.of("negative", "?"), seed=0)
    assert all(grammar.parses(sentence) for sentence in out)


def test_a_code_model_hears_the_request_as_its_codes(monkeypatch):
    decoding = importlib.import_module("semlm.fusion.decoding.generate")  # the module, not its generate()

    data = prepare_data(SyntheticConfig(n_train=8, n_val=4), codes=True)
    grammar, model, starts = ClauseGrammar(data.vocab, offset=2), _uniform(len(data.vocab)), []
    sample_ids = decoding.sample_ids
    monkeypatch.setattr(decoding, "sample_ids", lambda model, start, *a, **k: starts.append(start) or
                        sample_ids(model, start, *a, **k))
    generate(model, data.featurizer, grammar, 2, Request.of("negative", "?"), seed=0)
    assert data.vocab.decode(starts[0][0], skip_special=False) == ["<bos>", "<neg>", "<?>"]
    with pytest.raises(ValueError, match="needs a polarity and a punctuation"):
        generate(model, data.featurizer, grammar, 2, Request(), seed=0)
