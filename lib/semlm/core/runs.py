"""How a run happens, for every chapter: the runner owns the *how*, an experiment the *what*.

An experiment (paper A's synthetic task, SST-2, paper B's GPT, the LoRA runs, topic drift)
subclasses :class:`Experiment` and declares only what a run is: its ``name``, ``prepare(spec)`` (the
data: corpus, tokenizer, tensors), ``build(spec, data)`` (a freshly initialised model), ``fit(spec, data)``
(a :class:`Fit`, what :func:`semlm.core.train.train` needs: data, config, loss) and
``evaluate(spec, data, model, result)`` (the trained model's metrics).

The runner (:func:`run_many`, :func:`run_one`) does the rest, the same way for everyone:

* **cache key**: a hash of the spec's config, the *training code closure* (every library function
  and class that ``prepare``, ``build``, ``fit`` and the trainer can reach, computed by
  :func:`semlm.core.closure.code_closure`, never listed by hand), the device type, the thread
  count, the versions of the packages its runs import (:attr:`Experiment.packages`) and Python's major.minor, and
  :func:`data_fingerprint` (the dataset files, by content, for an
  experiment whose training code reads the data folder); a run lives in
  ``<runs dir>/<experiment>/<group>/<name>-seed<seed>-<key>``, so unchanged code, config and data
  reload the finished run and any change trains a new one;
* **train or load**: :func:`semlm.core.train.train` trains (resuming an interrupted run from its
  checkpoint, refusing a folder made with another config); a finished run (``train/final``) is never
  trained again. Its :class:`RunRecord` is read back without touching the model unless the
  *evaluation closure* (what ``evaluate`` can reach) changed: then the weights are loaded and the
  run re-evaluated;
* **shared models**: an experiment may say that a run's model *is* another experiment's run
  (:meth:`Experiment.shared_run`: chapter 10's baseline and control-code models are chapter 4's).
  The runner trains or loads that run once, under its owner's key and folder, and evaluates it with
  this experiment's ``evaluate``; this experiment's record (its own folder) is keyed by the owner's
  key, so retraining the owner re-evaluates it;
* **threads and device**: every CPU run uses one thread (so its numbers do not depend on how many
  ran side by side); CUDA when there is one, unless the spec's experiment says otherwise;
* **worker pool**: ``workers`` forked one-thread processes (:func:`worker_pool`), one progress bar fed by a queue;
  :func:`run_jobs` takes the runs of several experiments in one pool (the book runner's training
  ahead of the chapters, :mod:`semlm.book.plan`);
* **one process per run**: a run trains or is evaluated under a file lock beside its folder
  (``<folder>.lock``), so two processes asking for the same run (a chapter and the book's training
  ahead, or two chapters) never train it twice: the second waits and loads what the first saved;
* **run record**: status (trained / resumed / loaded), seconds, steps, history, metrics, peak
  memory, device and threads, written atomically to ``record.json``; with ``SEMLM_RUN_LOG`` set
  (the book runner sets it per chapter) one line per run is appended there for the manifest.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import importlib
import json
import multiprocessing as mp
import os
import resource
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
from filelock import FileLock

from semlm.core.closure import code_closure, parts_hash
from semlm.core.versions import KEYED_PACKAGES, package_versions, python_minor
from semlm.core.records import Record
from semlm.core.train import TrainingHistory, TrainResult, fingerprint, progress_bar, set_seed, train
from semlm.data.fetch import read_checksums, sha256_of
from semlm.data.paths import REPO_ROOT, data_dir


def default_runs_dir(profile: str) -> Path:
    """``$SEMLM_RUNS_DIR/<profile>``, by default ``book/_build/runs/<profile>``."""
    return Path(os.environ.get("SEMLM_RUNS_DIR", REPO_ROOT / "book" / "_build" / "runs")) / profile


def default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _jsonable(value):
    if isinstance(value, Record):
        return value.to_dict()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        # execution-only fields (semlm.core.train_config.execution_fields: a CUDA micro-batch, compilation) make the
        # same run, so they stay out of its description and key
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)
                if not f.metadata.get("execution")}
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
    #: processes the run trains on, data-parallel (a distributed launch, :func:`run_one` with an accelerator). It
    #: changes the update's numerics, so it is in the key when above 1; a chapter loads such a run by naming it.
    world_size: int = 1

    def description(self) -> dict:
        world = {"world_size": self.world_size} if self.world_size != 1 else {}
        return {"name": self.name, "seed": self.seed, "group": self.group, "config": _jsonable(self.config), **world}


@dataclass
class Fit:
    """What :func:`semlm.core.train.train` needs for one run (its seed is the spec's, ``RunSpec.seed``)."""

    train_data: Any
    val_data: Any
    config: Any                                 # a semlm.core.train_config.TrainConfig
    loss_fn: Callable                           # (model, batch, step) -> (loss, parts), e.g. fusion.losses.FusionLoss
    validate: Callable | None = None            # (model, val_data, step) -> perplexity; None: metrics.perplexity
    snapshots: bool = False                     # keep the weights of every validation (RunRecord.load(step=...))


class Experiment:
    """What a run is. Subclasses set ``name`` and implement the four methods.

    The cache keys come from the code itself (:func:`training_key`, :func:`evaluation_key`): every
    method but ``evaluate`` is training code, ``evaluate`` (and what it calls) is evaluation code.

    Instances must be cheap to pickle (the worker processes receive them): keep only settings
    on ``self``; :meth:`data` caches prepared data per process and is not pickled.
    """

    name: str = "experiment"
    #: where its runs train: None (CUDA when there is one) or a device name ("cpu" when a chapter
    #: works on the trained models with CPU tensors)
    device: str | None = None

    #: the packages its runs import, whose versions are in their keys (:func:`semlm.core.versions.package_versions`):
    #: the defaults, plus e.g. peft and bitsandbytes for the LoRA runs, datasets where data comes from the Hub
    packages: tuple[str, ...] = KEYED_PACKAGES

    #: the typed metrics of one run (a :class:`semlm.core.records.Record`) that ``evaluate`` returns;
    #: :attr:`RunRecord.metrics` is one of these (None: a plain dict)
    metrics_type: type[Record] | None = None

    def max_workers(self, specs: Sequence[RunSpec]) -> int | None:
        """The most worker processes these runs may use (None: no cap beyond the context's)."""
        return None

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

    def hub_sources(self, spec: RunSpec) -> tuple[str, ...]:
        """The Hugging Face Hub repositories whose cached files ``spec``'s training reads (``"models/gpt2"``,
        ``"datasets/Salesforce/wikitext"``): their files, by content, are in its key (:func:`hub_fingerprint`)."""
        return ()

    def shared_run(self, spec: RunSpec) -> tuple["Experiment", RunSpec] | None:
        """The run of another experiment whose trained model ``spec``'s model is (None: trained by this one).

        Declare it when two chapters train the same model (the same data, architecture, recipe and
        seed): the runner trains it once, as the owner's run, and this experiment only evaluates it.
        """
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
    metrics: Any                  # the experiment's metrics_type, or a dict
    device: str
    threads: int
    peak_rss_mb: float
    stopped_early: bool = False
    best_step: int | None = None
    evaluation_key: str = ""
    #: ``module:attribute`` of the experiment that trained the model when it is shared
    #: (:meth:`Experiment.shared_run`; ``run_dir`` is then the owner's folder); "" when trained here
    trained_by: str = ""
    #: the :func:`data_fingerprint` the model was trained with ("" when its training reads no data file)
    data_fingerprint: str = ""
    #: processes it trained on and their torch.distributed backend ("" for one process)
    world_size: int = 1
    backend: str = ""
    spec: RunSpec | None = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        metrics_type = experiment_of(self.experiment).metrics_type if ":" in self.experiment else None
        if metrics_type is not None and not isinstance(self.metrics, metrics_type):
            self.metrics = metrics_type.from_dict(self.metrics)

    def to_dict(self) -> dict:
        return {f.name: _jsonable(getattr(self, f.name)) for f in dataclasses.fields(self) if f.name != "spec"}

    def load(self, device: str | torch.device | None = None, step: int | None = None) -> torch.nn.Module:
        """The trained model in eval mode (on ``device``; default: where it was trained if available);
        ``step``: its snapshot after that many optimiser steps (a run whose ``Fit`` kept snapshots)."""
        experiment = experiment_of(self.experiment)
        if self.spec is None:
            raise ValueError(f"record of {self.name} has no spec; get it from run_one / run_many")
        device = device or (self.device if self.device != "cuda" or torch.cuda.is_available() else "cpu")
        experiment, spec = experiment.shared_run(self.spec) or (experiment, self.spec)
        return load_model(experiment, spec, Path(self.run_dir), device, step)

    @property
    def snapshot_steps(self) -> list[int]:
        """The optimiser steps of the run's validations (its snapshots, if it kept them), ascending."""
        return [int(row["step"]) for row in self.history]


def load_model(experiment: Experiment, spec: RunSpec, folder: Path, device: str | torch.device,
               step: int | None = None) -> torch.nn.Module:
    """Rebuild the model of a finished run from its weights (``train/final``, or the snapshot of ``step``)."""
    from semlm.core.train import load_weights, snapshot_folder

    data = experiment.data(spec)
    set_seed(spec.seed)
    model = experiment.build(spec, data).to(device)
    weights = folder / "train" / "final" / "model.safetensors"
    if step is not None:
        weights = snapshot_folder(folder / "train", step) / "model.safetensors"
        if not weights.is_file():
            raise FileNotFoundError(f"{weights} is missing: run {spec.name} (seed {spec.seed}) kept no snapshot at "
                                    f"step {step}; its Fit needs snapshots=True and a validation at that step")
    if not weights.is_file():
        raise FileNotFoundError(f"{weights} is missing: the run did not finish; run the chapter again to train it")
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    load_weights(model, weights, trainable < sum(p.numel() for p in model.parameters()))
    return model.eval()


_LIBRARY = Path(__file__).resolve().parents[1]
_CLOSURES: dict[tuple, dict[str, str]] = {}  # per process: (what, class, library stamp) -> closure


def _memo(what: str, experiment: Experiment, roots: tuple, exclude: Sequence = ()) -> dict[str, str]:
    """:func:`code_closure` of ``roots``, computed once per process and experiment class (one takes a second
    or two) and again after a library file changes (a notebook that edits and reloads the library)."""
    files = list(_LIBRARY.rglob("*.py"))
    stamp = (len(files), max(path.stat().st_mtime_ns for path in files))
    memo = (what, type(experiment), stamp)
    if memo not in _CLOSURES:
        _CLOSURES[memo] = code_closure(*roots, exclude=exclude)
    return _CLOSURES[memo]


def evaluation_methods() -> list[Callable]:
    """The ``evaluate`` methods of the experiment classes (:class:`Experiment` and its subclasses: the
    experiment's own, and another's it reaches through :meth:`Experiment.shared_run`), which evaluation
    keys cover: the only methods a training key leaves out (an ``evaluate`` of any other class is code)."""
    classes, methods = [Experiment], []
    while classes:
        cls = classes.pop()
        classes += cls.__subclasses__()
        methods += [vars(cls)["evaluate"]] if "evaluate" in vars(cls) else []
    return methods


def training_closure(experiment: Experiment) -> dict[str, str]:
    """The code a trained model depends on: the experiment's class but its ``evaluate``, and the trainer."""
    return _memo("train", experiment, (type(experiment), train), evaluation_methods())


def training_key(experiment: Experiment) -> str:
    """Hash of :func:`training_closure`."""
    return parts_hash(training_closure(experiment))


def evaluation_key(experiment: Experiment) -> str:
    """Hash of the code the metrics of a trained model depend on: ``evaluate`` and what it reaches."""
    return parts_hash(_memo("evaluate", experiment, (type(experiment).evaluate,)))


_FILE_HASHES: dict[tuple, str] = {}  # per process: (path, inode, size, mtime, ctime) -> sha256


def data_fingerprint(experiment: Experiment) -> str:
    """What a run of ``experiment`` reads from the data folder, part of its key: a hash of every pinned dataset
    file (``semlm/data/checksums.sha256``) by content, "absent" for a missing one; "" when the training code
    cannot reach the data folder (``semlm.data.paths.data_dir``): its data is made by library code, which
    the training closure holds already.

    The files one run reads are known only once its data is prepared, which a cached run skips, so every
    pinned file counts (a few MB in all): replacing one dataset retrains every model trained on files.
    A file is hashed once per process, again when its size or modification time changes.
    """
    if "semlm.data.paths:data_dir" not in training_closure(experiment):
        return ""
    root, contents = data_dir(), {}
    for name in read_checksums():
        try:
            contents[name] = _file_hash(root / name)
        except FileNotFoundError:
            contents[name] = "absent"
    return fingerprint(contents)


def hub_cache() -> Path:
    """The Hugging Face Hub's file cache, read from the environment now (as ``huggingface_hub`` resolves it):
    ``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else ``~/.cache/huggingface/hub``."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or Path(os.environ.get("XDG_CACHE_HOME", "~/.cache")) / "huggingface"
    return Path(home).expanduser() / "hub"


def hub_fingerprint(sources: Sequence[str]) -> str:
    """What a run reads through the Hub cache, part of its key as :func:`data_fingerprint` is for pinned files: every
    file under each repository's cached snapshots (``<cache>/models--gpt2/snapshots/...``), by content, "absent"
    for a repository not cached; "" for none. Hashed once per process while a file's size and time are unchanged."""
    if not sources:
        return ""
    contents: dict[str, str] = {}
    for source in sources:
        kind, _, repository = source.partition("/")
        snapshots = hub_cache() / f"{kind}--{repository.replace('/', '--')}" / "snapshots"
        files = sorted(path for path in snapshots.rglob("*") if path.is_file()) if snapshots.is_dir() else []
        contents[source] = "absent" if not files else {str(path.relative_to(snapshots)): _file_hash(path)
                                                      for path in files}
    return fingerprint(contents)


def _file_hash(path: Path) -> str:
    stat = path.stat()  # follows the snapshot's link into the blobs
    seen = (str(path), stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)
    if seen not in _FILE_HASHES:
        _FILE_HASHES[seen] = sha256_of(path)
    return _FILE_HASHES[seen]


def finished_result(run_dir: Path) -> TrainResult:
    """The :class:`TrainResult` of a finished run, read from its ``final/history.json`` (status "loaded")."""
    saved = json.loads((Path(run_dir) / "final" / "history.json").read_text())
    return TrainResult(saved["history"], saved["train_seconds"], "loaded", Path(run_dir), saved.get("steps", 0),
                       saved.get("stopped_early", False), saved.get("best_step"))


def run_key(experiment: Experiment, spec: RunSpec, device: str, threads: int) -> str:
    """The cache key of ``spec``'s run: the run's description, the training code's closure, the device, the
    threads, the versions of :attr:`Experiment.packages` and Python's major.minor, :func:`data_fingerprint` and
    :func:`hub_fingerprint` of :meth:`Experiment.hub_sources`; a shared run (:meth:`Experiment.shared_run`)
    is keyed by its owner's key."""
    shared = experiment.shared_run(spec)
    if shared is not None:
        owner, owner_spec = shared
        return fingerprint(experiment.name, spec.description(), "shared", owner.name,
                           run_key(owner, owner_spec, device, threads))
    return fingerprint(experiment.name, spec.description(), training_key(experiment),
                       torch.device(device).type, threads, package_versions(experiment.packages), python_minor(),
                       data_fingerprint(experiment), hub_fingerprint(experiment.hub_sources(spec)))


def run_folder(experiment: Experiment, spec: RunSpec, runs_dir: Path, device: str, threads: int) -> Path:
    key = run_key(experiment, spec, device, threads)
    group = Path(experiment.name) / spec.group if spec.group else Path(experiment.name)
    return Path(runs_dir) / group / f"{spec.name}-seed{spec.seed}-{key}"


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file, so a reader never sees half of it."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")  # one per process: two writers never share it
    tmp.write_text(text)
    tmp.replace(path)


