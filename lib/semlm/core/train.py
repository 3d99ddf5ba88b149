"""One trainer for every chapter: AdamW, 10% warmup + cosine, clipping, label smoothing.

Reproducibility and safety rules:

* every epoch reseeds torch (dropout) and the batch-order generator from
  ``(seed, epoch)``, so a run resumed at an epoch boundary is bit-identical to an
  uninterrupted one;
* with a ``run_dir``, the weights are saved as safetensors after each epoch, in a
  temporary folder that replaces the previous checkpoint only once fully written;
* a finished run (``final/``) is never overwritten: training into its folder again is refused
  (the runner loads finished runs itself), and so is a different config in a resumable folder.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
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

from semlm.data.dataset import LMTensors
from semlm.fusion.losses import adjective_uniformizer, auxiliary_bce, label_smoothed_cross_entropy
from semlm.core.metrics import perplexity
from semlm.profiles import TrainConfig


class TrainingHistory:
    """Views of a run's ``history`` rows shared by :class:`TrainResult` and ``semlm.core.runs.RunRecord``."""

    history: list[dict]
    train_seconds: float
    steps: int

    @property
    def val_ppl_per_epoch(self) -> list[float]:
        return [row["val_ppl"] for row in self.history]

    @property
    def seconds_per_step(self) -> float:
        return self.train_seconds / max(self.steps, 1)


@dataclass
class TrainResult(TrainingHistory):
    history: list[dict]           # one row per validation: step, epoch, train_loss, val_ppl, seconds, lr, loss parts
    train_seconds: float          # wall time spent training (summed over resumed sessions)
    status: str                   # "trained", "resumed", "loaded" (a finished run found on disk) or "interrupted"
    run_dir: Path | None = None
    steps: int = 0                # optimiser steps taken
    stopped_early: bool = False   # ``patience`` ended the run before its last step
    best_step: int | None = None  # with ``patience``: the step whose weights the model holds


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


def training_loss(model: nn.Module, batch: LMTensors, config: TrainConfig,
                  adjective_classes: Sequence[torch.Tensor], label_smoothing: float | None = None) -> tuple[torch.Tensor, dict]:
    """Eq. 5 for one batch; the auxiliary term only exists for models with an aux head.

    ``parts`` holds each term as a detached 0-d tensor, not a Python float: converting is
    the caller's choice (a ``.item()`` per term would wait for the device at every step).
    """
    out = model(batch.input_ids, batch.features, batch.mask)
    eps = config.label_smoothing if label_smoothing is None else label_smoothing
    lm = label_smoothed_cross_entropy(out.logits, batch.targets, batch.scored, eps)  # no <pad> targets
    loss, parts = lm, {"lm": lm.detach()}
    if config.uniformizer_weight and adjective_classes:
        uni = adjective_uniformizer(out.logits, batch.targets, batch.scored, adjective_classes)
        loss = loss + config.uniformizer_weight * uni
        parts["uniformizer"] = uni.detach()
    if out.feature_pred is not None and config.aux_weight:
        aux = auxiliary_bce(out.feature_pred, batch.features, batch.mask)
        loss = loss + config.aux_weight * aux
        parts["aux"] = aux.detach()
    return loss, parts


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


def _seed_of(seed: int, index: int) -> int:
    return (seed * 1_000_003 + index * 7_919) % (2**63 - 1)


def _tensor_fields(batch) -> dict[str, torch.Tensor]:
    return {f.name: getattr(batch, f.name) for f in dataclasses.fields(batch)
            if isinstance(getattr(batch, f.name), torch.Tensor)}


def split_batch(batch, parts: int) -> list:
    """A dataclass batch cut into ``parts`` consecutive micro-batches along dim 0 (fewer if it has fewer rows)."""
    if parts <= 1:
        return [batch]
    tensors = _tensor_fields(batch)
    rows = next(iter(tensors.values())).shape[0]
    chunks = {name: torch.tensor_split(t, min(parts, rows)) for name, t in tensors.items()}
    return [dataclasses.replace(batch, **{name: c[i] for name, c in chunks.items()})
            for i in range(min(parts, rows))]


def to_device(batch, device: torch.device):
    """The batch with every tensor field on ``device`` (no copy when it is already there)."""
    tensors = _tensor_fields(batch)
    if all(t.device == device for t in tensors.values()):
        return batch
    return dataclasses.replace(batch, **{name: t.to(device) for name, t in tensors.items()})


def lr_factor(step: int, schedule: str, warmup: int, total_steps: int, min_ratio: float = 0.0) -> float:
    """The learning rate of optimiser step ``step`` as a fraction of the peak.

    ``constant``: 1. ``cosine``: linear warmup from 0 over ``warmup`` steps, then half a cosine to 0
    at ``total_steps`` (transformers' ``get_cosine_schedule_with_warmup``). ``cosine_min_lr``: the
    same cosine from 1 down to ``min_ratio`` (transformers' ``get_cosine_with_min_lr_schedule_with_warmup``,
    the authors' ``get_lr`` of paper B). Written out here, with the same formulas (a test compares them
    with transformers' schedulers), because importing ``transformers.optimization`` costs every
    worker process about 4 s (it pulls in peft and bitsandbytes).
    """
    if schedule == "constant":
        return 1.0
    if step < warmup:
        return step / max(1, warmup)
    progress = (step - warmup) / max(1, total_steps - warmup)
    cosine = max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))
    return cosine if schedule == "cosine" else min_ratio + (1.0 - min_ratio) * cosine


