import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import RepetitionPenaltyLogitsProcessor

from semlm.data import synthetic as syn
from semlm.fusion.decoding import (PAPER_MIXTURE, ClauseGrammar, DecodingConfig, GrammarMask, LastKRepetitionPenalty,
                            generate, group_uniform_mixture, nucleus)
from semlm.fusion.decoding.grammar import END, INTENS, STATES, _WORDS_FOR_STATE
from semlm.core import runs
from semlm.fusion.synthetic_experiment import SYNTHETIC, prepare_data, synthetic_runs
from semlm.fusion.profiles import synthetic_profile
from semlm.fusion.request import Request


@pytest.fixture(scope="module")
def grammar(vocab):
    return ClauseGrammar(vocab)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    profile = synthetic_profile("smoke")
    context = runs.RunContext(profile.name, tmp_path_factory.mktemp("runs"), workers=1, progress=False)
    fusion, = runs.run_many(SYNTHETIC, synthetic_runs(profile, ("fusion",), ("causal",)), context)
    data = prepare_data(profile.corpus)
    return fusion.load(), data.featurizer, ClauseGrammar(data.vocab)


# --- grammar -------------------------------------------------------------------------------

def test_prompt_that_fits_starts_decoding_at_intens(grammar):
    parsed = grammar.parse_prefix("Carol starts the model,")
    assert parsed.words == ("Carol", "starts", "the", "model", ",") and parsed.state == INTENS


@pytest.mark.parametrize("prompt, message", [
    ("Carol eats the model", "prompt word 2 'eats' is not in the vocabulary; the grammar expects VERB here: one of finishes"),
    ("Carol starts a model", "prompt word 3 'a' is not in the vocabulary; the grammar expects THE"),
    ("Carol starts the good", "prompt word 4 'good' does not fit the grammar; expected OBJ: one of task, paper"),
    ("starts the model", "prompt word 1 'starts' does not fit the grammar; expected SUBJ"),
    ("Bob cooks the meal, very bad. and", "goes past the end of the clause at word 9"),
])
def test_bad_prompt_names_the_first_offending_word_and_the_expectation(grammar, prompt, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(".", r"\.")):
        grammar.parse_prefix(prompt)


clause_words = st.tuples(*[st.sampled_from(_WORDS_FOR_STATE[s]) for s in range(END)])


@given(clause_words, st.integers(0, END))
def test_every_grammatical_prefix_parses_to_its_length(grammar, words, cut):
    parsed = grammar.parse_prefix(" ".join(words[:cut]))
    assert parsed.state == cut and parsed.words == words[:cut]


@given(clause_words, st.integers(0, END - 1), st.sampled_from(syn.LEXICON))
def test_a_word_from_the_wrong_slot_is_rejected(grammar, words, position, intruder):
    if intruder in _WORDS_FOR_STATE[position]:
        return
    with pytest.raises(ValueError, match=f"prompt word {position + 1} '{intruder}'"):
        grammar.parse_prefix(" ".join(words[:position] + (intruder,)))


def test_grammar_mask_keeps_exactly_the_states_words(grammar, vocab):
    mask = GrammarMask(grammar)
    for state in range(END + 1):
        ids = torch.full((2, state + 1), vocab.bos_id)
        kept = torch.isfinite(mask(ids, torch.zeros(2, len(vocab))))[0]
        assert {vocab.tokens[i] for i in kept.nonzero().flatten()} == set(grammar.words(state)), STATES[state]


# --- controls ------------------------------------------------------------------------------

def test_unknown_request_predicate_lists_the_valid_names():
    with pytest.raises(ValueError, match="unknown request predicate 'happy'; choose from: pos_low.*is_exclamation"):
        Request({"happy": 1.0})
    with pytest.raises(ValueError, match="unknown punctuation ';'"):
        Request({}, ";")