def _log_run(record: RunRecord, model: tuple | None = None) -> None:
    """One line for ``$SEMLM_RUN_LOG``; ``model`` (experiment, group, name, seed) names the trained model
    when it is another experiment's run (a shared run), else it is the record's own."""
    log, cpu = os.environ.get("SEMLM_RUN_LOG"), record.cpu_seconds
    if log:
        model = model or (record.experiment, record.group, record.name, record.seed)
        line = {name: getattr(record, name) for name in ("experiment", "name", "seed", "group", "status")}
        line.update(train_seconds=round(record.train_seconds, 2), cpu_seconds=None if cpu is None else round(cpu, 2),
                    device=record.device, model=list(model))
        with open(log, "a") as f:
            f.write(json.dumps(line) + "\n")


def run_one(experiment: Experiment, spec: RunSpec, runs_dir: str | Path, threads: int = 1,
            device: str | None = None, progress: bool | str = False, progress_queue=None,
            log: bool = True, accelerator=None) -> RunRecord:
    """Train (or load) the run of ``spec`` and evaluate it: the whole life of one run.

    ``log=False`` keeps the run out of ``SEMLM_RUN_LOG`` (the owner's run of a shared model: the
    chapter logs its own record of it). ``accelerator`` (an ``accelerate.Accelerator`` over several
    processes, every one of which calls this): the run trains data-parallel over them
    (:func:`distributed_run`).
    """
    if accelerator is not None and accelerator.num_processes > 1:
        return distributed_run(experiment, spec, runs_dir, accelerator, threads, log)
    device = device or default_device()
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        folder = run_folder(experiment, spec, Path(runs_dir), device, threads)
        with run_lock(folder):
            return _record_run(experiment, spec, folder, Path(runs_dir), threads, device, progress, progress_queue, log)
    finally:
        torch.set_num_threads(previous_threads)


