"""How the one trainer (:mod:`semlm.core.train`) optimises: :class:`TrainConfig`, the training recipe of every
chapter, beside its trainer as ``TrainingArguments`` sits beside ``Trainer``.

Torch-free, so a profile (:mod:`semlm.profiles`) can be built and validated without torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from semlm.core.precision import PRECISIONS

SAMPLINGS = ("shuffle", "in_order", "random_windows")
SCHEDULES = ("cosine", "cosine_min_lr", "constant", "constant_warmup")
#: ``torch.compile`` modes a run may name (``TrainConfig.compile_on_cuda``); those with CUDA graphs replay each step's
#: kernels as one graph, "max-autotune" also benchmarks matrix-product kernels while compiling
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


@dataclass(frozen=True)
class TrainConfig:
    """How :func:`semlm.core.train.train` optimises: the one training recipe of every chapter.

    Epochs (paper A, the book's small GPTs) or a fixed number of optimiser steps
    (``max_steps``: paper B's iterations, the LoRA runs). ``batch_size`` sequences make one
    step, in ``accumulation`` micro-batches. ``sampling`` says how a step's batch is drawn:
    ``shuffle`` (reshuffled every epoch), ``in_order`` (each example once, in stream order: the
    authors' LoRA run) or ``random_windows`` (windows at random offsets of a token stream, the
    authors' ``get_batch``; the data must have ``sample(batch_size, generator)``).
    Schedules: ``cosine`` (linear warmup then cosine to 0), ``cosine_min_lr`` (linear warmup from 0,
    cosine to ``min_lr``: the authors' ``get_lr`` of paper B), ``constant`` and ``constant_warmup`` (linear
    warmup, then constant: every checkpoint of a run is the model trained for that many steps, chapter 9).
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
    #: mixed precision of the forward pass (:data:`semlm.core.precision.PRECISIONS`):
    #: None (float32), "bf16" (``torch.autocast`` on the run's device) or "bf16_on_cuda" (float32 on a CPU)
    autocast: str | None = None
    max_steps: int | None = None        # None: ``epochs`` passes over the data
    accumulation: int = 1               # micro-batches per optimiser step
    sampling: str = "shuffle"
    schedule: str = "cosine"
    warmup_steps: int | None = None     # None: ``warmup_fraction`` of all steps
    min_lr: float = 0.0                 # the floor of ``cosine_min_lr``
    eval_every: int | None = None       # optimiser steps between validations; None: once per epoch (or at the end)
    patience: int | None = None         # validations without improvement before stopping early (best weights kept)
    patience_from_step: int = 0         # validations before this step always count as the best (a gate ramping)
    # --- how a CUDA device executes the recipe (EXECUTION_FIELDS): the same updates, so not in any run key ---
    #: sequences per forward on a CUDA device (None: batch_size / accumulation, as on a CPU). The
    #: optimiser still sees ``batch_size`` sequences per step, split into batch_size / cuda_micro_batch
    #: micro-batches; the update equals the CPU's to float tolerance (tests/core/test_train.py).
    cuda_micro_batch: int | None = field(default=None, metadata={"execution": True})
    #: ``torch.compile`` the model (and the experiment its loss) on a CUDA device; eager everywhere else. True is
    #: torch's default mode; a string names another (:data:`COMPILE_MODES`: CUDA graphs, GEMM autotuning)
    compile_on_cuda: bool | str = field(default=False, metadata={"execution": True})

    def __post_init__(self):
        if self.epochs < 1 or self.batch_size < 1:
            raise ValueError(f"epochs and batch_size must be >= 1, got {self.epochs}, {self.batch_size}")
        if self.lr <= 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if not 0.0 <= self.warmup_fraction < 1.0:
            raise ValueError(f"warmup_fraction must be in [0, 1), got {self.warmup_fraction}")
        if self.autocast not in PRECISIONS:
            raise ValueError(f"autocast must be one of {PRECISIONS}, got {self.autocast!r}")
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
        if self.compile_on_cuda not in (False, True, *COMPILE_MODES):
            raise ValueError(f"compile_on_cuda must be True, False or one of {COMPILE_MODES}; "
                             f"got {self.compile_on_cuda!r}")
        if self.cuda_micro_batch is not None and (self.cuda_micro_batch < 1 or self.batch_size % self.cuda_micro_batch):
            raise ValueError(f"cuda_micro_batch must be >= 1 and divide batch_size {self.batch_size}, got "
                             f"{self.cuda_micro_batch}")

    def micro_batches(self, device_type: str) -> int:
        """Micro-batches per optimiser step on a device of type ``device_type`` ("cpu", "cuda", ...)."""
        if device_type == "cuda" and self.cuda_micro_batch is not None:
            return self.batch_size // self.cuda_micro_batch
        return self.accumulation


def execution_fields(config) -> frozenset[str]:
    """The fields of a config dataclass that say how a device runs it, not what it computes (left out of run keys)."""
    return frozenset(f.name for f in fields(config) if f.metadata.get("execution"))