@pytest.mark.parametrize("value", [1.5, -0.1, float("nan"), "high", True])
def test_request_value_outside_zero_one_is_rejected(value):
    with pytest.raises(ValueError, match="request predicate pos_high must be a number in \\[0, 1\\]"):
        Request({"pos_high": value})


# --- mixture and penalties ----------------------------------------------------------------

@settings(deadline=None)
@given(st.lists(st.floats(-20, 20), min_size=6, max_size=6), st.floats(0, 1), st.floats(0.1, 5),
       st.sets(st.integers(0, 5), min_size=1))
def test_mixture_is_a_distribution_over_the_whole_class(logits, alpha, temperature, members):
    mask = torch.zeros(6, dtype=torch.bool)
    mask[list(members)] = True
    q = group_uniform_mixture(torch.tensor([logits]), mask, alpha, temperature)[0]
    assert q.sum().item() == pytest.approx(1.0, abs=1e-5)
    assert (q[~mask] == 0).all()
    if alpha > 1e-6:  # (a denormal alpha underflows in float32; it means "no mixing" anyway)
        assert (q[mask] > 0).all()  # every class member, held-out ones included, survives until truncation


def test_mixture_with_alpha_one_is_uniform_on_the_class():
    mask = torch.tensor([True, False, True, True])
    q = group_uniform_mixture(torch.tensor([[9.0, 1.0, -5.0, 0.0]]), mask, 1.0)[0]
    torch.testing.assert_close(q, torch.tensor([1 / 3, 0, 1 / 3, 1 / 3]))


def test_nucleus_keeps_the_smallest_top_set_reaching_top_p():
    q = nucleus(torch.tensor([[0.5, 0.3, 0.15, 0.05]]), 0.8)[0]
    torch.testing.assert_close(q, torch.tensor([0.625, 0.375, 0.0, 0.0]))
    assert nucleus(torch.tensor([[0.9, 0.1]]), 0.1)[0, 0] == 1.0  # always at least one word


@pytest.mark.parametrize("kwargs, message", [({"alpha": 1.2}, "alpha"), ({"temperature": 0.0}, "temperature")])
def test_mixture_rejects_out_of_range_settings(kwargs, message):
    with pytest.raises(ValueError, match=message):
        group_uniform_mixture(torch.zeros(1, 3), torch.ones(3, dtype=torch.bool), **{"alpha": 0.5, **kwargs})


def test_last_k_penalty_is_transformers_penalty_on_the_last_k_tokens():
    scores = torch.tensor([[2.0, -1.0, 0.5, 3.0, -2.0]])
    ids = torch.tensor([[0, 1, 3, 4]])
    torch.testing.assert_close(LastKRepetitionPenalty(1.5, k=10)(ids, scores.clone()),
                               RepetitionPenaltyLogitsProcessor(1.5)(ids, scores.clone()))
    only_recent = LastKRepetitionPenalty(1.5, k=2)(ids, scores.clone())
    assert only_recent[0, 0] == 2.0 and only_recent[0, 3] == 2.0 and only_recent[0, 4] == pytest.approx(-3.0)


# --- generation ----------------------------------------------------------------------------

def test_every_generated_sentence_parses(trained):
    model, featurize, grammar = trained
    for controls in ({}, {"pos_high": 0.8}, {"neg_high": 1.0, "is_question": 1.0}):
        for sentence in generate(model, featurize, grammar, 50, Request(controls), seed=3):
            assert grammar.parses(sentence), sentence


@pytest.mark.parametrize("controls, wanted, punct", [
    ({"pos_high": 0.95, "str_high": 0.9}, syn.POSITIVE_ADJECTIVES, "!"),
    ({"neg_high": 0.95, "is_question": 1.0, "str_med": 0.6}, syn.NEGATIVE_ADJECTIVES, "?"),
])
def test_hard_control_is_always_obeyed(trained, controls, wanted, punct):
    model, featurize, grammar = trained
    cls = "positive" if wanted == syn.POSITIVE_ADJECTIVES else "negative"
    config = DecodingConfig(hard=True, mixture=PAPER_MIXTURE[cls])
    out = generate(model, featurize, grammar, 200, Request(controls, punct), config=config, seed=5)
    assert all(s[6] in wanted for s in out) and all(s[7] == punct for s in out)