def run_lock(folder: Path) -> FileLock:
    """The lock a process holds while it trains, evaluates or records the run in ``folder`` (or prepares
    shared data there): ``<folder>.lock``, released by the operating system if the process dies."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(str(folder) + ".lock")


def _saved_record(path: Path, data_used: str, spec: RunSpec) -> dict | None:
    """The record a finished run left in ``path`` (None: none yet); refuses one trained on other data than
    :func:`data_fingerprint` sees now (the key holds the fingerprint, so only a folder copied or renamed by
    hand gets here)."""
    if not path.is_file():
        return None
    saved = json.loads(path.read_text())
    if saved.get("data_fingerprint", "") != data_used:
        raise ValueError(f"run {spec.name} (seed {spec.seed}) in {path.parent} was trained on other data "
                         f"({saved.get('data_fingerprint') or 'none recorded'}) than the data folder holds now "
                         f"({data_used or 'none read'}); delete that folder or build with --fresh")
    return saved


def _record_run(experiment: Experiment, spec: RunSpec, folder: Path, runs_dir: Path, threads: int, device: str,
                progress: bool | str, progress_queue, log: bool) -> RunRecord:
    """:func:`run_one`'s work under the lock of the run's ``folder``: the saved record while the evaluation code
    is unchanged, else the model trained (or loaded: a finished run is never retrained) and evaluated. A shared
    run's model (:meth:`Experiment.shared_run`) is the owner's run, trained or loaded under the owner's key and
    folder (which records its own metrics), its status "trained" if trained now; its record stays in ``folder``."""
    shared = experiment.shared_run(spec)
    owner, owner_spec = shared or (experiment, spec)
    evaluation, data_used, record_path = evaluation_key(experiment), data_fingerprint(owner), folder / "record.json"
    saved = _saved_record(record_path, data_used, spec)
    model_id = (owner.reference(), owner_spec.group, owner_spec.name, owner_spec.seed) if shared else None
    if saved is not None and saved.get("evaluation_key") == evaluation:
        record = RunRecord(**{**saved, "status": "loaded", "spec": spec})
        if log:
            _log_run(record, model_id)
        return record
    model_folder, owner_record = folder, None
    if shared:
        owner_record = run_one(owner, owner_spec, runs_dir, threads, device, progress, progress_queue, log=False)
        model_folder = Path(owner_record.run_dir)
    if shared or (folder / "train" / "final" / "model.safetensors").is_file():
        model = load_model(owner, owner_spec, model_folder, device)
        result = finished_result(model_folder / "train")
    elif spec.world_size != 1:
        raise ValueError(f"run {spec.name} (seed {spec.seed}) names a world size of {spec.world_size}: it trains only "
                         f"under a launch of that many processes (python -m semlm.distributed), and {folder} holds no "
                         f"finished run; a chapter loads it once it has trained")
    else:
        on_step = (lambda: progress_queue.put(1)) if progress_queue is not None else None
        label = progress if isinstance(progress, str) else f"{spec.name} (seed {spec.seed})"
        model, result = _train(experiment, spec, folder, device, progress=label if progress and on_step is None
                               else False, on_step=on_step)
    model.eval()
    metrics = experiment.evaluate(spec, experiment.data(spec), model, result)
    made = owner_record or result  # how the model was made
    record = _new_record(experiment, spec, folder, model_folder, made,
                         "trained" if shared and made.status == "resumed" else made.status, metrics, device, threads,
                         evaluation, data_used, trained_by=owner.reference() if shared else "")
    on_disk = record.to_dict()
    if not shared and result.status == "loaded" and saved is not None:  # re-evaluated: keeps how it was trained
        on_disk["status"] = saved.get("status", result.status)
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(record_path, json.dumps(on_disk, indent=2, default=str))
    if log:
        _log_run(record, model_id)
    return record


def _train(experiment: Experiment, spec: RunSpec, folder: Path, device: str | None, **options):
    """``spec``'s model, built from the seed (on ``device``; None: where it is built) and trained into
    ``folder/train`` (:func:`semlm.core.train.train`, with ``options``), and the :class:`TrainResult`."""
    set_seed(spec.seed)
    model = experiment.build(spec, experiment.data(spec))
    model = model.to(device) if device is not None else model
    fit = experiment.fit(spec, experiment.data(spec))
    return model, train(model, fit.train_data, fit.val_data, fit.config, fit.loss_fn, seed=spec.seed,
                        validate=fit.validate, run_dir=folder / "train", run_description=spec.description(),
                        snapshots=fit.snapshots, **options)


def distributed_run(experiment: Experiment, spec: RunSpec, runs_dir: str | Path, accelerator, threads: int = 1,
                    log: bool = True) -> RunRecord:
    """:func:`run_one` on every process of a distributed launch (``accelerator``), with one key, one lock and one
    record: the main process takes the run's lock, looks in the cache and tells the others whether the run is there;
    if not, every process trains its share of each batch (:func:`semlm.core.train.train`), the main process alone
    writes the checkpoints, the weights and the record, and releases the lock once the record is written. Every
    process returns the record. ``spec.world_size`` must be the launch's; it is in the key."""
    from accelerate.utils import broadcast_object_list

    world = accelerator.num_processes
    if spec.world_size != world:
        raise ValueError(f"run {spec.name} (seed {spec.seed}) names a world size of {spec.world_size} but "
                         f"{world} processes were launched; give the spec world_size={world}")
    device = accelerator.device
    torch.set_num_threads(threads)
    folder = run_folder(experiment, spec, Path(runs_dir), str(device), threads)
    record_path, evaluation = folder / "record.json", evaluation_key(experiment)
    main = accelerator.is_main_process
    with run_lock(folder) if main else contextlib.nullcontext():
        state = [None]
        if main:
            try:
                saved = _saved_record(record_path, data_fingerprint(experiment), spec)
            except ValueError as error:  # told to every process, which all stop with it (none waits on the others)
                state = [f"error: {error}"]
            else:
                cached = saved is not None and saved.get("evaluation_key") == evaluation
                state = ["cached" if cached else "final" if (folder / "train" / "final" / "model.safetensors")
                         .is_file() else "train"]
        state = broadcast_object_list(state)[0]
        if state.startswith("error: "):
            raise ValueError(state.removeprefix("error: "))
        if state == "train":
            with accelerator.main_process_first():  # the main process writes data caches, then the others read
                experiment.data(spec)
            model, result = _train(experiment, spec, folder, None, accelerator=accelerator)  # same weights everywhere
            if main:
                _write_record(experiment, spec, folder, model.eval(), result, threads, str(device), world,
                              accelerator.state.backend or "")
        elif state == "final" and main:  # trained, not (or differently) evaluated: the main process evaluates
            model = load_model(experiment, spec, folder, device)  # prepares the data
            saved = json.loads(record_path.read_text()) if record_path.is_file() else {}
            _write_record(experiment, spec, folder, model, finished_result(folder / "train"), threads, str(device),
                          saved.get("world_size", world), saved.get("backend", accelerator.state.backend or ""),
                          status=saved.get("status", "trained"))
        accelerator.wait_for_everyone()  # the record is written before any process reads it or the lock goes
    saved = json.loads(record_path.read_text())
    record = RunRecord(**{**saved, "status": saved["status"] if state == "train" else "loaded", "spec": spec})
    if log and main:
        _log_run(record)
    return record