def make_scheduler(optimizer: torch.optim.Optimizer, config: TrainConfig, total_steps: int):
    """The learning-rate schedule of ``config.schedule`` over ``total_steps`` optimiser steps (a ``LambdaLR``)."""
    warmup = config.warmup_steps if config.warmup_steps is not None else int(config.warmup_fraction * total_steps)
    factor = functools.partial(lr_factor, schedule=config.schedule, warmup=warmup, total_steps=total_steps,
                               min_ratio=config.min_lr / config.lr)
    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def _step_batches(data, config: TrainConfig, start_step: int, steps_per_epoch: int):
    """Yield ``(step, batch)`` from ``start_step`` on. Every epoch (``shuffle``) or every step
    (``random_windows``) reseeds torch and the sampling generator from ``(seed, epoch | step)``,
    so a run resumed at a checkpoint is bit-identical to an uninterrupted one."""
    generator = torch.Generator()
    step = start_step
    if config.sampling == "random_windows":
        while True:
            torch.manual_seed(_seed_of(config.seed, step))
            generator.manual_seed(_seed_of(config.seed, step) + 1)
            yield step, data.sample(config.batch_size, generator)
            step += 1
    epoch = start_step // steps_per_epoch
    while True:
        torch.manual_seed(_seed_of(config.seed, epoch))
        generator.manual_seed(_seed_of(config.seed, epoch) + 1)
        skip = step - epoch * steps_per_epoch
        batches = data.batches(config.batch_size, generator, shuffle=config.sampling == "shuffle")
        for index, batch in enumerate(batches):
            if index >= skip:
                yield step, batch
                step += 1
        epoch += 1


def _trainable_state(model: nn.Module, trainable_only: bool) -> dict[str, torch.Tensor]:
    if not trainable_only:
        return _state_dict_for_save(model)
    return {n: p.detach().clone().contiguous() for n, p in model.named_parameters() if p.requires_grad}


def _load_weights(model: nn.Module, path: Path, trainable_only: bool) -> None:
    state = load_file(path, device=str(next(model.parameters()).device))
    if not trainable_only:
        model.load_state_dict(state)
        return
    missing = set(state) - {n for n, _ in model.named_parameters()}
    if missing:
        raise CheckpointMismatch(f"{path} holds weights this model does not have ({sorted(missing)[:3]} ...); "
                                 f"use another run folder or delete this one")
    model.load_state_dict(state, strict=False)


