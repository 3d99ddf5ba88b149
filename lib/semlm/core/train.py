"""One trainer for every chapter: AdamW, warmup + cosine (or constant), clipping, accumulation, patience.

An experiment supplies the *what* (its data, its ``loss_fn(model, batch, step) -> (loss, parts)``,
optionally its ``validate``); :class:`Trainer` owns the *how*, once: the optimiser and the
schedule, mixed precision (:mod:`semlm.core.precision`), resuming, checkpoints, early stopping,
and (given an ``accelerate.Accelerator``) data-parallel training over several processes.

Every epoch reseeds torch (dropout) and the batch order from ``(seed, epoch)``, so a resumed run is
bit-identical to an uninterrupted one. Checkpoints replace the previous one only once fully written; a
finished run (``final/``) is never overwritten, and a different config in a resumable folder is refused.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import itertools
import json
import math
import os
import random
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

import torch
from safetensors.torch import load_file, save_file
from torch import nn
from tqdm import tqdm

from semlm.core.metrics import perplexity
from semlm.core.precision import autocast
from semlm.core.train_config import TrainConfig, execution_fields

#: ``loss_fn(model, batch, step) -> (loss, parts)``: ``step`` is the optimiser steps done, ``parts``
#: named detached 0-d tensors (or floats) logged per validation
LossFn = Callable[[nn.Module, Any, int], "tuple[torch.Tensor, dict]"]
#: ``validate(model, val_data, step) -> perplexity``
Validate = Callable[[nn.Module, Any, int], float]


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

    @property
    def cpu_seconds(self) -> float | None:
        """CPU time of the training process while it trained (all its threads, validation excluded, summed over
        resumed sessions); None for a run trained before it was recorded."""
        return self.history[-1].get("train_cpu_seconds") if self.history else None


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


def set_seed(seed: int) -> None:
    """Seed torch (and Python's ``random``) for model initialisation."""
    random.seed(seed)
    torch.manual_seed(seed)


def fingerprint(*parts) -> str:
    """Stable hash of JSON-able configs and tensors (used to recognise a run folder)."""
    h = hashlib.sha256()
    for p in parts:
        if isinstance(p, torch.Tensor):
            h.update(p.detach().cpu().contiguous().numpy().tobytes())
        else:
            h.update(json.dumps(p, sort_keys=True, default=str).encode())
    return h.hexdigest()[:16]


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
    """The batch with every tensor field on ``device`` (no copy when it is already there). To a GPU through pinned
    memory without waiting: a plain copy would make the host wait for the step before to finish first."""
    tensors = _tensor_fields(batch)
    if all(t.device == device for t in tensors.values()):
        return batch
    to_gpu = torch.device(device).type == "cuda"
    if to_gpu:
        tensors = {name: t.pin_memory() if t.device.type == "cpu" else t for name, t in tensors.items()}
    return dataclasses.replace(batch, **{name: t.to(device, non_blocking=to_gpu) for name, t in tensors.items()})


def lr_factor(step: int, schedule: str, warmup: int, total_steps: int, min_ratio: float = 0.0) -> float:
    """The learning rate of optimiser step ``step`` as a fraction of the peak.

    ``constant``: 1. ``constant_warmup``: linear warmup, then 1. ``cosine``: linear warmup from 0 over ``warmup``
    steps, then half a cosine to 0 at ``total_steps``. ``cosine_min_lr``: the same cosine from 1 to ``min_ratio``
    (the authors' ``get_lr`` of paper B). transformers' formulas (a test compares them), written out because
    importing ``transformers.optimization`` costs every worker process about 4 s.
    """
    if schedule == "constant":
        return 1.0
    if step < warmup:
        return step / max(1, warmup)
    if schedule == "constant_warmup":  # transformers' get_constant_schedule_with_warmup
        return 1.0
    progress = (step - warmup) / max(1, total_steps - warmup)
    cosine = max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))
    return cosine if schedule == "cosine" else min_ratio + (1.0 - min_ratio) * cosine