def _new_record(experiment: Experiment, spec: RunSpec, folder: Path, model_folder: Path, made, status: str,
                metrics, device: str, threads: int, evaluation: str, data_used: str, **extra) -> RunRecord:
    """The record of ``spec``'s run in ``folder`` (its model in ``model_folder``), made as ``made`` (a
    :class:`TrainResult` or the owner's :class:`RunRecord`) says; ``extra``: ``trained_by``, ``world_size``, ..."""
    return RunRecord(experiment.reference(), spec.name, spec.seed, spec.group, _jsonable(spec.config),
                     folder.name.rsplit("-", 1)[-1], str(model_folder), status, made.train_seconds, made.steps,
                     made.history, _jsonable(metrics), torch.device(device).type, threads, peak_rss_mb(),
                     made.stopped_early, made.best_step, evaluation, data_fingerprint=data_used, spec=spec, **extra)


def _write_record(experiment: Experiment, spec: RunSpec, folder: Path, model, result: TrainResult, threads: int,
                  device: str, world_size: int, backend: str, status: str | None = None) -> None:
    """Evaluate a distributed run's model (on the main process) and write its record."""
    metrics = experiment.evaluate(spec, experiment.data(spec), model, result)
    record = _new_record(experiment, spec, folder, folder, result, status or result.status, metrics, device, threads,
                         evaluation_key(experiment), data_fingerprint(experiment), world_size=world_size,
                         backend=backend)
    write_atomic(folder / "record.json", json.dumps(record.to_dict(), indent=2, default=str))


