"""Train and evaluate baseline / fusion on the synthetic corpus, in either setting.

* ``causal`` (default): causal attention and causal features: a language model.
* ``published``: the authors' setting (no causal mask, sentence-level features). Its
  perplexities are not language-model perplexities; the book labels them as such.

Models train in separate worker processes with one thread each: on a 2-core machine
the baseline and the fusion model train side by side, and because every run uses the
same thread count the numbers do not depend on how many workers ran.

Finished runs are kept under ``runs_dir`` in a folder named by a hash of the full
configuration and of the library source, so re-running a chapter with unchanged code
reloads the (bit-identical) weights instead of training again, and any change retrains.
"""

from __future__ import annotations

import hashlib
import multiprocessing as mp
import os
import queue
import resource
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Sequence

import torch
from safetensors.torch import load_file

from .control_codes import CODE_TOKENS, with_codes
from .data.dataset import LMTensors, encode_corpus
from .data.paths import REPO_ROOT
from .data.synthetic import LEXICON, NEGATIVE_ADJECTIVES, POSITIVE_ADJECTIVES, SyntheticConfig, SyntheticCorpus, make_corpus
from .data.vocab import Vocabulary
from .features import SyntheticFeatures
from .metrics import evaluate_language_model
from .models import BackboneConfig, LMConfig, build_model
from .profiles import SyntheticProfile
from .train import TrainResult, fingerprint, progress_bar, set_seed, train

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

    ``codes=True`` prepends each sentence's CTRL-style control codes (``semlm.control_codes``)
    and adds them to the vocabulary.
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
        train=encode_corpus(prepare(corpus.train), vocab, featurizer),
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


def model_config(profile: SyntheticProfile, kind: str, vocab_size: int, setting: str, gate: bool = True) -> LMConfig:
    backbone = BackboneConfig(vocab_size=vocab_size, causal=check_setting(setting) == "causal", **asdict(profile.backbone))
    return LMConfig(backbone=backbone, kind=kind, gate=gate)


#: The modules a synthetic-task run depends on; their source is part of every run's cache key
#: (other chapters' modules, figures, reports and the book runner cannot change these models;
#: nor can ``metrics``: a cached model is re-evaluated with the current metrics after loading).
TRAINING_SOURCES = (
    "fuzzy.py", "features.py", "losses.py", "train.py", "experiment.py", "profiles.py",
    "control_codes.py", "data/synthetic.py", "data/vocab.py", "data/dataset.py",
    "models/__init__.py", "models/backbone.py", "models/fusion.py",
)


def source_hash() -> str:
    """Hash of the library source that training depends on: part of every run's cache key."""
    h = hashlib.sha256()
    root = Path(__file__).parent
    for name in TRAINING_SOURCES:
        h.update(name.encode())
        h.update((root / name).read_bytes())
    return h.hexdigest()[:12]


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def default_runs_dir(profile: str) -> Path:
    return Path(os.environ.get("SEMLM_RUNS_DIR", REPO_ROOT / "book" / "_build" / "runs")) / profile


@dataclass
class ModelRun:
    """A trained model's history and validation metrics; ``load()`` rebuilds the model."""

    kind: str
    setting: str
    seed: int
    config: dict
    history: list[dict]
    metrics: dict
    train_seconds: float
    status: str
    run_dir: str
    peak_rss_mb: float = 0.0  # peak resident memory of the process that trained it

    @property
    def val_ppl_per_epoch(self) -> list[float]:
        return [row["val_ppl"] for row in self.history]

    def load(self) -> torch.nn.Module:
        model = build_model(LMConfig.from_dict(self.config))
        model.load_state_dict(load_file(Path(self.run_dir) / "final" / "model.safetensors"))
        return model.eval()


def runs_table(runs: dict[str, dict[str, "ModelRun"]]):
    """One row per run of ``{setting: {kind: ModelRun}}``: whether it was trained or loaded, and how long it trained."""
    import pandas as pd

    return pd.DataFrame([{"setting": s, "model": k, "status": r.status, "train seconds": round(r.train_seconds, 1)}
                         for s, by_kind in runs.items() for k, r in by_kind.items()])