def make_scheduler(optimizer: torch.optim.Optimizer, config: TrainConfig, total_steps: int):
    """The learning-rate schedule of ``config.schedule`` over ``total_steps`` optimiser steps (a ``LambdaLR``)."""
    warmup = config.warmup_steps if config.warmup_steps is not None else int(config.warmup_fraction * total_steps)
    factor = functools.partial(lr_factor, schedule=config.schedule, warmup=warmup, total_steps=total_steps,
                               min_ratio=config.min_lr / config.lr)
    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def step_batches(data, config: TrainConfig, seed: int, start_step: int, steps_per_epoch: int):
    """Yield ``(step, batch)`` from ``start_step`` on. Every epoch (``shuffle``) or every step
    (``random_windows``) reseeds torch and the sampling generator from ``(seed, epoch | step)``,
    so a run resumed at a checkpoint is bit-identical to an uninterrupted one."""
    generator = torch.Generator()
    step = start_step
    if config.sampling == "random_windows":
        while True:
            torch.manual_seed(_seed_of(seed, step))
            generator.manual_seed(_seed_of(seed, step) + 1)
            yield step, data.sample(config.batch_size, generator)
            step += 1
    epoch = start_step // steps_per_epoch
    while True:
        torch.manual_seed(_seed_of(seed, epoch))
        generator.manual_seed(_seed_of(seed, epoch) + 1)
        batches = data.batches(config.batch_size, generator, shuffle=config.sampling == "shuffle")
        for batch in itertools.islice(batches, step - epoch * steps_per_epoch, None):  # a resumed epoch's rest
            yield step, batch
            step += 1
        epoch += 1


def _trainable_state(model: nn.Module, trainable_only: bool) -> dict[str, torch.Tensor]:
    """Contiguous clones (tied weights share storage; safetensors stores each tensor once) of the whole state,
    or of the trainable parameters only."""
    named = {n: p for n, p in model.named_parameters() if p.requires_grad} if trainable_only else model.state_dict()
    return {n: p.detach().clone().contiguous() for n, p in named.items()}


def load_weights(model: nn.Module, path: Path, trainable_only: bool) -> None:
    state = load_file(path, device=str(next(model.parameters()).device))
    if not trainable_only:
        model.load_state_dict(state)
        return
    missing = set(state) - {n for n, _ in model.named_parameters()}
    if missing:
        raise CheckpointMismatch(f"{path} holds weights this model does not have ({sorted(missing)[:3]} ...); "
                                 f"use another run folder or delete this one")
    model.load_state_dict(state, strict=False)