@dataclass(frozen=True)
class RunContext:
    """Where and how a chapter's runs happen, whatever the experiment.

    ``profile`` names the default runs folder (:func:`default_runs_dir`); ``workers`` one-thread
    CPU processes train side by side (None: one per core; the experiment may allow fewer, see
    :meth:`Experiment.max_workers`); ``progress`` shows one bar for all of them.
    """

    profile: str
    runs_dir: str | Path | None = None
    workers: int | None = None
    progress: bool = True

    @property
    def folder(self) -> Path:
        return Path(self.runs_dir) if self.runs_dir is not None else default_runs_dir(self.profile)


#: The folder of a run where :func:`cached_evaluation` keeps what was computed from its model.
EVALUATIONS_DIR = "evaluations"


def cached_evaluation(record: RunRecord, function: Callable, settings: Any, compute: Callable[[], Any],
                      encode: Callable[[Any], Any] = lambda value: value,
                      decode: Callable[[Any], Any] = lambda data: data) -> Any:
    """``compute()``, an evaluation of ``record``'s trained model by ``function`` under ``settings``, computed once
    and kept with the run, so that every chapter and cell that asks for it again reads it.

    Kept in ``<run dir>/evaluations/<function>-<key>.json`` (``encode`` makes it JSON, ``decode`` reads it back); the
    key is the run's key, the library code ``function`` reaches (:func:`code_closure`, as for training) and
    ``repr(settings)``, so a changed model, scoring code or setting computes anew. Written through a temporary file:
    an interrupted evaluation leaves nothing behind, and a file that cannot be read is computed again."""
    code = parts_hash(_memo(f"evaluation {function.__module__}:{function.__qualname__}", None, (function,)))
    key = fingerprint(record.key, code, repr(settings))[:16]
    path = Path(record.run_dir) / EVALUATIONS_DIR / f"{function.__name__}-{key}.json"
    if path.is_file():
        try:
            return decode(json.loads(path.read_text()))
        except (ValueError, KeyError, TypeError):  # unreadable or from an older format: compute it again
            pass
    value = compute()
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(encode(value)))
    return value


