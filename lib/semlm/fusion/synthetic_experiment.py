"""Train and evaluate baseline / fusion on the synthetic corpus, in either setting.

* ``causal`` (default): causal attention and causal features: a language model.
* ``published``: the authors' setting (no causal mask, sentence-level features). Its
  perplexities are not language-model perplexities; the book labels them as such.

This module says only *what* a run is (:class:`SyntheticExperiment`); how it runs (cache
key, train or load, one-thread worker processes side by side, the run record) is
:mod:`semlm.core.runs`, the same for every chapter.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Sequence

import torch

from semlm.fusion.control_codes import CODE_TOKENS, with_codes
from semlm.data.dataset import LMTensors, encode_corpus
from semlm.data.synthetic import LEXICON, NEGATIVE_ADJECTIVES, POSITIVE_ADJECTIVES, SyntheticConfig, SyntheticCorpus, make_corpus
from semlm.data.vocab import Vocabulary
from semlm.fusion.features import SyntheticFeatures
from semlm.fusion.losses import FusionLoss
from semlm.core.metrics import evaluate_language_model
from semlm.fusion.fuzzy import NUM_FEATURES
from semlm.fusion.model import FusionLMConfig, build_model, lm_config
from semlm.fusion.profiles import SyntheticProfile
from semlm.core import runs
from semlm.fusion.records import LanguageModelMetrics
from semlm.core.runs import RunSpec

SETTINGS: tuple[str, ...] = ("causal", "published")
SETTING_LABELS = {
    "causal": "causal (a language model)",
    "published": "published setting: non-causal, NOT a language model",
}


def check_setting(setting: str) -> str:
    if setting not in SETTINGS:
        raise ValueError(f"unknown setting {setting!r}; choose one of: {', '.join(SETTINGS)}")
    return setting


@dataclass
class SyntheticData:
    vocab: Vocabulary
    corpus: SyntheticCorpus
    featurizer: SyntheticFeatures
    train: LMTensors
    val: LMTensors
    held_out_ids: list[int]
    adjective_classes: list[torch.Tensor]
    code_ids: list[int] = field(default_factory=list)  # control-code tokens (never scored)


def prepare_data(corpus_config: SyntheticConfig, setting: str = "causal", codes: bool = False) -> SyntheticData:
    """Corpus, vocabulary (all grammar words), and tensors with features precomputed once.

    ``codes=True`` prepends each sentence's CTRL-style control codes (``semlm.fusion.control_codes``)
    and adds them to the vocabulary. In the published setting the training rows are encoded as
    the authors' are: every row has the ``<eos>`` input and its ``<eos> -> <pad>`` target is
    trained (their loss masks only pad inputs); causal training never scores that target.
    """
    check_setting(setting)
    corpus = make_corpus(corpus_config)
    vocab = Vocabulary.build(LEXICON + (CODE_TOKENS if codes else ()))
    featurizer = SyntheticFeatures(vocab, published=setting == "published")
    prepare = with_codes if codes else list
    return SyntheticData(
        vocab=vocab,
        corpus=corpus,
        featurizer=featurizer,
        train=encode_corpus(prepare(corpus.train), vocab, featurizer, score_eos_pad=setting == "published"),
        val=encode_corpus(prepare(corpus.val), vocab, featurizer, trailing_pad=True),  # the authors' denominator too
        held_out_ids=vocab.ids(corpus.split.held_out),
        adjective_classes=[torch.tensor(vocab.ids(POSITIVE_ADJECTIVES)), torch.tensor(vocab.ids(NEGATIVE_ADJECTIVES))],
        code_ids=vocab.ids(CODE_TOKENS) if codes else [],
    )


@dataclass(frozen=True)
class Variant:
    """A named model to train: its class, the fusion gate, and loss weights that differ from the profile."""

    kind: str
    gate: bool = True
    train_overrides: tuple[tuple[str, float], ...] = ()
    codes: bool = False  # CTRL-style control codes prepended to every sentence


#: The paper's two models and the ablations it does not run (the leakage audit trains them).
VARIANTS: dict[str, Variant] = {
    "baseline": Variant("baseline"),
    "fusion": Variant("fusion"),
    "fusion_no_gate": Variant("fusion", gate=False),  # h0 = e + u
    "fusion_no_aux": Variant("fusion", train_overrides=(("aux_weight", 0.0),)),
    "fusion_no_uniformizer": Variant("fusion", train_overrides=(("uniformizer_weight", 0.0),)),
    "control_code": Variant("baseline", codes=True),  # the standard alternative: CTRL-style codes
}


def check_variant(name: str) -> Variant:
    try:
        return VARIANTS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; choose from: {', '.join(VARIANTS)}") from None


def model_config(profile, kind: str, vocab_size: int, setting: str, gate: bool = True,
                 n_features: int = NUM_FEATURES) -> FusionLMConfig:
    """The ``kind`` model on ``profile.backbone`` (any paper-A profile or run), ``vocab_size`` words, ``setting``."""
    backbone = replace(profile.backbone, vocab_size=vocab_size, causal=check_setting(setting) == "causal")
    return lm_config(backbone, kind, n_features=n_features, gate=gate)




@dataclass(frozen=True)
class SyntheticRun:
    """What one synthetic-task run is: the profile, the model (a :data:`VARIANTS` name) and the setting."""

    profile: SyntheticProfile
    model: str
    setting: str = "causal"


class SyntheticExperiment(runs.Experiment):
    """Paper A's synthetic task for :mod:`semlm.core.runs`: baseline, fusion and the ablations (``VARIANTS``)."""

    name = "synthetic"
    device = "cpu"  # small models: one-thread CPU workers beat a GPU's launch overhead, and the chapters decode on CPU
    metrics_type = LanguageModelMetrics  # what ``evaluate_language_model`` measures, read by attribute

    def data_key(self, spec: RunSpec):
        run = spec.config
        return run.profile.corpus, run.setting, VARIANTS[run.model].codes

    def prepare(self, spec: RunSpec) -> SyntheticData:
        run = spec.config
        return prepare_data(run.profile.corpus, run.setting, codes=check_variant(run.model).codes)

    def build(self, spec: RunSpec, data: SyntheticData) -> torch.nn.Module:
        run = spec.config
        variant = check_variant(run.model)
        return build_model(model_config(run.profile, variant.kind, len(data.vocab), run.setting, gate=variant.gate))

    def fit(self, spec: RunSpec, data: SyntheticData) -> runs.Fit:
        run = spec.config
        config = replace(run.profile.train, **dict(check_variant(run.model).train_overrides))
        return runs.Fit(data.train, data.val, config, FusionLoss.from_config(config, data.adjective_classes))

    def evaluate(self, spec: RunSpec, data: SyntheticData, model, result) -> dict:
        return evaluate_language_model(model, data.val, data.vocab, data.held_out_ids, never_scored=data.code_ids)

    def total_steps(self, spec: RunSpec) -> int:
        p = spec.config.profile
        return -(-p.corpus.n_train // p.train.batch_size) * p.train.epochs


SYNTHETIC = SyntheticExperiment()


def spec_for(profile: SyntheticProfile, model: str, setting: str = "causal") -> RunSpec:
    """The run of ``model`` (a :data:`VARIANTS` name) in ``setting`` at ``profile``'s scale and seed."""
    check_variant(model)
    return RunSpec(model, profile.seed, SyntheticRun(profile, model, check_setting(setting)), group=setting)


def synthetic_runs(profile: SyntheticProfile, models: Sequence[str] = ("baseline", "fusion"),
                   settings: Sequence[str] = SETTINGS) -> list[RunSpec]:
    """Every ``model`` (a :data:`VARIANTS` name) in every setting at ``profile``'s scale and seed."""
    return [spec_for(profile, model, setting) for setting in settings for model in models]


def train_causal_models(profile: SyntheticProfile, runs_dir=None, workers: int | None = None,
                        progress: bool = False) -> dict[str, runs.RunRecord]:
    """Both causal models ("baseline", "fusion") at ``profile``, trained side by side or loaded through the run
    cache in ``runs_dir`` (None: the profile's), by name."""
    context = runs.RunContext(profile.name, runs_dir, workers, progress)
    return runs.nested(runs.run_many(SYNTHETIC, synthetic_runs(profile, settings=("causal",)), context), "name")


def fusion_training_runs(profile: SyntheticProfile) -> list[RunSpec]:
    """Chapter 2's runs (chapter 3 decodes with the same models): baseline and fusion, causal and published."""
    return synthetic_runs(profile)