def test_prompted_generation_keeps_the_prompt(trained):
    model, featurize, grammar = trained
    out = generate(model, featurize, grammar, 5, prompt="Carol starts the model,", seed=0)
    assert all(s[:5] == ["Carol", "starts", "the", "model", ","] and grammar.parses(s) for s in out)


def test_generation_is_reproducible_for_a_seed(trained):
    model, featurize, grammar = trained
    assert generate(model, featurize, grammar, 20, seed=7) == generate(model, featurize, grammar, 20, seed=7)


def test_hard_control_masks_everything_but_the_requested_class_and_punctuation(grammar, vocab):
    from semlm.fusion.decoding import HardControl
    from semlm.fusion.decoding.grammar import ADJ, PUNCT

    hard = HardControl(grammar, Request({"neg_high": 0.9, "is_question": 1.0}, "?"))
    for state, expected in ((ADJ, set(syn.NEGATIVE_ADJECTIVES)), (PUNCT, {"?"})):
        ids = torch.full((1, state + 1), vocab.bos_id)
        kept = torch.isfinite(hard(ids, torch.zeros(1, len(vocab))))[0].nonzero().flatten()
        assert {vocab.tokens[i] for i in kept} & set(grammar.words(state)) == expected
    weak = HardControl(grammar, Request({"pos_high": 0.5}))  # below the threshold: nothing is restricted
    assert weak.keep.all()


# --- the two nucleus rules and the authors' decoder ---------------------------------------------

def test_the_two_nucleus_rules_differ_exactly_at_the_crossing_word():
    probs = torch.tensor([[0.5, 0.3, 0.2]])
    # reach: 0.5 < 0.7, so the second word (which crosses 0.7) is kept; authors: cdf 0.8 > 0.7 drops it
    assert torch.allclose(nucleus(probs, 0.7, "reach"), torch.tensor([[0.625, 0.375, 0.0]]))
    assert torch.allclose(nucleus(probs, 0.7, "authors"), torch.tensor([[1.0, 0.0, 0.0]]))
    # both keep everything when top_p covers all and agree when the cdf hits top_p exactly
    assert torch.allclose(nucleus(probs, 0.8, "authors"), torch.tensor([[0.625, 0.375, 0.0]]))
    with pytest.raises(ValueError, match="nucleus rule"):
        nucleus(probs, 0.7, "smallest")


def test_authors_rule_drops_a_held_out_adjective_at_the_papers_negative_setting():
    # alpha 0.85, top-p 0.95 over five class words: two trained words share the model's mass
    logits = torch.tensor([[5.0, 5.0, -5.0, -5.0, -5.0]])
    mask = torch.ones(1, 5, dtype=torch.bool)
    q = group_uniform_mixture(logits, mask, 0.85, 1.3)
    assert (nucleus(q, 0.95, "reach") > 0).sum() == 5        # ours never truncates here
    kept = nucleus(q, 0.95, "authors")
    assert (kept > 0).sum() == 4                             # theirs drops the last held-out word
    assert kept[0, 2:].sum().item() == pytest.approx(2 * 0.17 / (1 - 0.17), abs=0.01)


def test_authors_top_p_warper_masks_what_the_authors_rule_drops():
    from semlm.fusion.decoding import AuthorsTopPLogitsWarper

    scores = torch.log(torch.tensor([[0.5, 0.3, 0.2]]))
    out = AuthorsTopPLogitsWarper(0.7)(None, scores)
    assert torch.isfinite(out[0, 0]) and torch.isinf(out[0, 1:]).all()