def train(model: nn.Module, train_data, val_data, config: TrainConfig,
          adjective_classes: Sequence[torch.Tensor] = (), run_dir: str | Path | None = None,
          run_description: dict | None = None, progress: bool | str = True,
          stop_after_epoch: int | None = None, stop_after_step: int | None = None,
          on_step: Callable[[], None] | None = None,
          loss_fn: Callable[[nn.Module, object, int], tuple[torch.Tensor, dict]] | None = None,
          validate: Callable[[nn.Module, object, int], float] | None = None) -> TrainResult:
    """Train ``model`` in place and return its validation history: the one loop of every chapter.

    By default it trains paper A's models on ``LMTensors`` with Eq. 5. Other chapters pass
    ``loss_fn(model, batch, step) -> (loss, parts)`` and ``validate(model, val_data, step) -> ppl``
    (``step``: optimiser steps done, e.g. for a gate strength ramped over steps) and any data
    with ``batches(batch_size, generator, shuffle)`` (or ``sample(batch_size, generator)`` for
    ``sampling="random_windows"``) whose ``input_ids`` are hashed into the run key.

    Only parameters with ``requires_grad`` are optimised (a frozen backbone stays frozen), and a
    model whose trainable parameters are a small part of it (LoRA adapters, an idea head) is
    checkpointed by those alone. ``run_description`` (any JSON-able dict, e.g. the model config)
    goes into the run's fingerprint together with ``config`` and the data, so that a folder cannot
    silently mix runs. ``stop_after_epoch`` / ``stop_after_step`` end early (the run stays
    resumable; the tests simulate an interruption with them). ``on_step`` is called after every
    optimiser step (worker processes use it to report progress to the parent).
    """
    run_dir = Path(run_dir) if run_dir is not None else None
    run_info = {"train_config": asdict(config), "model": run_description or {},
                "data": fingerprint(train_data.input_ids, val_data.input_ids)}
    key = fingerprint(run_info)
    steps_per_epoch = max(1, math.ceil(len(train_data) / config.batch_size))
    total_steps = config.max_steps or steps_per_epoch * config.epochs
    eval_every = config.eval_every or (steps_per_epoch if config.max_steps is None else total_steps)
    if stop_after_epoch is not None:
        stop_after_step = stop_after_epoch * steps_per_epoch
    device = next(model.parameters()).device
    params = [p for p in model.parameters() if p.requires_grad]
    all_params = sum(p.numel() for p in model.parameters())
    trainable_only = sum(p.numel() for p in params) < all_params
    optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
    scheduler = make_scheduler(optimizer, config, total_steps)

    history: list[dict] = []
    start_step, spent, status = 0, 0.0, "trained"
    best = {"value": math.inf, "step": None, "state": None, "bad": 0}
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
            raise FileExistsError(f"{final} holds a finished run; load it (semlm.core.runs.load_model) "
                                  f"or train into another folder")
        if (ckpt / "model.safetensors").exists():
            _load_weights(model, ckpt / "model.safetensors", trainable_only)
            state = torch.load(ckpt / "trainer_state.pt", weights_only=False, map_location=device)
            optimizer.load_state_dict(state["optimizer"])
            scheduler.load_state_dict(state["scheduler"])
            history, start_step, spent, best = state["history"], state["step"], state["train_seconds"], state["best"]
            status = "resumed"

    label = progress if isinstance(progress, str) else "train"
    bar = progress_bar(total_steps, label, bool(progress), initial=start_step, dynamic_ncols=True)
    model.train()
    running: dict[str, float] = {}
    counted, t0 = 0, time.perf_counter()
    stopped_early = False
    step = start_step
    for step, batch in _step_batches(train_data, config, start_step, steps_per_epoch):
        if step >= total_steps or (stop_after_step is not None and step >= stop_after_step):
            break
        optimizer.zero_grad(set_to_none=True)
        pieces = split_batch(to_device(batch, device), config.accumulation)
        for piece in pieces:  # gradient accumulation: the update of one batch, less activation memory
            with autocast(config.autocast, device=device):
                if loss_fn is None:
                    loss, parts = training_loss(model, piece, config, adjective_classes)
                else:
                    loss, parts = loss_fn(model, piece, step)
            (loss / len(pieces) if len(pieces) > 1 else loss).backward()
            for name, value in {"train_loss": loss.detach(), **parts}.items():
                running[name] = running.get(name, 0.0) + float(value) / len(pieces)
        if config.grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(params, config.grad_clip)
        optimizer.step()
        lr = scheduler.get_last_lr()[0]
        scheduler.step()
        counted += 1
        bar.update(1)
        if on_step is not None:
            on_step()
        done = step + 1
        if done % eval_every and done != total_steps:
            continue
        seconds = time.perf_counter() - t0
        spent += seconds
        value = (validate or _validate_perplexity)(model, val_data, done)
        model.train()
        row = {"step": done, "val_ppl": value, "seconds": seconds, "train_seconds": spent, "lr": lr,
               **{name: total / counted for name, total in running.items()}}
        if config.max_steps is None:
            row = {"epoch": math.ceil(done / steps_per_epoch), **row}
        history.append(row)
        running, counted = {}, 0
        bar.set_postfix(val_ppl=f"{value:.3f}")
        if config.patience is not None:
            if value < best["value"] or done < config.patience_from_step:
                best = {"value": value, "step": done, "state": _trainable_state(model, True), "bad": 0}
            else:
                best["bad"] += 1
                stopped_early = best["bad"] >= config.patience
        if run_dir is not None and not stopped_early and done < total_steps:
            state = {"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                     "history": history, "step": done, "train_seconds": spent, "best": best}

            def write_checkpoint(folder: Path, state=state):
                save_file(_trainable_state(model, trainable_only), folder / "model.safetensors")
                torch.save(state, folder / "trainer_state.pt")

            _atomic_dir_write(run_dir / "checkpoint", write_checkpoint)
        t0 = time.perf_counter()
        if stopped_early:
            break
    bar.close()
    steps = history[-1]["step"] if history else start_step
    if steps < total_steps and not stopped_early:
        model.eval()
        return TrainResult(history, spent, "interrupted", run_dir, steps)
    if best["state"] is not None:
        with torch.no_grad():
            named = dict(model.named_parameters())
            for name, value in best["state"].items():
                named[name].copy_(value)
    model.eval()
    result = TrainResult(history, spent, status, run_dir, steps, stopped_early, best["step"])
    if run_dir is not None:
        def write_final(folder: Path):
            save_file(_trainable_state(model, trainable_only), folder / "model.safetensors")
            (folder / "history.json").write_text(json.dumps(
                {"history": history, "train_seconds": spent, "steps": steps, "stopped_early": stopped_early,
                 "best_step": best["step"]}, indent=2))

        _atomic_dir_write(run_dir / "final", write_final)
        shutil.rmtree(run_dir / "checkpoint", ignore_errors=True)
    return result


def _validate_perplexity(model: nn.Module, data, step: int) -> float:
    """The default validation: perplexity with no label smoothing (``semlm.core.metrics.perplexity``)."""
    return perplexity(model, data)