def nested(records: Sequence[RunRecord], *fields: str) -> dict:
    """Records as nested dicts keyed by their ``fields`` in order, e.g. ``nested(records, "name", "seed")``
    gives ``{"plain": {0: record, 1: record}, "gated": {...}}``."""
    if not fields:
        raise ValueError("name at least one field: group, name or seed")
    out: dict = {}
    for record in records:
        level = out
        for name in fields[:-1]:
            level = level.setdefault(getattr(record, name), {})
        level[getattr(record, fields[-1])] = record
    return out


_POOL: dict = {}  # what a forked worker inherits from worker_pool: the jobs and the progress queue


def _inherit(jobs: list, updates) -> None:
    from semlm.core.processes import die_with_parent

    die_with_parent()  # a worker never outlives the process that forked it (a killed kernel or runner)
    _POOL.update(jobs=jobs, updates=updates)


def _pooled_run(i: int) -> RunRecord:
    experiment, spec, runs_dir, device = _POOL["jobs"][i]
    return run_one(experiment, spec, runs_dir, 1, device, False, _POOL["updates"])


@contextlib.contextmanager
def worker_pool(workers: int, jobs: Sequence[tuple[Experiment, RunSpec, str | Path, str]], updates=None):
    """The futures of ``jobs`` (experiment, spec, runs folder, device), each run by :func:`run_one` with one
    thread in a pool of ``workers`` processes forked from this one (as PyTorch's DataLoader workers are).

    The workers inherit the jobs, the experiments' prepared data and the imported libraries instead of
    unpickling, preparing and importing them again; with the garbage collector's objects frozen while they
    start, those pages stay shared, so a pool costs little more than what its runs allocate. ``updates``: a
    queue the workers' trainers put one item per step on.
    """
    gc.freeze()
    try:
        with ProcessPoolExecutor(workers, mp_context=mp.get_context("fork"), initializer=_inherit,
                                 initargs=(list(jobs), updates)) as pool:
            yield [pool.submit(_pooled_run, i) for i in range(len(jobs))]
    finally:
        gc.unfreeze()


