"""Paper A's scales (chapters 2-5 and 10) at each of :data:`semlm.profiles.PROFILES`; torch-free.

The paper's scale fits a laptop, so ``cpu`` trains the same models on the same data as ``paper``, in bf16
autocast where the CPU computes it natively (:func:`~semlm.profiles.cpu_precision`: about two thirds of the training
CPU time for the same validation perplexity, ``book/recorded/cpu-bf16-variants``); ``paper`` keeps float32.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from semlm.core.train_config import TrainConfig
from semlm.data.synthetic import INTENSITY, SyntheticConfig
from semlm.fusion.config import BackboneConfig
from semlm.profiles import check_parameters, cpu_precision, resolved

#: Training seeds per profile of chapter 4's leakage audit (8 models each; at ``cpu`` 3, whose t-intervals
#: (t = 4.30) leave more claims inconclusive than 5 would, to keep the build near its time budget) ...
AUDIT_SEEDS = {"smoke": 2, "cpu": 3, "paper": 5}
#: ... of its ``A-feature-steering`` measurement (the causal fusion model steered through its features only;
#: the claim's rule needs 5 paired seeds: at ``cpu`` two causal fusion models beyond the audit's) ...
STEERING_SEEDS = {"smoke": 2, "cpu": 5, "paper": 5}
#: ... of the causal fusion model's out-of-distribution hit rates (A-T4-ood-pos / -neg: their rule calls an
#: interval wider than +-0.15 inconclusive, which 3 seeds' t = 4.30 leaves it; 6 seeds, one model beyond the
#: feature-steering ones) ...
OOD_SEEDS = {"smoke": 2, "cpu": 6, "paper": 6}
#: ... and of chapter 10's intent and shuffled models, which the claims pair by seed (its baseline and
#: control-code models, chapter 4's runs and context only, run at :data:`AUDIT_SEEDS`).
INTENT_SEEDS = {"smoke": 2, "cpu": 5, "paper": 5}

#: The backbone of the ``smoke`` profiles (its vocab_size is None: the data set it).
SMOKE_BACKBONE = BackboneConfig(d_model=32, n_layers=2, n_heads=2, d_ff=64)


@dataclass(frozen=True)
class SyntheticProfile:
    name: str
    corpus: SyntheticConfig
    backbone: BackboneConfig  # its vocab_size is None: the data set it
    train: TrainConfig
    seed: int = 111              # the training seed of its runs (``RunSpec.seed``)


def synthetic_profile(profile: str, seed: int = 111) -> SyntheticProfile:
    """Corpus, backbone size and training config of the synthetic experiment for ``profile``
    (``cpu``: ``paper``'s, trained in :func:`~semlm.profiles.cpu_precision`)."""
    profile = resolved(profile)
    check_parameters(seed=seed)
    paper = SyntheticProfile(profile, SyntheticConfig(), BackboneConfig(), TrainConfig(), seed)
    if profile == "smoke":
        return replace(paper, corpus=SyntheticConfig(n_train=384, n_val=96), backbone=SMOKE_BACKBONE,
                       train=replace(paper.train, epochs=8, batch_size=64, lr=3e-3))
    if profile == "cpu":  # the paper's models and data; bf16 where the CPU computes it natively
        return replace(paper, train=replace(paper.train, autocast=cpu_precision()))
    return paper


# --- chapter 5: SST-2 (semlm.fusion.sst2_experiment) ---------------------------------------------------


@dataclass(frozen=True)
class ClassifierConfig:
    """The bag-of-words sentiment classifier that judges generated text (not a language model)."""

    n_train: int | None = None   # None: all of SST-2 train
    epochs: int = 4
    batch_size: int = 256
    lr: float = 0.05
    weight_decay: float = 1e-6
    min_freq: int = 2            # for unigrams and bigrams


@dataclass(frozen=True)
class ControlConfig:
    """Continuation of dev prefixes under a positive / negative request."""

    n_prefixes: int = 200        # dev prefixes continued per request
    prefix_words: int = 5        # words of the dev sentence kept as the prompt
    min_sentence_words: int = 8  # only dev sentences at least this long give prefixes
    new_tokens: int = 10         # continuation length (after <eos> the row is finished)
    min_new_tokens: int = 3      # <eos> is banned before this many new tokens
    temperature: float = 0.7
    top_p: float = 0.9
    repetition_penalty: float = 1.5
    steer_boost: float = 6.0     # paper: +6 on the requested adjective class ...
    steer_penalty: float = 3.0   # ... and -3 on the other one, here scaled by |valence|
    control_value: float = 0.95  # pos_high / neg_high requested through the feature channel
    strength_value: float = 0.9  # str_high requested with it


@dataclass(frozen=True)
class SST2Profile:
    name: str
    n_train: int | None          # training phrases for the LMs (None: all)
    min_freq: int
    backbone: BackboneConfig  # its vocab_size is None: the data set it
    train: TrainConfig
    classifier: ClassifierConfig
    control: ControlConfig
    workers: int = 2
    seed: int = 111              # the training seed of its runs (``RunSpec.seed``) and of the subsample


def sst2_profile(profile: str, seed: int = 111) -> SST2Profile:
    """The scale of the SST-2 chapter for ``profile``; ``paper`` is the paper's configuration on all of train.

    ``cpu`` subsamples 8,000 training phrases so that the chapter (four models, a classifier,
    generation) fits in minutes on 2 cores, and trains in :func:`~semlm.profiles.cpu_precision`; ``paper``
    uses all 67,349, in float32.
    """
    profile = resolved(profile)
    check_parameters(seed=seed)
    paper = SST2Profile(profile, None, 2, BackboneConfig(), TrainConfig(), ClassifierConfig(), ControlConfig(),
                        seed=seed)
    if profile == "smoke":
        return replace(paper, n_train=600, backbone=SMOKE_BACKBONE, train=replace(paper.train, epochs=3, lr=3e-3),
                       classifier=ClassifierConfig(n_train=12000, epochs=3),
                       control=replace(paper.control, n_prefixes=24, new_tokens=6), workers=1)
    if profile == "cpu":  # bf16 where the CPU computes it natively (see synthetic_profile)
        return replace(paper, n_train=8000, train=replace(paper.train, autocast=cpu_precision()))
    return paper


# --- chapter 10: features-only control (semlm.fusion.intent_experiment) ---------------------------------


#: Chapter 10's strength sweep: the four levels the training data write (the intensifiers' strengths of
#: ``semlm.data.synthetic.INTENSITY``: slightly 0.2, moderately 0.5, very 0.8, extremely 1.0) and two
#: interpolations, midway between slightly and moderately and between moderately and very.
INTENT_STRENGTH_LEVELS: tuple[float, ...] = (0.2, 0.35, 0.5, 0.65, 0.8, 1.0)
#: At most this many sweep levels lie between trained ones (interpolations, labelled in the record).
MAX_INTERPOLATED_LEVELS = 2


@dataclass(frozen=True)
class IntentProfile:
    """Scale of chapter 10: the synthetic models (paper A's size at ``cpu``), how many training
    seeds, how many sentences are sampled per request, and the strength levels of the sweep (every
    trained level, at most :data:`MAX_INTERPOLATED_LEVELS` between them)."""

    name: str
    synthetic: SyntheticProfile
    n_seeds: int
    samples_per_request: int
    strength_levels: tuple[float, ...] = INTENT_STRENGTH_LEVELS
    #: seeds (the first ones) at which the baseline and control-code models, chapter 4's runs, are evaluated
    #: (None: every seed); the intent and shuffled models, which the claims pair, run at every seed
    n_shared_seeds: int | None = None

    def __post_init__(self):
        if self.n_seeds < 1 or self.samples_per_request < 1:
            raise ValueError(f"n_seeds and samples_per_request must be >= 1, got {self.n_seeds}, "
                             f"{self.samples_per_request}")
        trained = sorted(set(INTENSITY.values()))
        between = [v for v in self.strength_levels if v not in trained]
        if (not set(trained) <= set(self.strength_levels) or len(between) > MAX_INTERPOLATED_LEVELS
                or not all(trained[0] < v < trained[-1] for v in between)
                or list(self.strength_levels) != sorted(set(self.strength_levels))):
            raise ValueError(f"strength_levels must list, in increasing order, every trained level {trained} and at "
                             f"most {MAX_INTERPOLATED_LEVELS} levels between them, got {self.strength_levels}")

    def seeds(self, seed: int = 111) -> list[int]:
        """``n_seeds`` consecutive training seeds from ``seed``."""
        return [seed + i for i in range(self.n_seeds)]

    def shared_seeds(self, seed: int = 111) -> list[int]:
        """The seeds at which the baseline and control-code models (chapter 4's runs) are evaluated."""
        return self.seeds(seed)[:self.n_shared_seeds]


def intent_profile(profile: str, seed: int = 111) -> IntentProfile:
    """Chapter 10's scale: the synthetic task's models and corpus at ``profile`` (``cpu``: paper A's
    own size, about a minute per model on one core), its seeds and its sampling budget."""
    profile = resolved(profile)
    samples = {"smoke": 24, "cpu": 100, "paper": 200}[profile]
    return IntentProfile(profile, synthetic_profile(profile, seed), INTENT_SEEDS[profile], samples,
                         n_shared_seeds=min(INTENT_SEEDS[profile], AUDIT_SEEDS[profile]))
