"""One trainer for every chapter: AdamW, 10% warmup + cosine, clipping, label smoothing.

Reproducibility and safety rules:

* every epoch reseeds torch (dropout) and the batch-order generator from
  ``(seed, epoch)``, so a run resumed at an epoch boundary is bit-identical to an
  uninterrupted one;
* with a ``run_dir``, the weights are saved as safetensors after each epoch, in a
  temporary folder that replaces the previous checkpoint only once fully written;
* a finished run (``final/``) is never overwritten: training again with the same
  config loads it, and a different config in the same folder is refused.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Sequence

import torch
from safetensors.torch import load_file, save_file
from torch import nn
from tqdm import tqdm
from transformers import get_cosine_schedule_with_warmup

from .data.dataset import LMTensors
from .losses import adjective_uniformizer, auxiliary_bce, label_smoothed_cross_entropy
from .metrics import perplexity, score_tokens
from .profiles import TrainConfig


@dataclass
class TrainResult:
    history: list[dict]           # one row per epoch: epoch, train_loss, val_ppl, seconds
    train_seconds: float          # wall time spent training (summed over resumed sessions)
    status: str                   # "trained", "resumed" or "loaded" (a finished run found on disk)
    run_dir: Path | None = None

    @property
    def val_ppl_per_epoch(self) -> list[float]:
        return [row["val_ppl"] for row in self.history]


class CheckpointMismatch(ValueError):
    """A run folder holds a run made with another configuration."""


def progress_bar(total: int, description: str, enabled: bool = True, **kwargs) -> tqdm:
    """A tqdm bar that is also off when ``TQDM_DISABLE`` is set (the book runner sets it:
    bars are for people watching a run, not for rendered pages). tqdm's own environment
    defaults do not apply here because the bar's ``disable`` is always passed explicitly."""
    env_off = os.environ.get("TQDM_DISABLE", "").strip().lower() in {"1", "true", "yes"}
    return tqdm(total=total, desc=description, disable=not enabled or env_off, mininterval=1.0, **kwargs)


def autocast(precision: str | None, batch=None, device: str | torch.device | None = None):
    """``torch.autocast`` in bf16 on the batch's (or ``device``'s) device type when ``precision == "bf16"``, else a no-op."""
    if precision is None:
        return contextlib.nullcontext()
    if device is None:
        tensor = getattr(batch, "input_ids", None)
        if tensor is None:
            tensor = getattr(batch, "inputs", None)
        device = tensor.device if tensor is not None else "cpu"
    return torch.autocast(torch.device(device).type, dtype=torch.bfloat16)


def set_seed(seed: int) -> None:
    """Seed torch (and Python's ``random``) for model initialisation."""
    import random

    random.seed(seed)
    torch.manual_seed(seed)


def _epoch_seed(seed: int, epoch: int) -> int:
    return (seed * 1_000_003 + epoch * 7_919) % (2**63 - 1)


def training_loss(model: nn.Module, batch: LMTensors, config: TrainConfig,
                  adjective_classes: Sequence[torch.Tensor], label_smoothing: float | None = None) -> tuple[torch.Tensor, dict]:
    """Eq. 5 for one batch; the auxiliary term only exists for models with an aux head."""
    out = model(batch.input_ids, batch.features, batch.mask)
    eps = config.label_smoothing if label_smoothing is None else label_smoothing
    lm = label_smoothed_cross_entropy(out.logits, batch.targets, batch.scored, eps)  # no <pad> targets
    loss, parts = lm, {"lm": lm.item()}
    if config.uniformizer_weight and adjective_classes:
        uni = adjective_uniformizer(out.logits, batch.targets, batch.scored, adjective_classes)
        loss = loss + config.uniformizer_weight * uni
        parts["uniformizer"] = uni.item()
    if out.feature_pred is not None and config.aux_weight:
        aux = auxiliary_bce(out.feature_pred, batch.features, batch.mask)
        loss = loss + config.aux_weight * aux
        parts["aux"] = aux.item()
    return loss, parts


def validation_perplexity(model: nn.Module, data: LMTensors) -> float:
    """exp(mean CE) over positions with a real (non-pad) target, no label smoothing (the metric of ``semlm.metrics``)."""
    was_training = model.training
    ppl = perplexity(score_tokens(model, data))
    model.train(was_training)
    return ppl


def fingerprint(*parts) -> str:
    """Stable hash of JSON-able configs and tensors (used to recognise a run folder)."""
    h = hashlib.sha256()
    for p in parts:
        if isinstance(p, torch.Tensor):
            h.update(p.detach().cpu().contiguous().numpy().tobytes())
        else:
            h.update(json.dumps(p, sort_keys=True, default=str).encode())
    return h.hexdigest()[:16]


