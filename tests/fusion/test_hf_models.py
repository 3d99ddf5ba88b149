"""Paper A's fusion and baseline models are transformers models: same weights and outputs as the plain
modules they were, save/load, Auto classes, a KV cache, and the book's decoder through generate(): greedy
equal to an argmax loop over the whole prefix, sampled words distributed as the processed scores."""

import json

import pytest
import torch
import transformers
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, LogitsProcessor, LogitsProcessorList

from semlm.data import synthetic as syn
from semlm.fusion.decoding import (BASELINE_FAIR, FUSION_DEFAULT, PAPER_MIXTURE, ClauseGrammar, DecodingConfig,
                                   GrammarMask, generate, published_decoding)
from semlm.fusion.decoding.generate import _processors, sample_ids
from semlm.fusion.decoding.grammar import ADJ, END
from semlm.fusion.decoding.mixture import group_uniform_mixture, nucleus
from semlm.fusion.features import SyntheticFeatures
from semlm.fusion.fuzzy import feature_index
from semlm.fusion.request import Request
from semlm.fusion.config import BackboneConfig
from semlm.fusion.model import BaselineLM, FusionLM, build_model, lm_config

BEFORE = "tests/fixtures/fusion_models/tiny_models_before_hf.safetensors"
FIXTURE_MODELS = [("fusion", "fusion", True, True), ("fusion_nogate", "fusion", False, True),
                  ("baseline", "baseline", True, True), ("fusion_published", "fusion", True, False)]


def tiny(vocab_size, kind="fusion", causal=True, n_features=22):
    torch.manual_seed(0)
    backbone = BackboneConfig(vocab_size, d_model=32, n_layers=2, n_heads=2, d_ff=64, causal=causal)
    return build_model(lm_config(backbone, kind=kind, n_features=n_features)).eval()


def same_model_config(a, b) -> bool:
    return a.backbone == b.backbone and (a.kind, a.n_features, a.gate) == (b.kind, b.n_features, b.gate)