def run_many(experiment: Experiment, specs: Sequence[RunSpec], context: RunContext,
             label: str | None = None) -> list[RunRecord]:
    """Every spec's run, trained or loaded, in the order of ``specs``: the one way a chapter runs models.

    On a CPU the runs go to ``context.workers`` forked one-thread processes (capped by
    :meth:`Experiment.max_workers`); on CUDA (see :attr:`Experiment.device`) one after another in
    this process.
    """
    runs_dir, progress = context.folder, context.progress
    device = experiment.device or default_device()
    workers = context.workers or os.cpu_count() or 1
    workers = min(workers, experiment.max_workers(specs) or workers)
    if not specs:
        return []
    keys = [(s.group, s.name, s.seed) for s in specs]
    if len(set(keys)) != len(keys):
        raise ValueError(f"runs must differ in group, name or seed; got duplicates in {keys}")
    workers = max(1, min(workers, len(specs)))
    if workers == 1 or torch.device(device).type == "cuda":
        return [run_one(experiment, s, runs_dir, 1, device,
                        progress=f"{label or experiment.name}: {s.name}" if progress else False) for s in specs]
    for spec in specs:  # prepare (and cache on disk) shared data once, before the workers read it
        experiment.data(spec)
    steps = [experiment.total_steps(s) for s in specs]
    updates = mp.get_context("fork").SimpleQueue()
    with worker_pool(workers, [(experiment, s, runs_dir, device) for s in specs], updates) as futures:
        total = sum(steps) if all(steps) else None
        with progress_bar(total or len(specs), label or f"{experiment.name}: {len(specs)} runs", progress) as bar:
            finished = 0
            while not all(f.done() for f in futures):
                if total and not updates.empty():
                    updates.get()
                    bar.update(1)
                    continue
                time.sleep(0.2)
                if not total:
                    now = sum(f.done() for f in futures)
                    bar.update(now - finished)
                    finished = now
        records = [f.result() for f in futures]
    for record, spec in zip(records, specs):
        record.spec = spec
    return records