class Trainer:
    """One run of the loop (:func:`train` drives it): the optimiser, the schedule and the state a checkpoint holds.

    With an ``accelerate.Accelerator`` every process draws the same global batch and trains on its share of the
    rows; DistributedDataParallel averages the gradients, so N processes make the update of one with the whole batch.
    """

    def __init__(self, model: nn.Module, train_data, val_data, config: TrainConfig, loss_fn: LossFn, seed: int,
                 validate: Validate, accelerator=None, snapshots: bool = False):
        if not callable(loss_fn):
            raise TypeError(f"loss_fn must be a callable (model, batch, step) -> (loss, parts), got "
                            f"{type(loss_fn).__name__}; paper A's Eq. 5 is semlm.fusion.losses.FusionLoss")
        self.model, self.config, self.loss_fn, self.seed, self.validate = model, config, loss_fn, seed, validate
        self.train_data, self.val_data, self.accelerator, self.snapshots = train_data, val_data, accelerator, snapshots
        self.processes = accelerator.num_processes if accelerator is not None else 1
        self.is_main = accelerator is None or accelerator.is_main_process
        self.device = next(model.parameters()).device
        # micro-batches per step: config.accumulation, or batch_size / cuda_micro_batch on a CUDA device
        self.accumulation = config.micro_batches(self.device.type)
        if config.batch_size % (self.accumulation * self.processes):
            raise ValueError(f"batch_size {config.batch_size} must split into accumulation {self.accumulation} "
                             f"x {self.processes} processes; change batch_size or the number of processes")
        self.steps_per_epoch = max(1, math.ceil(len(train_data) / config.batch_size))
        self.total_steps = config.max_steps or self.steps_per_epoch * config.epochs
        self.eval_every = config.eval_every or (self.steps_per_epoch if config.max_steps is None else self.total_steps)
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.trainable_only = sum(p.numel() for p in self.params) < sum(p.numel() for p in model.parameters())
        # fused AdamW (one kernel for all parameters) on CUDA; torch's default (foreach) elsewhere
        fused = {"fused": True} if self.device.type == "cuda" else {}
        self.optimizer = torch.optim.AdamW(self.params, lr=config.lr, weight_decay=config.weight_decay, **fused)
        self.scheduler = make_scheduler(self.optimizer, config, self.total_steps)
        # the module the steps run (DistributedDataParallel with several processes); weights are model's
        self.forward_model = accelerator.prepare_model(model) if accelerator is not None else model
        compiled = config.compile_on_cuda and self.device.type == "cuda"
        mode = config.compile_on_cuda if isinstance(config.compile_on_cuda, str) else None
        self.cuda_graphs = compiled and mode in ("reduce-overhead", "max-autotune")
        if compiled:  # the weights stay model's (checkpoints, validation)
            self.forward_model = torch.compile(self.forward_model, mode=mode)
        self.history: list[dict] = []
        self.step, self.train_seconds, self.cpu_seconds, self.status = 0, 0.0, 0.0, "trained"
        self.best, self.stopped_early = {"value": math.inf, "step": None, "state": None, "bad": 0}, False
        self.running: dict[str, float] = {}
        self.counted = 0

    # --- the run folder ---------------------------------------------------------------------

    def resume(self, run_dir: Path, run_info: dict) -> None:
        """Claim ``run_dir`` for this run and load its checkpoint if it has one.

        Refuses a folder made with another configuration (:class:`CheckpointMismatch`) and a
        finished one (``FileExistsError``). With an accelerator the main process goes first
        (it writes ``run.json``), then the others read what it wrote.
        """
        first = self.accelerator.main_process_first() if self.accelerator is not None else contextlib.nullcontext()
        with first:
            key, info_path = fingerprint(run_info), run_dir / "run.json"
            run_dir.mkdir(parents=True, exist_ok=True)
            if info_path.exists():
                existing = json.loads(info_path.read_text())
                if existing.get("key") != key:
                    differing = sorted(k for k in run_info if existing.get("run", {}).get(k) != run_info[k])
                    raise CheckpointMismatch(
                        f"{run_dir} holds a run with a different configuration (differs in: "
                        f"{', '.join(differing) or 'unknown'}); use another run folder or delete this one")
            elif self.is_main:
                info_path.write_text(json.dumps({"key": key, "run": run_info}, indent=2, default=str))
            if (run_dir / "final" / "model.safetensors").exists():
                raise FileExistsError(f"{run_dir / 'final'} holds a finished run; load it "
                                      f"(semlm.core.runs.load_model) or train into another folder")
            if (run_dir / "checkpoint" / "model.safetensors").exists():
                self._load_checkpoint(run_dir / "checkpoint")

    def _load_checkpoint(self, folder: Path) -> None:
        load_weights(self.model, folder / "model.safetensors", self.trainable_only)
        state = torch.load(folder / "trainer_state.pt", weights_only=False, map_location=self.device)
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.history, self.step, self.train_seconds = state["history"], state["step"], state["train_seconds"]
        self.cpu_seconds = (self.history[-1].get("train_cpu_seconds") or 0.0) if self.history else 0.0
        self.best, self.status = state["best"], "resumed"

    def _save(self, target: Path, write_more: Callable[[Path], None] = lambda folder: None) -> None:
        """``target/model.safetensors`` (and what ``write_more`` writes into the folder), written in a temporary
        folder that replaces ``target`` only once complete."""
        tmp, old = target.with_name(target.name + ".tmp"), target.with_name(target.name + ".old")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        save_file(_trainable_state(self.model, self.trainable_only), tmp / "model.safetensors")
        write_more(tmp)
        if target.exists():
            target.rename(old)
        tmp.rename(target)
        shutil.rmtree(old, ignore_errors=True)

    # --- one optimiser step -----------------------------------------------------------------

    def optimiser_step(self, step: int, batch) -> float:
        """One update from ``batch`` (``accumulation`` micro-batches); returns the learning rate it used."""
        self.optimizer.zero_grad(set_to_none=True)
        if self.cuda_graphs:  # a new step: the graphs' outputs of the last one may be overwritten
            torch.compiler.cudagraph_mark_step_begin()
        pieces = split_batch(to_device(batch, self.device), self.accumulation)
        for index, piece in enumerate(pieces):  # gradient accumulation: the update of one batch, less memory
            last = index == len(pieces) - 1
            no_sync = self.accelerator.no_sync(self.forward_model) if self.processes > 1 and not last \
                else contextlib.nullcontext()  # all-reduce the gradients once, after the last micro-batch
            if self.processes > 1:  # this process's share of the micro-batch
                piece = split_batch(piece, self.processes)[self.accelerator.process_index]
            with no_sync:
                with autocast(self.config.autocast, self.device):
                    loss, parts = self.loss_fn(self.forward_model, piece, step)
                (loss / len(pieces) if len(pieces) > 1 else loss).backward()
            for name, value in {"train_loss": loss.detach(), **parts}.items():
                # summed on the device in float64 (no host-device synchronisation per step; read at validation)
                value = value.detach().double() if torch.is_tensor(value) else float(value)
                self.running[name] = self.running.get(name, 0.0) + value / len(pieces)
        if self.config.grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(self.params, self.config.grad_clip)
        self.optimizer.step()
        lr = self.scheduler.get_last_lr()[0]
        self.scheduler.step()
        self.counted += 1
        return lr

    # --- validation, patience, checkpoint ---------------------------------------------------

    def validate_and_checkpoint(self, seconds: float, lr: float, run_dir: Path | None,
                                cpu_seconds: float = 0.0) -> float:
        """After step ``self.step``: a history row, the patience count, and a checkpoint unless the run ends."""
        self.train_seconds += seconds
        self.cpu_seconds += cpu_seconds
        value = self.validate(self.model, self.val_data, self.step)
        self.forward_model.train()
        # the training parts averaged over the steps since the last validation (and over processes)
        totals = [float(total) for total in self.running.values()]  # the one host-device synchronisation
        if self.processes > 1 and totals:
            totals = self.accelerator.reduce(torch.tensor(totals, device=self.device), "mean").tolist()
        row = {"step": self.step, "val_ppl": value, "seconds": seconds, "train_seconds": self.train_seconds,
               "cpu_seconds": cpu_seconds, "train_cpu_seconds": self.cpu_seconds, "lr": lr,
               **{name: total / self.counted for name, total in zip(self.running, totals)}}
        if self.config.max_steps is None:
            row = {"epoch": math.ceil(self.step / self.steps_per_epoch), **row}
        self.history.append(row)
        self.running, self.counted = {}, 0
        if self.config.patience is not None:
            if value < self.best["value"] or self.step < self.config.patience_from_step:
                self.best = {"value": value, "step": self.step, "state": _trainable_state(self.model, True), "bad": 0}
            else:
                self.best["bad"] += 1
                self.stopped_early = self.best["bad"] >= self.config.patience
        if run_dir is not None and self.is_main and self.snapshots:  # kept for good: a learning curve from one run
            self._save(snapshot_folder(run_dir, self.step))
        if run_dir is not None and self.is_main and not self.stopped_early and self.step < self.total_steps:
            state = {"optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict(),
                     "history": self.history, "step": self.step, "train_seconds": self.train_seconds,
                     "best": self.best}
            self._save(run_dir / "checkpoint", lambda folder: torch.save(state, folder / "trainer_state.pt"))
        return value

    # --- the loop and its end ---------------------------------------------------------------

    def run(self, run_dir: Path | None, stop_after_step: int | None, bar, on_step: Callable[[], None] | None) -> None:
        """Optimiser steps from ``self.step`` to the end (or ``stop_after_step``, or patience)."""
        self.forward_model.train()
        t0, c0 = time.perf_counter(), time.process_time()
        for step, batch in step_batches(self.train_data, self.config, self.seed, self.step, self.steps_per_epoch):
            if step >= self.total_steps or (stop_after_step is not None and step >= stop_after_step):
                break
            lr = self.optimiser_step(step, batch)
            self.step = step + 1
            bar.update(1)
            if on_step is not None:
                on_step()
            if self.step % self.eval_every and self.step != self.total_steps:
                continue
            value = self.validate_and_checkpoint(time.perf_counter() - t0, lr, run_dir, time.process_time() - c0)
            bar.set_postfix(val_ppl=f"{value:.3f}")
            t0, c0 = time.perf_counter(), time.process_time()
            if self.stopped_early:
                break

    def finish(self, run_dir: Path | None) -> TrainResult:
        """The run's result; a finished run gets its best weights (patience) and ``final/`` (never rewritten)."""
        steps = self.history[-1]["step"] if self.history else self.step
        self.model.eval()
        if steps < self.total_steps and not self.stopped_early:
            return TrainResult(self.history, self.train_seconds, "interrupted", run_dir, steps)
        if self.best["state"] is not None:
            with torch.no_grad():
                named = dict(self.model.named_parameters())
                for name, value in self.best["state"].items():
                    named[name].copy_(value)
        result = TrainResult(self.history, self.train_seconds, self.status, run_dir, steps, self.stopped_early,
                             self.best["step"])
        if run_dir is not None and self.is_main:
            saved = json.dumps({"history": self.history, "train_seconds": self.train_seconds, "steps": steps,
                                "stopped_early": self.stopped_early, "best_step": self.best["step"]}, indent=2)
            self._save(run_dir / "final", lambda folder: (folder / "history.json").write_text(saved))
            shutil.rmtree(run_dir / "checkpoint", ignore_errors=True)
        if self.accelerator is not None:
            self.accelerator.wait_for_everyone()  # every process returns once final/ is written
        return result