def test_published_decoding_uses_the_authors_rules_everywhere():
    from semlm.fusion.decoding import PAPER_MIXTURE, published_decoding

    config = published_decoding(DecodingConfig(hard=True, mixture=PAPER_MIXTURE["negative"]))
    assert (config.nucleus_rule, config.mixture.nucleus_rule, config.steering, config.feature_control) == \
        ("authors", "authors", "authors", False)
    assert PAPER_MIXTURE["negative"].nucleus_rule == "reach"  # the causal setting keeps the standard rule


def test_authors_steering_cannot_move_the_intensifier_and_uses_the_max_strength():
    from semlm.data import synthetic as syn
    from semlm.fusion.decoding.grammar import INTENS, PUNCT
    from semlm.data.vocab import Vocabulary
    from semlm.fusion.decoding import ControlSteering
    from semlm.fusion.decoding.processors import PUNCT_BOOST

    vocab = Vocabulary.build(syn.LEXICON)
    grammar = ClauseGrammar(vocab)
    controls = Request({"pos_high": 0.95, "str_high": 0.9, "str_med": 0.3})
    authors = ControlSteering(grammar, controls, "authors").shift
    ours = ControlSteering(grammar, controls, "ours").shift
    intens = authors[INTENS, vocab.ids(syn.INTENSIFIERS)]
    assert torch.all(intens == intens[0])                       # a constant: cancels in the softmax
    assert not torch.all(ours[INTENS, vocab.ids(syn.INTENSIFIERS)] == ours[INTENS, vocab.id("slightly")])
    assert authors[PUNCT, vocab.id("!")].item() == pytest.approx(PUNCT_BOOST * 0.9 * 0.95)


def test_without_logit_steering_the_controls_leave_the_scores_alone(vocab):
    from semlm.fusion.decoding.generate import _processors

    grammar = ClauseGrammar(vocab)
    controls = Request({"pos_high": 0.95, "str_high": 0.9})
    ids = torch.full((1, 7), vocab.bos_id)  # state ADJ
    scores = torch.zeros(1, len(vocab))
    steered = _processors(grammar, controls, DecodingConfig(top_p=1.0))(ids, scores)
    plain = _processors(grammar, controls, DecodingConfig(top_p=1.0, logit_steering=False))(ids, scores)
    positive = vocab.ids(syn.POSITIVE_ADJECTIVES)
    assert steered[0, positive].min() > steered[0, vocab.ids(syn.NEGATIVE_ADJECTIVES)].max()
    assert torch.equal(plain[0, positive], plain[0, vocab.ids(syn.NEGATIVE_ADJECTIVES)])


def test_end_punctuation_control_hard_ends_only_after_the_requested_mark_and_soft_penalises_the_others():
    from semlm.fusion.decoding.processors import EndPunctuationControl, final_punctuation
    from semlm.fusion.sst2_experiment import judge_punctuation

    requested, others, eos = 3, [4, 5], 0
    scores = torch.zeros(2, 6)
    ids = torch.tensor([[1, 2], [1, requested]])  # row 0: no mark yet; row 1: just wrote the requested one
    hard = EndPunctuationControl(requested, others, True, 3.0, eos)(ids, scores)
    assert torch.isinf(hard[:, others]).all() and (hard[:, others] < 0).all()
    assert hard[0, eos] == float("-inf") and hard[0, requested] == pytest.approx(torch.log(torch.tensor(2.0)).item())
    assert hard[1, eos] == 0 and hard[1, requested] == 0  # after the mark the text may end
    soft = EndPunctuationControl(requested, others, False, 3.0, eos)(ids, scores)
    assert (soft[:, others] == -3).all() and (soft[:, [0, 1, 2, 3]] == 0).all()
    assert final_punctuation(["a", "!", "b", "?", "c"]) == "?" and final_punctuation(["a", "b"]) is None
    judged = judge_punctuation([["a", "!"], ["b", "."], ["c"], ["!", "d"]], "!")
    assert (judged["acc"].successes, judged["acc"].n) == (2, 3) and (judged["coverage"].successes,
                                                                    judged["coverage"].n) == (3, 4)
