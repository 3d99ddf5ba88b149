"""Mixed precision, decided in one place: :func:`autocast_dtype` reads a config's ``autocast`` and the device.

``TrainConfig.autocast`` (one of :data:`PRECISIONS`) says what a run wants:

* ``None``: float32 everywhere (paper A's models, the LoRA runs' trainable parts);
* ``"bf16"``: ``torch.autocast`` in bfloat16 on whatever device the run is on (both papers' ``cpu``
  profiles on a CPU that computes bf16 natively, :func:`semlm.profiles.cpu_precision`);
* ``"bf16_on_cuda"``: bfloat16 on CUDA, float32 on a CPU (paper B's other profiles: CPU runs keep
  their float32 numbers, GPU runs use the tensor cores).

The trainer wraps every forward of a training step in :func:`autocast`; the block perplexity of
:mod:`semlm.core.metrics` (every paper-B validation) uses ``"bf16_on_cuda"``. Torch is imported when a
precision is applied, so :mod:`semlm.core.train_config` (and the profiles) can validate one without it.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

PRECISIONS = (None, "bf16", "bf16_on_cuda")


def autocast_dtype(precision: str | None, device: str | torch.device) -> torch.dtype | None:
    """The autocast dtype of ``precision`` on ``device`` (None: no autocast, float32)."""
    import torch

    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if precision == "bf16" or (precision == "bf16_on_cuda" and torch.device(device).type == "cuda"):
        return torch.bfloat16
    return None


def autocast(precision: str | None, device: str | torch.device):
    """``torch.autocast`` on ``device``'s type in :func:`autocast_dtype`, or a no-op when that is None."""
    import torch

    dtype = autocast_dtype(precision, device)
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(torch.device(device).type, dtype=dtype)
