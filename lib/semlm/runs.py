"""How a run happens, for every chapter: the runner owns the *how*, an experiment the *what*.

An experiment (paper A's synthetic task, SST-2, paper B's GPT, the LoRA runs, topic drift)
subclasses :class:`Experiment` and declares only what a run is:

* ``name`` and ``sources`` (the library files whose text a trained model depends on),
* ``prepare(spec)``: the data (corpus, tokenizer, tensors),
* ``build(spec, data)``: a freshly initialised model,
* ``fit(spec, data)``: a :class:`Fit`, what :func:`semlm.train.train` needs (data, config, loss),
* ``evaluate(spec, data, model, result)``: the trained model's metrics.

The runner (:func:`run_many`, :func:`run_one`) does the rest, the same way for everyone:

* **cache key**: a hash of the spec's config, the experiment's sources, the device type and
  the thread count; a run lives in ``<runs dir>/<experiment>/<group>/<name>-seed<seed>-<key>``,
  so unchanged code and config reload the finished run and any change trains a new one;
* **train or load**: :func:`semlm.train.train` trains (resuming an interrupted run, refusing a
  folder made with another config, never overwriting a finished run); a finished run's
  :class:`RunRecord` is read back without touching the model unless its evaluation code changed;
* **threads and device**: every CPU run uses one thread (so its numbers do not depend on how many
  ran side by side); CUDA when there is one, unless the spec's experiment says otherwise;
* **worker pool**: ``workers`` spawned one-thread processes, with one progress bar fed by a queue;
* **run record**: status (trained / resumed / loaded), seconds, steps, history, metrics, peak
  memory, device and threads, written atomically to ``record.json``; with ``SEMLM_RUN_LOG`` set
  (the book runner sets it per chapter) one line per run is appended there for the manifest.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
import multiprocessing as mp
import os
import queue
import resource
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from .data.paths import REPO_ROOT
from .train import TrainingHistory, TrainResult, fingerprint, progress_bar, set_seed, train

LIBRARY = Path(__file__).parent


def default_runs_dir(profile: str) -> Path:
    """``$SEMLM_RUNS_DIR/<profile>``, by default ``book/_build/runs/<profile>``."""
    return Path(os.environ.get("SEMLM_RUNS_DIR", REPO_ROOT / "book" / "_build" / "runs")) / profile


def default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def source_hash(sources: Sequence[str | Callable | type]) -> str:
    """Hash of library files (paths relative to ``lib/semlm``) and of the source of functions or classes."""
    import inspect

    h = hashlib.sha256()
    for item in sources:
        if isinstance(item, str):
            h.update(item.encode())
            h.update((LIBRARY / item).read_bytes())
        else:
            h.update(inspect.getsource(item).encode())
    return h.hexdigest()[:12]


def _jsonable(value):
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


@dataclass(frozen=True)
class RunSpec:
    """One model to train: its name in the chapter, its seed and the experiment's config for it.

    ``config`` is any picklable value the experiment understands (usually a frozen dataclass);
    all of it enters the cache key. ``group`` is a sub-folder (a setting, a dataset).
    """

    name: str
    seed: int
    config: Any
    group: str = ""

    def description(self) -> dict:
        return {"name": self.name, "seed": self.seed, "group": self.group, "config": _jsonable(self.config)}


@dataclass
class Fit:
    """What :func:`semlm.train.train` needs for one run."""

    train_data: Any
    val_data: Any
    config: Any                                 # a semlm.profiles.TrainConfig
    loss_fn: Callable | None = None             # (model, batch, step) -> (loss, parts); None: paper A's Eq. 5
    validate: Callable | None = None            # (model, val_data, step) -> perplexity
    adjective_classes: Sequence[torch.Tensor] = ()


class Experiment:
    """What a run is. Subclasses set ``name`` and ``sources`` and implement the four methods.

    Instances must be cheap to pickle (the worker processes receive them): keep only settings
    on ``self``; :meth:`data` caches prepared data per process and is not pickled.
    """

    name: str = "experiment"
    #: library files (relative to lib/semlm) or objects whose source a trained model depends on
    sources: tuple = ()
    #: library files or objects that only the evaluation depends on (a change re-evaluates, never retrains)
    evaluation_sources: tuple = ()

    def prepare(self, spec: RunSpec):
        raise NotImplementedError

    def build(self, spec: RunSpec, data) -> torch.nn.Module:
        raise NotImplementedError

    def fit(self, spec: RunSpec, data) -> Fit:
        raise NotImplementedError

    def evaluate(self, spec: RunSpec, data, model: torch.nn.Module, result: TrainResult) -> dict:
        return {}

    def data_key(self, spec: RunSpec):
        """What identifies the prepared data of ``spec`` (specs with equal keys share it)."""
        return json.dumps(_jsonable(spec.config), sort_keys=True, default=str)

    def data(self, spec: RunSpec):
        """``prepare(spec)``, once per process for all specs with the same :meth:`data_key`."""
        cache = self.__dict__.setdefault("_data_cache", {})
        key = self.data_key(spec)
        if key not in cache:
            cache[key] = self.prepare(spec)
        return cache[key]

    def use_data(self, spec: RunSpec, data) -> None:
        """Serve ``data``, already prepared in this process (e.g. by a chapter), for ``spec`` and every
        spec sharing its :meth:`data_key`, instead of preparing it again."""
        self.__dict__.setdefault("_data_cache", {})[self.data_key(spec)] = data

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k != "_data_cache"}

    def reference(self) -> str:
        """``module:attribute`` under which this experiment can be found again (records name it)."""
        module = type(self).__module__
        for attribute, value in vars(importlib.import_module(module)).items():
            # a worker process holds an unpickled copy: the same class with the same settings
            if value is self or (type(value) is type(self) and value.__getstate__() == self.__getstate__()):
                return f"{module}:{attribute}"
        raise ValueError(f"experiment {self.name!r} must be a module-level object of {module} to be recorded")

    def total_steps(self, spec: RunSpec) -> int | None:
        """Optimiser steps of ``spec`` for the progress bar (None: count finished runs instead)."""
        return None


def experiment_of(reference: str) -> Experiment:
    module, attribute = reference.split(":")
    return getattr(importlib.import_module(module), attribute)


@dataclass
class RunRecord(TrainingHistory):
    """What one run did and measured; ``load()`` rebuilds the trained model."""

    experiment: str               # "module:attribute" of the Experiment
    name: str
    seed: int
    group: str
    config: dict
    key: str
    run_dir: str
    status: str                   # trained | resumed | loaded
    train_seconds: float
    steps: int
    history: list[dict]
    metrics: dict
    device: str
    threads: int
    peak_rss_mb: float
    stopped_early: bool = False
    best_step: int | None = None
    evaluation_key: str = ""
    spec: RunSpec | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "spec"}

    def load(self, device: str | torch.device | None = None) -> torch.nn.Module:
        """The trained model in eval mode (on ``device``; default: where it was trained if available)."""
        experiment = experiment_of(self.experiment)
        if self.spec is None:
            raise ValueError(f"record of {self.name} has no spec; get it from run_one / run_many")
        device = device or (self.device if self.device != "cuda" or torch.cuda.is_available() else "cpu")
        return load_model(experiment, self.spec, Path(self.run_dir), device)


def load_model(experiment: Experiment, spec: RunSpec, folder: Path, device: str | torch.device) -> torch.nn.Module:
    """Rebuild the model of a finished run from its weights (``train/final``)."""
    from .train import _load_weights

    data = experiment.data(spec)
    set_seed(spec.seed)
    model = experiment.build(spec, data).to(device)
    weights = folder / "train" / "final" / "model.safetensors"
    if not weights.is_file():
        raise FileNotFoundError(f"{weights} is missing: the run did not finish; run the chapter again to train it")
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    _load_weights(model, weights, trainable < sum(p.numel() for p in model.parameters()))
    return model.eval()


def run_key(experiment: Experiment, spec: RunSpec, device: str, threads: int) -> str:
    return fingerprint(experiment.name, spec.description(), source_hash(experiment.sources),
                       torch.device(device).type, threads)


def run_folder(experiment: Experiment, spec: RunSpec, runs_dir: Path, device: str, threads: int) -> Path:
    key = run_key(experiment, spec, device, threads)
    group = Path(experiment.name) / spec.group if spec.group else Path(experiment.name)
    return Path(runs_dir) / group / f"{spec.name}-seed{spec.seed}-{key}"


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def _log_run(record: RunRecord) -> None:
    log = os.environ.get("SEMLM_RUN_LOG")
    if log:
        with open(log, "a") as f:
            f.write(json.dumps({"experiment": record.experiment, "name": record.name, "seed": record.seed,
                                "group": record.group, "status": record.status,
                                "train_seconds": round(record.train_seconds, 2), "device": record.device}) + "\n")


def run_one(experiment: Experiment, spec: RunSpec, runs_dir: str | Path, threads: int = 1,
            device: str | None = None, progress: bool | str = False, progress_queue=None) -> RunRecord:
    """Train (or load) the run of ``spec`` and evaluate it: the whole life of one run."""
    device = device or default_device()
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        folder = run_folder(experiment, spec, Path(runs_dir), device, threads)
        key = folder.name.rsplit("-", 1)[-1]
        evaluation_key = source_hash(experiment.evaluation_sources) if experiment.evaluation_sources else ""
        record_path = folder / "record.json"
        if record_path.is_file():
            saved = json.loads(record_path.read_text())
            if experiment.evaluation_sources and saved.get("evaluation_key") == evaluation_key:
                record = RunRecord(**{**saved, "status": "loaded", "spec": spec})
                _log_run(record)
                return record
        data = experiment.data(spec)
        set_seed(spec.seed)
        model = experiment.build(spec, data).to(device)
        fit = experiment.fit(spec, data)
        on_step = (lambda: progress_queue.put(1)) if progress_queue is not None else None
        label = progress if isinstance(progress, str) else f"{spec.name} (seed {spec.seed})"
        result = train(model, fit.train_data, fit.val_data, fit.config, fit.adjective_classes,
                       run_dir=folder / "train", run_description=spec.description(),
                       progress=label if progress and on_step is None else False, on_step=on_step,
                       loss_fn=fit.loss_fn, validate=fit.validate)
        model.eval()
        metrics = experiment.evaluate(spec, data, model, result)
        record = RunRecord(experiment.reference(), spec.name, spec.seed, spec.group, _jsonable(spec.config), key,
                           str(folder), result.status, result.train_seconds, result.steps, result.history,
                           _jsonable(metrics), torch.device(device).type, threads, peak_rss_mb(),
                           result.stopped_early, result.best_step, evaluation_key, spec)
        on_disk = record.to_dict()
        if result.status == "loaded" and record_path.is_file():  # re-evaluated: the file keeps how it was trained
            on_disk["status"] = json.loads(record_path.read_text()).get("status", result.status)
        _write_atomic(record_path, json.dumps(on_disk, indent=2, default=str))
        _log_run(record)
        return record
    finally:
        torch.set_num_threads(previous_threads)


def run_many(experiment: Experiment, specs: Sequence[RunSpec], runs_dir: str | Path,
             workers: int = 1, device: str | None = None, progress: bool = True,
             label: str | None = None) -> list[RunRecord]:
    """Every spec's run, in ``workers`` spawned one-thread processes when > 1 (on CUDA: in this
    process, one after another); records come back in the order of ``specs``."""
    if not specs:
        return []
    keys = [(s.group, s.name, s.seed) for s in specs]
    if len(set(keys)) != len(keys):
        raise ValueError(f"runs must differ in group, name or seed; got duplicates in {keys}")
    device = device or default_device()
    workers = max(1, min(workers, len(specs)))
    if workers == 1 or torch.device(device).type == "cuda":
        return [run_one(experiment, s, runs_dir, 1, device,
                        progress=f"{label or experiment.name}: {s.name}" if progress else False) for s in specs]
    for spec in specs:  # prepare (and cache on disk) shared data once, before the workers read it
        experiment.data(spec)
    steps = [experiment.total_steps(s) for s in specs]
    context = mp.get_context("spawn")
    with context.Manager() as manager, ProcessPoolExecutor(workers, mp_context=context) as pool:
        updates = manager.Queue()
        futures = [pool.submit(run_one, experiment, s, runs_dir, 1, device, False, updates) for s in specs]
        total = sum(steps) if all(steps) else None
        with progress_bar(total or len(specs), label or f"{experiment.name}: {len(specs)} runs", progress) as bar:
            finished = 0
            while not all(f.done() for f in futures):
                try:
                    updates.get(timeout=0.2)
                    if total:
                        bar.update(1)
                except queue.Empty:
                    pass
                if not total:
                    now = sum(f.done() for f in futures)
                    bar.update(now - finished)
                    finished = now
        records = [f.result() for f in futures]
    for record, spec in zip(records, specs):
        record.spec = spec
    return records
