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
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Sequence

import torch
from safetensors.torch import load_file

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


def prepare_data(corpus_config: SyntheticConfig, setting: str = "causal") -> SyntheticData:
    """Corpus, vocabulary (all grammar words), and tensors with features precomputed once."""
    check_setting(setting)
    corpus = make_corpus(corpus_config)
    vocab = Vocabulary.build(LEXICON)
    featurizer = SyntheticFeatures(vocab, published=setting == "published")
    return SyntheticData(
        vocab=vocab,
        corpus=corpus,
        featurizer=featurizer,
        train=encode_corpus(corpus.train, vocab, featurizer),
        val=encode_corpus(corpus.val, vocab, featurizer),
        held_out_ids=vocab.ids(corpus.split.held_out),
        adjective_classes=[torch.tensor(vocab.ids(POSITIVE_ADJECTIVES)), torch.tensor(vocab.ids(NEGATIVE_ADJECTIVES))],
    )


@dataclass(frozen=True)
class Variant:
    """A named model to train: its class, the fusion gate, and loss weights that differ from the profile."""

    kind: str
    gate: bool = True
    train_overrides: tuple[tuple[str, float], ...] = ()


#: The paper's two models and the ablations it does not run (the leakage audit trains them).
VARIANTS: dict[str, Variant] = {
    "baseline": Variant("baseline"),
    "fusion": Variant("fusion"),
    "fusion_no_gate": Variant("fusion", gate=False),  # h0 = e + u
    "fusion_no_aux": Variant("fusion", train_overrides=(("aux_weight", 0.0),)),
    "fusion_no_uniformizer": Variant("fusion", train_overrides=(("uniformizer_weight", 0.0),)),
}


def check_variant(name: str) -> Variant:
    try:
        return VARIANTS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; choose from: {', '.join(VARIANTS)}") from None


def model_config(profile: SyntheticProfile, kind: str, vocab_size: int, setting: str, gate: bool = True) -> LMConfig:
    backbone = BackboneConfig(vocab_size=vocab_size, causal=check_setting(setting) == "causal", **asdict(profile.backbone))
    return LMConfig(backbone=backbone, kind=kind, gate=gate)


#: Modules that cannot change a trained model (figures, reports, the book runner, references).
NOT_IN_TRAINING = frozenset({"plots.py", "report.py", "book.py", "bench.py", "reference.py"})


def source_hash() -> str:
    """Hash of the library source that training depends on: part of every run's cache key."""
    h = hashlib.sha256()
    for path in sorted(Path(__file__).parent.rglob("*.py")):
        if path.name in NOT_IN_TRAINING:
            continue
        h.update(path.relative_to(Path(__file__).parent).as_posix().encode())
        h.update(path.read_bytes())
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


def train_model(profile: SyntheticProfile, kind: str, setting: str, runs_dir: str | Path,
                threads: int = 1, progress_queue=None, progress: bool = True) -> ModelRun:
    """Train (or reload) one model and evaluate it on the validation split."""
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        variant = check_variant(kind)
        data = prepare_data(profile.corpus, setting)
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
        metrics = evaluate_language_model(model, data.val, data.vocab, data.held_out_ids)
        return ModelRun(kind, setting, profile.train.seed, config.to_dict(), result.history, metrics,
                        result.train_seconds, result.status, str(run_dir), peak_rss_mb())
    finally:
        torch.set_num_threads(previous_threads)


def run_models(profile: SyntheticProfile, setting: str, kinds: Sequence[str] = ("baseline", "fusion"),
               runs_dir: str | Path | None = None, workers: int | None = None, progress: bool = True) -> dict[str, ModelRun]:
    """Train every model named in ``kinds`` (see ``VARIANTS``), in parallel worker processes when ``workers > 1``."""
    check_setting(setting)
    for kind in kinds:
        check_variant(kind)
    runs_dir = Path(runs_dir) if runs_dir is not None else default_runs_dir(profile.name)
    workers = min(len(kinds), workers or os.cpu_count() or 1)
    if workers <= 1:
        return {k: train_model(profile, k, setting, runs_dir, progress=progress) for k in kinds}
    context = mp.get_context("spawn")
    with context.Manager() as manager, ProcessPoolExecutor(workers, mp_context=context) as pool:
        updates = manager.Queue()
        futures = {k: pool.submit(train_model, profile, k, setting, runs_dir, 1, updates) for k in kinds}
        steps = -(-profile.corpus.n_train // profile.train.batch_size) * profile.train.epochs * len(kinds)
        with progress_bar(steps, f"{' + '.join(kinds)} ({setting})", progress) as bar:
            while not all(f.done() for f in futures.values()):
                try:
                    updates.get(timeout=0.2)
                    bar.update(1)
                except queue.Empty:
                    pass
            bar.update(updates.qsize())
        return {k: f.result() for k, f in futures.items()}