def train(model: nn.Module, train_data, val_data, config: TrainConfig, loss_fn: LossFn, *, seed: int,
          validate: Validate | None = None, run_dir: str | Path | None = None, run_description: dict | None = None,
          progress: bool | str = True, stop_after_step: int | None = None, on_step: Callable[[], None] | None = None,
          accelerator=None, snapshots: bool = False) -> TrainResult:
    """Train ``model`` in place with ``loss_fn`` and return its validation history: the one loop of every chapter.

    ``loss_fn(model, batch, step) -> (loss, parts)`` is the experiment's objective (paper A's Eq. 5 is
    :class:`semlm.fusion.losses.FusionLoss`), ``validate(model, val_data, step) -> ppl`` its validation (default:
    :func:`semlm.core.metrics.perplexity`); ``step`` counts the optimiser steps done (a gate ramped over steps).
    The data has ``batches(batch_size, generator, shuffle)`` (or ``sample(batch_size, generator)`` for
    ``sampling="random_windows"``) and ``input_ids``, hashed into the run key; ``seed`` draws the batches and
    reseeds dropout every epoch or step.

    Only parameters with ``requires_grad`` are optimised, and a model whose trainable parameters are a small part
    of it (LoRA adapters, an idea head) is checkpointed by those alone. ``run_description`` (JSON-able, e.g. the
    model config) joins ``config``, ``seed`` and the data in the run folder's fingerprint. ``stop_after_step`` ends
    early, resumably (the tests' interruption); ``on_step`` is called after every optimiser step (workers report
    progress with it); ``accelerator`` trains data-parallel over its processes (:mod:`semlm.idea.distributed`),
    the main one writing the run folder; ``snapshots`` keeps the weights of every validation
    (:func:`snapshot_folder`): a learning curve from one run.
    """
    if accelerator is not None:
        model.to(accelerator.device)
    validate = validate or (lambda model, data, step: perplexity(model, data))  # no label smoothing
    trainer = Trainer(model, train_data, val_data, config, loss_fn, seed, validate, accelerator,
                      snapshots and run_dir is not None)
    run_dir = Path(run_dir) if run_dir is not None else None
    if run_dir is not None:
        recipe = {k: v for k, v in asdict(config).items() if k not in execution_fields(config)}
        trainer.resume(run_dir, {"train_config": recipe, "seed": seed, "model": run_description or {},
                                 "data": fingerprint(train_data.input_ids, val_data.input_ids)})
    label = progress if isinstance(progress, str) else "train"
    bar = progress_bar(trainer.total_steps, label, bool(progress) and trainer.is_main, initial=trainer.step,
                       dynamic_ncols=True)
    trainer.run(run_dir, stop_after_step, bar, on_step)
    bar.close()
    return trainer.finish(run_dir)


def snapshot_folder(run_dir: str | Path, step: int) -> Path:
    """Where a run trained with ``snapshots=True`` keeps its weights after optimiser step ``step``."""
    return Path(run_dir) / "snapshots" / f"step{step:07d}"