def run_jobs(jobs: Sequence[tuple[Experiment, RunSpec]], runs_dir: str | Path, workers: int,
             label: str = "runs", progress: bool = True,
             on_done: Callable[[Experiment, RunSpec, RunRecord | BaseException], None] | None = None,
             ) -> list[RunRecord | BaseException]:
    """The runs of several experiments, ``(experiment, spec)``, in one :func:`worker_pool` of ``workers``
    one-thread CPU processes, started in the order given: the outcome of each, a :class:`RunRecord` or
    the exception its run raised (a failed run does not stop the others). ``on_done`` is called as
    each one finishes. A run another process is training is waited for and loaded (:func:`run_lock`).
    """
    if not jobs:
        return []
    outcomes: dict[int, RunRecord | BaseException] = {}
    pooled = [(experiment, spec, runs_dir, experiment.device or "cpu") for experiment, spec in jobs]
    with worker_pool(max(1, min(workers, len(jobs))), pooled) as submitted:
        futures = {future: i for i, future in enumerate(submitted)}
        with progress_bar(len(jobs), label, progress) as bar:
            for future in as_completed(futures):
                i = futures[future]
                try:
                    outcomes[i] = future.result()
                    outcomes[i].spec = jobs[i][1]
                except Exception as exc:  # noqa: BLE001  reported to the caller, the other runs go on
                    outcomes[i] = exc
                if on_done is not None:
                    on_done(*jobs[i], outcomes[i])
                bar.update(1)
    return [outcomes[i] for i in range(len(jobs))]