@pytest.mark.parametrize("name, kind, gate, causal", FIXTURE_MODELS)
def test_same_seed_gives_the_weights_and_outputs_of_the_plain_module(name, kind, gate, causal):
    # The fixture was written by the nn.Module classes (tests/fixtures/fusion_models/make_tiny_models_before_hf.py).
    before = load_file(BEFORE)
    torch.manual_seed(7)
    config = lm_config(BackboneConfig(12, d_model=8, n_layers=2, n_heads=2, d_ff=16, causal=causal), kind=kind,
                      n_features=4, gate=gate)
    model = build_model(config).eval()
    assert isinstance(model, transformers.PreTrainedModel)
    state = model.state_dict()
    prefix = f"{name}/state/"
    assert sorted(state) == sorted(k[len(prefix):] for k in before if k.startswith(prefix))
    for key, value in state.items():
        assert torch.equal(value, before[prefix + key]), key
    ids, features = before["input_ids"], before["features"]
    out = model(ids, features, torch.ones_like(ids, dtype=torch.bool))
    # the weights are bit-equal; outputs to float32 rounding, which differs with the CPU's matmul kernels
    torch.testing.assert_close(out.logits, before[f"{name}/logits"], rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(out.hidden, before[f"{name}/hidden"], rtol=1e-6, atol=1e-6)
    if kind == "fusion":
        torch.testing.assert_close(out.feature_pred, before[f"{name}/feature_pred"], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("kind, causal", [("fusion", True), ("baseline", True), ("fusion", False)])
def test_save_and_auto_from_pretrained_give_identical_logits(tmp_path, vocab, kind, causal):
    model = tiny(len(vocab), kind, causal)
    model.save_pretrained(tmp_path)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    assert type(loaded) is type(model) and same_model_config(loaded.config, model.config)
    ids = torch.randint(0, len(vocab), (2, 9))
    features = SyntheticFeatures(vocab)(ids)
    a, b = model(ids, features), loaded(ids, features)
    assert torch.equal(a.logits, b.logits) and torch.equal(a.hidden, b.hidden)


def test_config_json_keeps_the_flat_keys_of_saved_models(tmp_path, vocab):
    tiny(len(vocab), "fusion").save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert {"model_type", "kind", "vocab_size", "d_model", "n_layers", "n_heads", "d_ff", "dropout",
            "max_positions", "causal", "n_features", "gate"} <= set(saved) and "backbone" not in saved
    saved["n_heads"] = 3  # 32 is not divisible by 3: a broken file is refused on loading
    (tmp_path / "config.json").write_text(json.dumps(saved))
    with pytest.raises(ValueError, match="divisible by n_heads"):
        AutoModelForCausalLM.from_pretrained(tmp_path)


def test_the_runner_loads_raw_state_dicts_with_unchanged_names(vocab):
    model = tiny(len(vocab))
    again = tiny(len(vocab)).__class__(model.config)
    again.load_state_dict(model.state_dict())  # strict: what core.train.load_weights does
    assert {"backbone.embed.weight", "semantic_projection.weight", "gate.weight"} <= set(model.state_dict())


def test_classes_accept_their_config_and_reject_the_other_kind(vocab):
    config = lm_config(BackboneConfig(len(vocab), d_model=16, n_layers=1, n_heads=2, d_ff=16), kind="baseline")
    assert isinstance(BaselineLM(config), BaselineLM)
    with pytest.raises(ValueError, match="FusionLM needs a config of kind 'fusion', got 'baseline'"):
        FusionLM(config)


@pytest.mark.parametrize("kind", ["fusion", "baseline"])
def test_cached_forward_equals_the_full_forward(vocab, kind):
    model = tiny(len(vocab), kind)
    ids = torch.randint(0, len(vocab), (3, 9))
    features = SyntheticFeatures(vocab)(ids)
    full = model(ids, features).logits
    first = model(ids[:, :4], features[:, :4], use_cache=True)
    two = model(ids[:, 4:6], features[:, 4:6], past_key_values=first.past_key_values)
    one = model(ids[:, 6:7], features[:, 6:7], past_key_values=two.past_key_values)
    torch.testing.assert_close(torch.cat([first.logits, two.logits, one.logits], 1), full[:, :7])


def test_the_published_backbone_refuses_a_cache(vocab):
    model = tiny(len(vocab), causal=False)
    ids = torch.randint(0, len(vocab), (1, 4))
    with pytest.raises(ValueError, match="cannot use a KV cache"):
        model(ids, SyntheticFeatures(vocab)(ids), use_cache=True)


def test_generate_needs_the_featurizer_for_the_fusion_model(vocab):
    model = tiny(len(vocab))
    with pytest.raises(ValueError, match="needs featurize="):
        model.generate(torch.full((1, 1), vocab.bos_id), max_new_tokens=2, pad_token_id=vocab.eos_id)


@pytest.mark.parametrize("kind", ["fusion", "baseline"])
def test_cached_greedy_generate_matches_a_full_prefix_loop_step_by_step(vocab, kind):
    # A reference loop: full prefix each step, features recomputed, controls written at the newest position.
    model, featurize, grammar = tiny(len(vocab), kind), SyntheticFeatures(vocab), ClauseGrammar(vocab)
    columns, values = torch.tensor([0, 3]), torch.tensor([0.9, 0.2])
    ids = torch.full((2, 1), vocab.bos_id)
    steps = LogitsProcessorList([GrammarMask(grammar)])
    hand_logits = []
    for _ in range(8):
        features = featurize(ids)
        features[:, -1, columns] = values
        logits = model(ids, features).logits[:, -1]
        hand_logits.append(logits)
        ids = torch.cat([ids, steps(ids, logits).argmax(-1, keepdim=True)], 1)
    out = model.generate(ids[:, :1], featurize=featurize, feature_controls=(columns, values), logits_processor=steps,
                         do_sample=False, max_new_tokens=8, eos_token_id=None, pad_token_id=vocab.eos_id,
                         return_dict_in_generate=True, output_logits=True)
    assert torch.equal(out.sequences, ids)
    torch.testing.assert_close(torch.stack(out.logits, 1), torch.stack(hand_logits, 1), rtol=1e-5, atol=1e-5)


DECODERS = [
    (None, FUSION_DEFAULT),
    ({"pos_high": 0.9, "str_high": 0.9}, DecodingConfig(hard=True, mixture=PAPER_MIXTURE["positive"])),
    ({"neg_high": 0.9, "is_question": 0.8}, published_decoding(DecodingConfig(hard=True, mixture=PAPER_MIXTURE["negative"]))),
    ({"pos_high": 0.7}, BASELINE_FAIR),
]


def processed_scores(model, featurize, grammar, controls, config, ids):
    """The decoder's scores at the end of ``ids``, computed the long way: the whole prefix re-read, the
    controls written into the newest position's features, the processors (the mixture's log q at ADJ)."""
    features = featurize(ids)
    if config.feature_control and controls.values:
        features[:, -1, [feature_index(k) for k in controls.values]] = torch.tensor(list(controls.values.values()))
    logits = model(ids, features, torch.ones_like(ids, dtype=torch.bool)).logits[:, -1]
    hard_class = controls.hard_class if config.hard else None
    if grammar.state_of(ids)[0] == ADJ and hard_class is not None and config.mixture is not None:
        words = syn.POSITIVE_ADJECTIVES if hard_class == "positive" else syn.NEGATIVE_ADJECTIVES
        mask = torch.zeros(len(grammar.vocab), dtype=torch.bool)
        mask[grammar.vocab.ids(words)] = True
        mix = config.mixture
        return nucleus(group_uniform_mixture(logits, mask, mix.alpha, mix.temperature), mix.top_p,
                       mix.nucleus_rule).log()
    return _processors(grammar, controls, config)(ids, logits)


@pytest.mark.parametrize("kind, causal", [("fusion", True), ("baseline", True), ("fusion", False)])
@pytest.mark.parametrize("controls, config", DECODERS)
def test_greedy_generate_equals_an_argmax_loop_over_the_whole_prefix(vocab, kind, causal, controls, config):
    model, featurize, grammar = tiny(len(vocab), kind, causal), SyntheticFeatures(vocab), ClauseGrammar(vocab)
    controls = Request(controls or {})
    ids = torch.full((3, 1), vocab.bos_id)
    with torch.no_grad():
        while grammar.state_of(ids)[0] < END:
            scores = processed_scores(model, featurize, grammar, controls, config, ids)
            ids = torch.cat([ids, scores.argmax(-1, keepdim=True)], 1)
    expected = [vocab.decode(row[1:]) for row in ids]
    assert generate(model, featurize, grammar, 3, controls, config=config, do_sample=False) == expected


@pytest.mark.parametrize("prompt, controls, config", [
    (None, {"pos_high": 0.7}, DecodingConfig(temperature=4.0, top_p=0.95)),  # the first word: temperature, top-p
    ("Bob finishes the model, very", {"pos_high": 0.9, "str_high": 0.9},  # ADJ: the mixture's q
     DecodingConfig(hard=True, mixture=PAPER_MIXTURE["positive"])),
])
def test_sampled_words_follow_the_processed_distribution(vocab, prompt, controls, config):
    model, featurize, grammar = tiny(len(vocab)), SyntheticFeatures(vocab), ClauseGrammar(vocab)
    controls, n = Request(controls), 4000
    prefix = grammar.parse_prefix(prompt).words if prompt else ()
    start = torch.tensor([[vocab.bos_id] + vocab.ids(prefix)])
    with torch.no_grad():
        p = torch.softmax(processed_scores(model, featurize, grammar, controls, config, start)[0], -1)
    sentences = generate(model, featurize, grammar, n, controls, prompt, config=config, seed=11)
    counts = torch.bincount(torch.tensor(vocab.ids([s[len(prefix)] for s in sentences])), minlength=len(vocab))
    frequency = counts / n
    assert (p > 0.01).sum() >= 3  # a distribution worth testing, not one sure word
    assert torch.all((frequency - p).abs() <= 4.5 * (p * (1 - p) / n).sqrt() + 1e-3)
    assert torch.all(counts[p == 0] == 0)


def test_generate_leaves_the_callers_rng_alone(vocab):
    model, featurize, grammar = tiny(len(vocab)), SyntheticFeatures(vocab), ClauseGrammar(vocab)
    state = torch.random.get_rng_state()
    first = generate(model, featurize, grammar, 4, Request({"pos_high": 0.9}), prompt="Bob finishes the", seed=3)
    assert torch.equal(torch.random.get_rng_state(), state)
    assert generate(model, featurize, grammar, 4, Request({"pos_high": 0.9}), prompt="Bob finishes the",
                    seed=3) == first


class EndRowZeroAtThree(LogitsProcessor):
    """<eos> never, except that row 0 must write it as its third token."""

    def __init__(self, eos_id):
        self.eos_id = eos_id

    def __call__(self, input_ids, scores):
        scores = scores.clone()
        scores[:, self.eos_id] = float("-inf")
        if input_ids.shape[1] == 3:
            scores[0] = float("-inf")
            scores[0, self.eos_id] = 0.0
        return scores


def test_sample_ids_pads_finished_rows_and_stops_at_the_limit(vocab):
    model = tiny(len(vocab), "baseline")
    processors = LogitsProcessorList([EndRowZeroAtThree(vocab.eos_id)])
    out = sample_ids(model, torch.full((2, 1), vocab.bos_id), processors, 0, 6, vocab.pad_id, vocab.eos_id)
    assert out.shape == (2, 7) and out[0, 3] == vocab.eos_id and torch.all(out[0, 4:] == vocab.pad_id)
    assert vocab.eos_id not in out[1].tolist() and vocab.pad_id not in out[1].tolist()


def test_every_decoding_step_is_a_transformers_logits_processor(vocab):
    from semlm.fusion.decoding import AuthorsTopPLogitsWarper, ControlSteering, HardControl, LastKRepetitionPenalty
    from semlm.fusion.decoding.generate import MixtureAtAdjective
    from semlm.fusion.decoding.processors import AdjectiveClassRestriction, SentimentSteering

    grammar, controls = ClauseGrammar(vocab), Request({"pos_high": 0.9})
    steps = [GrammarMask(grammar), HardControl(grammar, controls), ControlSteering(grammar, controls),
             LastKRepetitionPenalty(1.5), AuthorsTopPLogitsWarper(0.9),
             MixtureAtAdjective(grammar, LogitsProcessorList(), None, None),
             SentimentSteering(torch.zeros(len(vocab)), 1, 6.0, 3.0),
             AdjectiveClassRestriction(torch.zeros(len(vocab), dtype=torch.bool), torch.tensor([], dtype=torch.long))]
    assert all(isinstance(step, LogitsProcessor) for step in steps)
    ids, scores = torch.full((2, 3), vocab.bos_id), torch.randn(2, len(vocab))
    torch.testing.assert_close(LogitsProcessorList(steps)(ids, scores), LogitsProcessorList(steps[:-3])(ids, scores))