def _atomic_dir_write(target: Path, write: Callable[[Path], None]) -> None:
    tmp = target.with_name(target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    write(tmp)
    old = target.with_name(target.name + ".old")
    if target.exists():
        target.rename(old)
    tmp.rename(target)
    shutil.rmtree(old, ignore_errors=True)


def _state_dict_for_save(model: nn.Module) -> dict[str, torch.Tensor]:
    # Tied weights share storage; safetensors stores each tensor once, so keep contiguous clones.
    return {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}


def train(model: nn.Module, train_data: LMTensors, val_data: LMTensors, config: TrainConfig,
          adjective_classes: Sequence[torch.Tensor] = (), run_dir: str | Path | None = None,
          run_description: dict | None = None, progress: bool | str = True,
          stop_after_epoch: int | None = None, on_step: Callable[[], None] | None = None,
          loss_fn: Callable[[nn.Module, object], tuple[torch.Tensor, dict]] | None = None,
          validate: Callable[[nn.Module, object], float] | None = None) -> TrainResult:
    """Train ``model`` in place and return its per-epoch history.

    The loop is shared by every chapter. By default it trains paper A's models on
    ``LMTensors`` with Eq. 5; other chapters pass ``loss_fn(model, batch) -> (loss, parts)``
    and ``validate(model, val_data) -> ppl``, and any data object with ``__len__``,
    ``input_ids`` (hashed into the run key) and ``batches(batch_size, generator, shuffle)``.

    ``run_description`` (any JSON-able dict, e.g. the model config) goes into the run's
    fingerprint together with ``config`` and the training data, so that a folder cannot
    silently mix runs. ``stop_after_epoch`` ends early (the run stays resumable), which
    the tests use to simulate an interruption. ``on_step`` is called after every
    optimiser step (worker processes use it to report progress to the parent).
    """
    run_dir = Path(run_dir) if run_dir is not None else None
    run_info = {"train_config": asdict(config), "model": run_description or {},
                "data": fingerprint(train_data.input_ids, val_data.input_ids)}
    key = fingerprint(run_info)
    history: list[dict] = []
    start_epoch, spent = 0, 0.0
    steps_per_epoch = math.ceil(len(train_data) / config.batch_size)
    total_steps = steps_per_epoch * config.epochs

    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    scheduler = get_cosine_schedule_with_warmup(optimizer, int(config.warmup_fraction * total_steps), total_steps)

    status = "trained"
    if run_dir is not None:
        run_dir.mkdir(parents=True, exist_ok=True)
        info_path = run_dir / "run.json"
        if info_path.exists():
            existing = json.loads(info_path.read_text())
            if existing.get("key") != key:
                differing = sorted(k for k in run_info if existing.get("run", {}).get(k) != run_info[k])
                raise CheckpointMismatch(
                    f"{run_dir} holds a run with a different configuration (differs in: {', '.join(differing) or 'unknown'}); "
                    f"use another run folder or delete this one"
                )
        else:
            info_path.write_text(json.dumps({"key": key, "run": run_info}, indent=2, default=str))
        final, ckpt = run_dir / "final", run_dir / "checkpoint"
        if (final / "model.safetensors").exists():
            model.load_state_dict(load_file(final / "model.safetensors"))
            saved = json.loads((final / "history.json").read_text())
            return TrainResult(saved["history"], saved["train_seconds"], "loaded", run_dir)
        if (ckpt / "model.safetensors").exists():
            model.load_state_dict(load_file(ckpt / "model.safetensors"))
            state = torch.load(ckpt / "trainer_state.pt", weights_only=False)
            optimizer.load_state_dict(state["optimizer"])
            scheduler.load_state_dict(state["scheduler"])
            history, start_epoch, spent = state["history"], state["epoch"], state["train_seconds"]
            status = "resumed"

    label = progress if isinstance(progress, str) else "train"
    bar = progress_bar(total_steps, label, bool(progress), initial=start_epoch * steps_per_epoch, dynamic_ncols=True)
    generator = torch.Generator()
    model.train()
    for epoch in range(start_epoch, config.epochs):
        t0 = time.perf_counter()
        torch.manual_seed(_epoch_seed(config.seed, epoch))
        generator.manual_seed(_epoch_seed(config.seed, epoch) + 1)
        running, n = 0.0, 0
        for batch in train_data.batches(config.batch_size, generator, shuffle=True):
            with autocast(config.autocast, batch):
                if loss_fn is None:
                    loss, _ = training_loss(model, batch, config, adjective_classes)
                else:
                    loss, _ = loss_fn(model, batch)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
            optimizer.step()
            scheduler.step()
            running, n = running + loss.item(), n + 1
            bar.update(1)
            if on_step is not None:
                on_step()
        val_ppl = (validate or validation_perplexity)(model, val_data)
        model.train()
        seconds = time.perf_counter() - t0
        spent += seconds
        history.append({"epoch": epoch + 1, "train_loss": running / max(n, 1), "val_ppl": val_ppl, "seconds": seconds})
        bar.set_postfix(epoch=epoch + 1, val_ppl=f"{val_ppl:.3f}")
        if run_dir is not None:
            state = {"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                     "history": history, "epoch": epoch + 1, "train_seconds": spent}

            def write_checkpoint(folder: Path, state=state):
                save_file(_state_dict_for_save(model), folder / "model.safetensors")
                torch.save(state, folder / "trainer_state.pt")

            _atomic_dir_write(run_dir / "checkpoint", write_checkpoint)
        if stop_after_epoch is not None and epoch + 1 >= stop_after_epoch and epoch + 1 < config.epochs:
            bar.close()
            model.eval()
            return TrainResult(history, spent, "interrupted", run_dir)
    bar.close()
    model.eval()
    if run_dir is not None:
        def write_final(folder: Path):
            save_file(_state_dict_for_save(model), folder / "model.safetensors")
            (folder / "history.json").write_text(json.dumps({"history": history, "train_seconds": spent}, indent=2))

        _atomic_dir_write(run_dir / "final", write_final)
        shutil.rmtree(run_dir / "checkpoint", ignore_errors=True)
    return TrainResult(history, spent, status, run_dir)
