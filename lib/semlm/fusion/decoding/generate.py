"""Batched, grammar-constrained, feature-steered generation for the synthetic task (paper A, Section 2).

N sentences decode together: each step runs the model once on the whole batch, stacks
the processors (grammar mask, hard control, steering, last-k repetition penalty, then
transformers' temperature / top-k / top-p warpers) and samples one word per row.

With ``feature_control=True`` (our default) the controls also enter the fusion model through
the feature channel: the requested values overwrite those predicates in the feature vector
of the newest position, the slot from which the next word is predicted. The authors'
SemanticFusion.py defines such a function (``apply_control``) but never calls it: their
decoder steers only through logit shifts and masks. ``feature_control=False`` is their
decoder; chapter 3 measures both.

Under the one-clause grammar two of the paper's knobs cannot act: the last-3 repetition
penalty only touches the three previous words, which the grammar already forbids at the
next state (every state draws from a different word class), and top-k 20 keeps every
allowed word (no state allows more than 10). They are kept for fidelity, not effect.

``published_decoding`` turns a config into the authors' decoder for the published setting:
their nucleus rule (``semlm.fusion.decoding.mixture``) and their steering (``ControlSteering``).

``generate`` decodes through transformers' ``model.generate()`` (:func:`sample_ids`, the one
sampler of paper A's chapters): the model recomputes the features per step
(``FusionLM.prepare_inputs_for_generation``), keeps a KV cache in the causal setting, and the
mixture is a processor (``MixtureAtAdjective``) that returns log q at ADJ. Greedy decoding is the
argmax of the processed scores; sampling draws from the processed distribution, equal in
distribution to re-reading the whole prefix each step (cached logits differ from full-prefix
ones by float rounding, ~1e-6, which can flip a draw whose uniform number falls that close to a
boundary).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from transformers import LogitsProcessor, LogitsProcessorList, TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

from semlm.data import synthetic as syn
from semlm.fusion.fuzzy import feature_index
from semlm.fusion.decoding.grammar import ADJ, END, ClauseGrammar, GrammarMask
from semlm.fusion.decoding.mixture import AuthorsTopPLogitsWarper, check_nucleus_rule, group_uniform_mixture, nucleus
from semlm.fusion.decoding.processors import STEERING_RULES, ControlSteering, HardControl, LastKRepetitionPenalty
from semlm.fusion.request import Request


@dataclass(frozen=True)
class MixtureSettings:
    """Group-uniform mixture at ADJ under a hard class request (paper: POS 0.97/1.5/1.0, NEG 0.85/1.3/0.95)."""

    alpha: float
    temperature: float
    top_p: float
    nucleus_rule: str = "reach"  # "authors" in the published setting (semlm.fusion.decoding.mixture)

    def __post_init__(self):
        check_nucleus_rule(self.nucleus_rule)


PAPER_MIXTURE = {"positive": MixtureSettings(0.97, 1.5, 1.0), "negative": MixtureSettings(0.85, 1.3, 0.95)}


@dataclass(frozen=True)
class DecodingConfig:
    temperature: float = 0.7
    top_p: float = 0.9
    top_k: int = 0
    repetition_penalty: float = 1.5
    repetition_k: int = 3
    hard: bool = False
    mixture: MixtureSettings | None = None
    feature_control: bool = True
    logit_steering: bool = True   # False: the controls act through the features (and hard masks) only
    nucleus_rule: str = "reach"   # top-p outside the mixture: "reach" (transformers) or "authors"
    steering: str = "ours"        # ControlSteering rule: "ours" or "authors"

    def __post_init__(self):
        check_nucleus_rule(self.nucleus_rule)
        if self.steering not in STEERING_RULES:
            raise ValueError(f"unknown steering {self.steering!r}; choose one of: {', '.join(STEERING_RULES)}")
        if self.temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0 or self.repetition_penalty <= 0:
            raise ValueError("top_k must be >= 0 and repetition_penalty > 0")


#: The paper's "fair" baseline and fusion decoding settings (Appendix B).
BASELINE_FAIR = DecodingConfig(temperature=0.7, top_p=0.9, top_k=20, repetition_penalty=2.5)
FUSION_DEFAULT = DecodingConfig(temperature=0.7, top_p=0.9, repetition_penalty=1.5)


def published_decoding(config: DecodingConfig) -> DecodingConfig:
    """``config`` as the authors decode: their nucleus rule (mixture and other steps), their
    steering, and no controls written into the features."""
    mixture = replace(config.mixture, nucleus_rule="authors") if config.mixture is not None else None
    return replace(config, mixture=mixture, nucleus_rule="authors", steering="authors", feature_control=False)


def _processors(grammar: ClauseGrammar, request: Request, config: DecodingConfig) -> LogitsProcessorList:
    steps = [GrammarMask(grammar)]
    if config.hard:
        steps.append(HardControl(grammar, request))
    if config.logit_steering:
        steps.append(ControlSteering(grammar, request, config.steering))
    steps += [LastKRepetitionPenalty(config.repetition_penalty, config.repetition_k),
              TemperatureLogitsWarper(config.temperature)]
    if config.top_k:
        steps.append(TopKLogitsWarper(config.top_k))
    steps.append(TopPLogitsWarper(config.top_p) if config.nucleus_rule == "reach" else AuthorsTopPLogitsWarper(config.top_p))
    return LogitsProcessorList(steps)


class MixtureAtAdjective(LogitsProcessor):
    """The mixture as a processor: at ADJ, ``log q`` of the group-uniform mixture (then nucleus) from
    the raw scores, so that ``generate()``'s softmax and draw sample from q; at every other state the
    wrapped ``processors``. Without a class mask it is just ``processors``."""

    def __init__(self, grammar: ClauseGrammar, processors: LogitsProcessorList, class_mask: torch.Tensor | None,
                 mixture: MixtureSettings | None):
        self.grammar, self.processors, self.class_mask, self.mixture = grammar, processors, class_mask, mixture

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if self.class_mask is None or int(self.grammar.state_of(input_ids)[0]) != ADJ:
            return self.processors(input_ids, scores)
        mix = self.mixture
        q = nucleus(group_uniform_mixture(scores, self.class_mask.to(scores.device), mix.alpha, mix.temperature),
                    mix.top_p, mix.nucleus_rule)
        return q.log()


@torch.no_grad()
def sample_ids(model, start: torch.Tensor, processors: LogitsProcessorList, seed: int, max_new_tokens: int,
               pad_id: int, eos_id: int | None = None, featurize=None,
               feature_controls: tuple[torch.Tensor, torch.Tensor] | None = None,
               do_sample: bool = True) -> torch.Tensor:
    """``start`` [B, L] continued by ``model.generate()`` under ``processors`` (nothing else: no default
    temperature, top-k or top-p), at most ``max_new_tokens`` tokens; a row that wrote ``eos_id`` is
    filled with ``pad_id``. Fusion models read ``featurize(ids)`` with ``feature_controls`` written at
    the newest position; the KV cache is used in the causal setting. Sampling draws from the global
    RNG seeded with ``seed`` inside ``torch.random.fork_rng`` (the caller's RNG state is restored);
    ``do_sample=False`` is greedy decoding (argmax of the processed scores)."""
    controls = feature_controls if feature_controls is not None and len(feature_controls[0]) else None
    model.eval()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return model.generate(start, featurize=featurize if model.uses_features else None, feature_controls=controls,
                              logits_processor=processors, do_sample=do_sample, max_new_tokens=max_new_tokens,
                              use_cache=True, temperature=1.0, top_k=None, top_p=None, eos_token_id=eos_id,
                              pad_token_id=pad_id, attention_mask=torch.ones_like(start))


@torch.no_grad()
def generate(model: torch.nn.Module, featurize, grammar: ClauseGrammar, n: int, request: Request = Request(),
             prompt: str | None = None, config: DecodingConfig = FUSION_DEFAULT, seed: int = 0,
             do_sample: bool = True) -> list[list[str]]:
    """``n`` one-clause sentences (word lists, prompt included), decoded as one batch by ``model.generate()``.

    A grammar built with an ``offset`` serves a CTRL-style model: the request's codes
    (:meth:`Request.codes`) follow ``<bos>`` and are not part of the returned words.
    ``do_sample=False`` is greedy decoding (the argmax of the processed scores, of q at ADJ).
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    vocab = grammar.vocab
    codes = request.codes() if grammar.offset else ()
    prefix = grammar.parse_prefix(prompt).words if prompt else ()
    start = torch.tensor([vocab.bos_id] + vocab.ids(codes) + vocab.ids(prefix)).repeat(n, 1)
    feature_controls = None
    if config.feature_control and model.uses_features:  # the values, written into the newest position's features
        values = request.features()
        feature_controls = (torch.tensor([feature_index(k) for k in values], dtype=torch.long),
                            torch.tensor(list(values.values()), dtype=torch.float32))
    hard_class = request.hard_class if config.hard else None
    class_mask = None  # under a hard class request with a mixture: the class the mixture spreads over at ADJ
    if hard_class is not None and config.mixture is not None:
        class_mask = torch.zeros(len(vocab), dtype=torch.bool)
        class_mask[vocab.ids(syn.POSITIVE_ADJECTIVES if hard_class == "positive" else syn.NEGATIVE_ADJECTIVES)] = True
    processor = MixtureAtAdjective(grammar, _processors(grammar, request, config), class_mask, config.mixture)
    ids = sample_ids(model, start, LogitsProcessorList([processor]), seed, END - len(prefix), vocab.eos_id,
                     featurize=featurize, feature_controls=feature_controls, do_sample=do_sample)
    return [vocab.decode(row[1 + len(codes):]) for row in ids]