def epoch_curves(runs: dict[str, dict[str, "ModelRun"]]) -> dict[tuple[str, str], list[float]]:
    """``{(setting, kind): validation PPL per epoch}``, the input of ``plots.plot_validation_curves``."""
    return {(s, k): r.val_ppl_per_epoch for s, by_kind in runs.items() for k, r in by_kind.items()}


def train_model(profile: SyntheticProfile, kind: str, setting: str, runs_dir: str | Path,
                threads: int = 1, progress_queue=None, progress: bool = True) -> ModelRun:
    """Train (or reload) one model and evaluate it on the validation split."""
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        variant = check_variant(kind)
        data = prepare_data(profile.corpus, setting, codes=variant.codes)
        config = model_config(profile, variant.kind, len(data.vocab), setting, gate=variant.gate)
        train_config = replace(profile.train, **dict(variant.train_overrides))
        description = {"model": config.to_dict(), "corpus": asdict(profile.corpus), "source": source_hash(),
                       "threads": threads}
        key = fingerprint(description, asdict(train_config))
        run_dir = Path(runs_dir) / setting / f"{kind}-seed{profile.train.seed}-{key}"
        set_seed(profile.train.seed)
        model = build_model(config)
        on_step = (lambda: progress_queue.put(kind)) if progress_queue is not None else None
        result: TrainResult = train(model, data.train, data.val, train_config, data.adjective_classes,
                                    run_dir=run_dir, run_description=description,
                                    progress=f"{kind} ({setting})" if progress and on_step is None else False,
                                    on_step=on_step)
        metrics = evaluate_language_model(model, data.val, data.vocab, data.held_out_ids, never_scored=data.code_ids)
        return ModelRun(kind, setting, profile.train.seed, config.to_dict(), result.history, metrics,
                        result.train_seconds, result.status, str(run_dir), peak_rss_mb())
    finally:
        torch.set_num_threads(previous_threads)


def run_models(profile: SyntheticProfile, setting: str, kinds: Sequence[str] = ("baseline", "fusion"),
               runs_dir: str | Path | None = None, workers: int | None = None, progress: bool = True) -> dict[str, ModelRun]:
    """Train every model named in ``kinds`` (see ``VARIANTS``), in parallel worker processes when ``workers > 1``."""
    runs = run_grid([(profile, kind, setting) for kind in kinds], runs_dir, workers, progress,
                    label=f"{' + '.join(kinds)} ({setting})")
    return dict(zip(kinds, runs))


def run_grid(jobs: Sequence[tuple[SyntheticProfile, str, str]], runs_dir: str | Path | None = None,
             workers: int | None = None, progress: bool = True, label: str | None = None) -> list[ModelRun]:
    """Train (or reload) every ``(profile, kind, setting)`` job, e.g. several seeds of several
    models, on ``workers`` one-thread processes; results come back in the order of ``jobs``."""
    if not jobs:
        return []
    for profile, kind, setting in jobs:
        check_setting(setting)
        check_variant(kind)
    names = {profile.name for profile, _, _ in jobs}
    if len(names) != 1:
        raise ValueError(f"all jobs must share one profile, got {sorted(names)}")
    runs_dir = Path(runs_dir) if runs_dir is not None else default_runs_dir(names.pop())
    workers = min(len(jobs), workers or os.cpu_count() or 1)
    if workers <= 1:
        return [train_model(profile, kind, setting, runs_dir, progress=progress) for profile, kind, setting in jobs]
    context = mp.get_context("spawn")
    with context.Manager() as manager, ProcessPoolExecutor(workers, mp_context=context) as pool:
        updates = manager.Queue()
        futures = [pool.submit(train_model, profile, kind, setting, runs_dir, 1, updates)
                   for profile, kind, setting in jobs]
        steps = sum(-(-p.corpus.n_train // p.train.batch_size) * p.train.epochs for p, _, _ in jobs)
        with progress_bar(steps, label or f"{len(jobs)} models", progress) as bar:
            while not all(f.done() for f in futures):
                try:
                    updates.get(timeout=0.2)
                    bar.update(1)
                except queue.Empty:
                    pass
            bar.update(updates.qsize())
        return [f.result() for f in futures]
