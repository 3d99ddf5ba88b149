"""Named scales for every chapter: ``smoke`` (seconds; tests and CI), ``cpu`` (the default book
build on a 2-core laptop) and ``paper`` (the papers' own scale; a GPU for paper B).

For the synthetic task of paper A the paper's scale is small enough for a laptop, so
``cpu`` and ``paper`` are the same; they will differ for the WikiText and LoRA chapters.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .data.synthetic import SyntheticConfig

PROFILES: tuple[str, ...] = ("smoke", "cpu", "paper")


@dataclass(frozen=True)
class TrainConfig:
    """How :func:`semlm.train.train` optimises: the one training recipe of every chapter.

    Epochs (paper A, the book's small GPTs) or a fixed number of optimiser steps
    (``max_steps``: paper B's iterations, the LoRA runs). ``batch_size`` sequences make one
    step, in ``accumulation`` micro-batches. ``sampling`` says how a step's batch is drawn:
    ``shuffle`` (reshuffled every epoch), ``in_order`` (each example once, in stream order: the
    authors' LoRA run) or ``random_windows`` (windows at random offsets of a token stream, the
    authors' ``get_batch``; the data must have ``sample(batch_size, generator)``).
    Schedules: ``cosine`` (linear warmup then cosine to 0), ``cosine_min_lr`` (linear warmup from 0,
    cosine to ``min_lr``: the authors' ``get_lr`` of paper B) and ``constant``.
    """

    epochs: int = 6
    batch_size: int = 64
    lr: float = 3e-4
    weight_decay: float = 0.01
    grad_clip: float | None = 1.0
    warmup_fraction: float = 0.1
    label_smoothing: float = 0.02
    aux_weight: float = 0.5
    uniformizer_weight: float = 0.01
    seed: int = 0
    #: mixed precision of the forward pass: None (float32) or "bf16" (``torch.autocast`` on the run's device)
    autocast: str | None = None
    max_steps: int | None = None        # None: ``epochs`` passes over the data
    accumulation: int = 1               # micro-batches per optimiser step
    sampling: str = "shuffle"
    schedule: str = "cosine"
    warmup_steps: int | None = None     # None: ``warmup_fraction`` of all steps
    min_lr: float = 0.0                 # the floor of ``cosine_min_lr``
    eval_every: int | None = None       # optimiser steps between validations; None: once per epoch (or at the end)
    patience: int | None = None         # validations without improvement before stopping early (best weights kept)
    patience_from_step: int = 0         # validations before this step always count as the best (e.g. while a gate ramps)

    def __post_init__(self):
        if self.epochs < 1 or self.batch_size < 1:
            raise ValueError(f"epochs and batch_size must be >= 1, got {self.epochs}, {self.batch_size}")
        if self.lr <= 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if not 0.0 <= self.warmup_fraction < 1.0:
            raise ValueError(f"warmup_fraction must be in [0, 1), got {self.warmup_fraction}")
        if self.autocast not in (None, "bf16"):
            raise ValueError(f"autocast must be None or 'bf16', got {self.autocast!r}")
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError(f"max_steps must be >= 1 or None, got {self.max_steps}")
        if self.accumulation < 1 or self.batch_size % self.accumulation:
            raise ValueError(f"accumulation must be >= 1 and divide batch_size, got {self.accumulation} "
                             f"for batch_size {self.batch_size}")
        if self.sampling not in SAMPLINGS:
            raise ValueError(f"sampling must be one of {', '.join(SAMPLINGS)}; got {self.sampling!r}")
        if self.sampling == "random_windows" and self.max_steps is None:
            raise ValueError("sampling='random_windows' has no epochs: set max_steps")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)}; got {self.schedule!r}")
        if not 0.0 <= self.min_lr <= self.lr or (self.warmup_steps is not None and self.warmup_steps < 0):
            raise ValueError(f"need 0 <= min_lr <= lr and warmup_steps >= 0; got {self.min_lr}, {self.lr}, "
                             f"{self.warmup_steps}")
        if (self.eval_every is not None and self.eval_every < 1) or (self.patience is not None and self.patience < 1):
            raise ValueError(f"eval_every and patience must be >= 1 or None, got {self.eval_every}, {self.patience}")


SAMPLINGS = ("shuffle", "in_order", "random_windows")
SCHEDULES = ("cosine", "cosine_min_lr", "constant")


@dataclass(frozen=True)
class BackboneSize:
    d_model: int = 128
    n_layers: int = 4
    n_heads: int = 4
    d_ff: int = 256
    dropout: float = 0.1


@dataclass(frozen=True)
class SyntheticProfile:
    name: str
    corpus: SyntheticConfig
    backbone: BackboneSize
    train: TrainConfig


def check_profile(profile) -> str:
    if not isinstance(profile, str) or profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; choose one of: {', '.join(PROFILES)}")
    return profile


def check_parameters(**params) -> None:
    """Validate a notebook's papermill parameters: ``profile`` (str) and ``seed`` (int) when given.

    Raises a one-line ``ValueError`` naming the parameter, the bad value and what is expected.
    """
    for name, value in params.items():
        if name == "profile":
            check_profile(value)
        elif name == "seed":
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"parameter seed must be a non-negative int, got {value!r} ({type(value).__name__}); "
                                 f"pass e.g. -p seed 111")
        elif name in ("workers", "n_seeds"):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"parameter {name} must be an int >= 1, got {value!r}")
        elif name == "max_steps":  # chapters 6-8: cap the profile's optimiser steps (None = the profile's own)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"parameter max_steps must be an int >= 1 or None, got {value!r}; "
                                 f"pass e.g. -p max_steps 2000")
        else:
            raise ValueError(f"unknown parameter {name!r}; notebooks take profile, seed, workers, n_seeds and max_steps")


def synthetic_profile(profile: str, seed: int = 111) -> SyntheticProfile:
    """Corpus, backbone size and training config of the synthetic experiment for ``profile``."""
    check_profile(profile)
    check_parameters(seed=seed)
    paper = SyntheticProfile(profile, SyntheticConfig(), BackboneSize(), TrainConfig(seed=seed))
    if profile == "smoke":
        return SyntheticProfile(
            profile,
            SyntheticConfig(n_train=384, n_val=96),
            BackboneSize(d_model=32, n_layers=2, n_heads=2, d_ff=64),
            replace(paper.train, epochs=8, batch_size=64, lr=3e-3),
        )
    return replace(paper, name=profile)
