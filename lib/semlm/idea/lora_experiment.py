"""Paper B's second setting: an idea head on a frozen (4-bit) backbone, LoRA-tuned on FineWeb-Edu.

Profiles (:func:`~semlm.idea.profiles.lora_profile`): ``paper`` is ``mistralai/Mistral-7B-v0.1`` in 4-bit NF4 with
the authors' Mistral recipe (it needs a CUDA GPU and the model, else :func:`resolve_backbone` raises one
:class:`BackboneUnavailable` line); ``cpu`` and ``smoke`` pre-train the book's own small ``MistralForCausalLM``
on WikiText-2 (:data:`BACKBONE_PRETRAINING`) and LoRA-tune it on the offline FineWeb-Edu sample, in NF4 and
in float32. :data:`LORA` is one LoRA run; the one trainer optimises and checkpoints only the adapters and the
idea head, never the backbone.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import re
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Sequence

import torch
import torch.nn.functional as F

from semlm.core import runs
from semlm.data.bpe import as_transformers, train_bpe, load_tokenizer
from semlm.data.fineweb import FineWebDocuments, load_fineweb
from semlm.data.paths import portable_path
from semlm.data.wikitext import downloads_allowed, load_corpus
from semlm.idea.data import TokenBlocks, encode_lines, take_chars
from semlm.idea.loss import training_gate
from semlm.idea.wikitext_experiment import training_seeds
from semlm.idea.targets import idea_bce_sparse, window_ids
from semlm.core.metrics import NO_TARGET, perplexity
from semlm.idea.lora_model import LoraIdeaConfig, LoraIdeaModel, check_quantization, load_backbone
from semlm.idea.model import quiet_transformers
from semlm.core.train_config import TrainConfig
from semlm.idea.profiles import IdeaSettings, LoraProfile, LoraSettings
from semlm.idea.records import BackboneRunMetrics, LoraRunMetrics
from semlm.core.runs import RunRecord, RunSpec
from semlm.core.train import set_seed, to_device

class BackboneUnavailable(RuntimeError):
    """The profile's backbone cannot be used here (no GPU, no network, not cached); one line says why."""


def lora_device() -> torch.device:
    """Where the LoRA runs train and the backbone is loaded: CUDA when there is one (``runs.default_device``)."""
    return torch.device(runs.default_device())


# --- the backbone -------------------------------------------------------------------------------


@dataclass
class BackboneCheckpoint:
    """A frozen backbone to wrap: where it and its tokeniser live (a folder, or a Hub name) and how it was made."""

    name: str                    # what the metrics call it
    path: str                    # from_pretrained() argument of the model and its tokeniser
    config: dict
    wikitext_val_ppl: float | None = None
    history: list[dict] = field(default_factory=list)
    train_seconds: float = 0.0
    status: str = "hub"
    n_parameters: int | None = None   # of the full-precision model, when known

    @property
    def tokenizer(self):
        return backbone_tokenizer(self.path)


def backbone_tokenizer(path: str):
    """The tokeniser saved next to a backbone folder, or a Hub model's (``AutoTokenizer``)."""
    if Path(path).is_dir():
        return load_tokenizer(path)
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


def backbone_runs(profile: LoraProfile) -> list[RunSpec]:
    """The book's small Mistral pre-training run of ``profile`` (none when the profile names a Hub model)."""
    if profile.book_backbone is None:
        return []
    return [RunSpec("backbone-wikitext-2", profile.seed, profile.book_backbone)]


def resolve_backbone(profile: LoraProfile, records: Sequence[RunRecord] = ()) -> BackboneCheckpoint:
    """The frozen backbone of ``profile``: the book's own small Mistral (``records``: the run of
    :func:`backbone_runs`, trained or reloaded by :func:`semlm.core.runs.run_many`) or the paper's."""
    if profile.backbone == "book":
        if profile.book_backbone is None:
            raise ValueError(f"profile {profile.name!r} has no book backbone; it uses {profile.backbone}")
        if len(records) != 1:
            raise ValueError(f"profile {profile.name!r} needs its backbone run: pass the records of "
                             "run_many(BACKBONE_PRETRAINING, backbone_runs(profile), ...)")
        return book_backbone(records[0])
    problems = []  # what stops the paper profile here
    if not torch.cuda.is_available():
        problems.append("no CUDA GPU (4-bit NF4 with double quantisation and bf16 compute needs one; "
                        f"torch {torch.__version__} sees none)")
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = isinstance(try_to_load_from_cache(profile.backbone, "config.json"), str)
    except Exception:  # an unusual hub install: treat as not cached
        cached = False
    hub_offline = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}
    if not cached and (hub_offline or not downloads_allowed()):
        problems.append(f"{profile.backbone} is not in the local Hugging Face cache and downloads are off "
                        "(run the book with --allow-downloads and SEMLM_ALLOW_DOWNLOADS=1)")
    if problems:
        raise BackboneUnavailable(f"profile {profile.name!r} needs {profile.backbone}: " + "; ".join(problems))
    return BackboneCheckpoint(profile.backbone, profile.backbone, {"name": profile.backbone})


@dataclass
class WikiTextBlocks:
    """The book backbone's data: its BPE tokeniser (trained on WikiText-2's training lines) and token blocks."""

    dataset: str
    tokenizer: object
    train: TokenBlocks
    validation: TokenBlocks


def backbone_loss(model, batch, step: int):
    """Next-token cross-entropy of a plain causal LM (the backbone's pre-training objective)."""
    logits = model(input_ids=batch.inputs).logits
    ce = F.cross_entropy(logits.float().flatten(0, 1), batch.targets.flatten(), ignore_index=NO_TARGET)
    return ce, {"token_ce": ce.detach()}


class BackbonePretraining(runs.Experiment):
    """The book's small ``MistralForCausalLM`` pre-trained on WikiText-2 (``spec.config``: a
    :class:`~semlm.idea.profiles.BookBackboneSpec`), also saved to ``<run>/hf`` to be loaded as a Hub model."""

    name = "lora_backbone"
    metrics_type = BackboneRunMetrics

    def prepare(self, spec: RunSpec) -> WikiTextBlocks:
        """WikiText-2 -> a byte-level BPE of ``vocab_size`` (deterministic) -> blocks of ``block_size``."""
        s, splits = spec.config, load_corpus("wikitext-2")
        tokenizer = as_transformers(train_bpe(splits.train[: s.bpe_lines], s.vocab_size))  # [:None]: every line
        blocks = []
        for lines, cap in ((splits.train, s.train_tokens), (splits.valid, s.eval_tokens)):
            lines = take_chars(lines, None if cap is None else 10 * cap + 10_000)
            ids = encode_lines(tokenizer, lines, dtype=torch.long)
            blocks.append(TokenBlocks.from_stream(ids, s.block_size, 1, cap))
        return WikiTextBlocks(splits.dataset, tokenizer, *blocks)

    def build(self, spec: RunSpec, data: WikiTextBlocks):
        from transformers import MistralConfig, MistralForCausalLM

        s, eos = spec.config, data.tokenizer.eos_token_id
        config = MistralConfig(vocab_size=s.vocab_size, hidden_size=s.hidden_size,
                               intermediate_size=s.intermediate_size, num_hidden_layers=s.num_layers,
                               num_attention_heads=s.num_heads, num_key_value_heads=s.num_kv_heads,
                               max_position_embeddings=max(512, s.block_size), sliding_window=None,
                               bos_token_id=eos, eos_token_id=eos, pad_token_id=eos, tie_word_embeddings=False)
        with quiet_transformers():
            return MistralForCausalLM(config)

    def fit(self, spec: RunSpec, data: WikiTextBlocks) -> runs.Fit:
        return runs.Fit(data.train, data.validation, spec.config.train, backbone_loss)

    def evaluate(self, spec: RunSpec, data: WikiTextBlocks, model, result) -> BackboneRunMetrics:
        """Validation perplexity; writes ``<run>/hf`` (``save_pretrained``: model and tokeniser) if missing."""
        folder = Path(result.run_dir).parent / "hf"
        if not (folder / "config.json").is_file():
            with quiet_transformers():
                model.save_pretrained(str(folder))
                data.tokenizer.save_pretrained(str(folder))
        return BackboneRunMetrics(wikitext_val_ppl=perplexity(model, data.validation),
                                  n_parameters=model.num_parameters(), mistral_config=model.config.to_dict(),
                                  dataset=data.dataset)


BACKBONE_PRETRAINING = BackbonePretraining()


def book_backbone(record: RunRecord) -> BackboneCheckpoint:
    """The book's small Mistral of a finished :data:`BACKBONE_PRETRAINING` run (``save_pretrained`` in ``<run>/hf``)."""
    hf = str(Path(record.run_dir) / "hf")
    m = record.metrics
    return BackboneCheckpoint("book-mistral (trained on WikiText-2 by this book)", hf, m.mistral_config,
                              m.wikitext_val_ppl, record.history, record.train_seconds, record.status, m.n_parameters)


# --- FineWeb-Edu blocks -------------------------------------------------------------------------


@dataclass
class LoraData:
    documents: FineWebDocuments
    train: TokenBlocks
    validation: TokenBlocks

    @property
    def summary(self) -> dict:
        d = self.documents
        return {"dataset": d.dataset, "source": portable_path(d.source), "documents": d.n_documents,
                "train_documents": len(d.train), "validation_documents": len(d.validation),
                "characters": d.n_characters, "train_tokens": self.train.n_tokens,
                "validation_tokens": self.validation.n_tokens}


def prepare_fineweb(profile, tokenizer) -> LoraData:
    """FineWeb-Edu documents -> token streams (``eos`` between documents) -> blocks with idea windows
    (``profile``: a :class:`LoraProfile` or :class:`LoraRun`)."""
    documents = load_fineweb(profile.fineweb_source, profile.validation_fraction, seed=0,
                             max_documents=profile.max_documents)
    blocks = [TokenBlocks.from_stream(encode_lines(tokenizer, texts, separator=True, dtype=torch.long),
                                      profile.block_size, profile.idea.window, cap)
              for texts, cap in ((documents.train, profile.train_tokens), (documents.validation, profile.eval_tokens))]
    return LoraData(documents, *blocks)


# --- LoRA training ------------------------------------------------------------------------------


def lora_loss(model: LoraIdeaModel, batch, settings: IdeaSettings, alpha: float) -> tuple[torch.Tensor, dict]:
    """Token CE on the gated logits + lambda * mean idea BCE (the authors' LoRA objective; no stopword mask)."""
    out = model(batch.inputs, alpha=alpha)
    ce = F.cross_entropy(out.logits.float().flatten(0, 1), batch.targets.flatten(), ignore_index=NO_TARGET)
    if out.idea_logits is None:
        return ce, {"token_ce": ce.detach()}
    positives = window_ids(batch.future, settings.window, batch.inputs.shape[1])
    bce = idea_bce_sparse(out.idea_logits, positives, batch.targets != NO_TARGET, settings.pos_weight,
                          settings.idea_loss_reduction)
    return ce + settings.idea_weight * bce, {"token_ce": ce.detach(), "idea_bce": bce.detach()}


@dataclass(frozen=True)
class LoraRun:
    """What one LoRA run is: recipe, idea settings, adapters, data, frozen backbone and precision; ``gated`` (else
    the LoRA baseline, or with ``output_adapter`` its capacity control)."""

    train: TrainConfig
    idea: IdeaSettings
    lora: LoraSettings
    backbone: str                   # from_pretrained() path or Hub name (a book backbone's folder names its run key)
    quantization: str
    gated: bool
    block_size: int = 512
    train_tokens: int | None = None
    eval_tokens: int | None = None
    fineweb_source: str = "offline"
    max_documents: int | None = None
    validation_fraction: float = 0.1
    profile: str = ""               # the profile's name (its worker policy, see LoraExperiment.max_workers)
    output_adapter: bool = False    # the capacity control: the baseline + an idea-head-sized output adapter

    @property
    def name(self) -> str:
        kind = "gated" if self.gated else "control" if self.output_adapter else "baseline"
        return f"{kind}-{self.quantization}"

    def alpha_at(self, step: int) -> float:
        """The gate strength after ``step`` optimiser steps (0 for the baseline)."""
        return training_gate(self.idea).at_step(step).alpha if self.gated else 0.0

    def loss(self, model: LoraIdeaModel, batch, step: int) -> tuple[torch.Tensor, dict]:
        """The trainer's ``loss_fn``: :func:`lora_loss` at the gate strength of ``step``."""
        return lora_loss(model, batch, self.idea, self.alpha_at(step))

    def validate(self, model: LoraIdeaModel, blocks: TokenBlocks, step: int) -> float:
        """The trainer's ``validate``: perplexity at the gate strength of ``step``."""
        return perplexity(model, blocks, alpha=self.alpha_at(step), batch_size=32)

    def train_config(self) -> TrainConfig:
        """The recipe as :func:`semlm.core.train.train` runs it: early stopping counts only validations after
        the gate's ramp (a ramping gate changes the model); without a gate nothing ramps."""
        return replace(self.train, patience_from_step=self.idea.alpha_ramp_steps if self.gated else 0)


def lora_run(profile: LoraProfile, backbone: BackboneCheckpoint, quantization: str, idea: bool,
             control: bool = False) -> RunSpec:
    """The run of the LoRA baseline (``idea=False``), LoRA + idea gate, or (``control=True``) the capacity
    control on ``backbone`` in ``quantization``, with the profile's seed and its fields of :class:`LoraRun`."""
    if idea and control:
        raise ValueError("a LoRA run is the gated model (idea=True) or its capacity control (control=True), not both")
    shared = {f.name: getattr(profile, f.name) for f in fields(LoraRun) if hasattr(profile, f.name)}
    run = LoraRun(**{**shared, "backbone": backbone.path, "quantization": check_quantization(quantization),
                     "gated": bool(idea), "profile": profile.name, "output_adapter": bool(control)})
    return RunSpec(run.name, profile.seed, run)


def build_lora_model(run: LoraRun) -> LoraIdeaModel:
    """The frozen backbone of ``run`` (default device, its precision) with LoRA and, if ``run.gated``, the idea head."""
    idea = run.idea
    config = LoraIdeaConfig(idea_head=run.gated, gate_variant=idea.gate_variant, alpha=idea.alpha if run.gated else 0.0,
                            beta=idea.beta, eps=idea.eps, n_positions=run.block_size,
                            quantization=check_quantization(run.quantization), lora=run.lora,
                            output_adapter=run.output_adapter)
    with quiet_transformers():
        return LoraIdeaModel(load_backbone(run.backbone, run.quantization, lora_device()), config)


class LoraExperiment(runs.Experiment):
    """One LoRA run (``spec.config``: a :class:`LoraRun`) on FineWeb-Edu: only the adapters and the idea head train
    (in this process at ``smoke`` scale, where starting processes costs more than the runs)."""

    name = "lora"
    metrics_type = LoraRunMetrics
    packages = (*runs.KEYED_PACKAGES, "peft", "bitsandbytes", "accelerate", "datasets")

    def hub_sources(self, spec: RunSpec) -> tuple[str, ...]:
        """The backbone's files when it comes from the Hub cache (a book backbone is a run folder, already keyed)."""
        backbone = spec.config.backbone
        return () if Path(backbone).exists() else (f"models/{backbone}",)

    def max_workers(self, specs: Sequence[RunSpec]) -> int | None:
        return 1 if any(s.config.profile == "smoke" for s in specs) else None

    def data_key(self, spec: RunSpec):
        """Every run of the same data settings shares the data, whatever its recipe, precision and head."""
        return replace(spec.config, train=None, quantization="none", gated=False, output_adapter=False)

    def prepare(self, spec: RunSpec) -> LoraData:
        return prepare_fineweb(spec.config, backbone_tokenizer(spec.config.backbone))

    def build(self, spec: RunSpec, data: LoraData) -> LoraIdeaModel:
        return build_lora_model(spec.config)

    def fit(self, spec: RunSpec, data: LoraData) -> runs.Fit:
        run, t = spec.config, spec.config.train
        if t.sampling == "in_order" and len(data.train) < t.max_steps * t.batch_size:
            raise ValueError(f"reading each window once (sampling='in_order') needs {t.max_steps * t.batch_size:,} "
                             f"training windows of {run.block_size} tokens but the documents give {len(data.train):,}; "
                             "raise max_documents or lower max_steps")
        return runs.Fit(data.train, data.validation, run.train_config(),
                        loss_fn=run.loss, validate=run.validate)

    def evaluate(self, spec: RunSpec, data: LoraData, model, result) -> LoraRunMetrics:
        """Validation perplexity (gate on and off) and the trainable and frozen parameter counts."""
        counts, val = model.trainable_parameter_counts(), data.validation
        return LoraRunMetrics(val_ppl=perplexity(model, val, batch_size=32),
                              val_ppl_ungated=perplexity(model, val, alpha=0.0, batch_size=32)
                              if spec.config.gated else None,
                              trainable=counts, trainable_params=sum(counts.values()),
                              frozen_params=model.frozen_parameter_count(),
                              weights_mb=round(model.backbone.get_memory_footprint() / 2**20, 3))

    def total_steps(self, spec: RunSpec) -> int:
        return spec.config.train.max_steps


LORA = LoraExperiment()


def lora_runs(profile: LoraProfile, backbone: BackboneCheckpoint) -> list[RunSpec]:
    """Chapter 8's runs: the LoRA baseline and LoRA + idea gate on ``backbone``, per quantisation of the profile."""
    return [lora_run(profile, backbone, q, idea) for q in profile.quantizations for idea in (False, True)]


def capacity_control_runs(profile: LoraProfile, backbone: BackboneCheckpoint,
                          n_seeds: int | None = None) -> list[RunSpec]:
    """The runs the capacity-control comparison adds to :func:`lora_runs`: in the main quantisation, the control at
    the profile's seed, and baseline, gated model and control at every further seed (same backbone, same data)."""
    q = profile.quantizations[0]
    specs = [lora_run(profile, backbone, q, False, control=True)]
    for seed in training_seeds(profile, n_seeds)[1:]:
        seeded = replace(profile, seed=seed)
        specs += [lora_run(seeded, backbone, q, False), lora_run(seeded, backbone, q, True),
                  lora_run(seeded, backbone, q, False, control=True)]
    return specs


# --- memory: 4-bit vs full precision -----------------------------------------------------------


def _rss_mb(field_name: str) -> float:
    match = re.search(rf"^{field_name}:\s*(\d+)", Path("/proc/self/status").read_text(), re.MULTILINE)
    return int(match[1]) / 1024 if match else float("nan")


def _probe(profile: LoraProfile, backbone: BackboneCheckpoint, data: LoraData, quantization: str, idea: bool) -> dict:
    """Peak memory of loading the backbone and ``memory_probe_steps`` training steps (in this process)."""
    t, settings, device = profile.train, profile.idea, lora_device()
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    else:
        torch.set_num_threads(1)
        Path("/proc/self/clear_refs").write_text("5")  # reset the peak-RSS mark (VmHWM) to the current RSS
    before = torch.cuda.memory_allocated() / 2**20 if cuda else _rss_mb("VmRSS")
    set_seed(profile.seed)
    model = build_lora_model(lora_run(profile, backbone, quantization, idea).config)
    optimizer = torch.optim.AdamW(list(model.trainable_parameters().values()), lr=t.lr)
    model.train()
    micro_batch = t.batch_size // t.accumulation  # what one forward/backward holds in memory
    batch = to_device(data.train.batch(torch.arange(min(micro_batch, len(data.train)))), device)
    start = time.perf_counter()
    for _ in range(profile.memory_probe_steps):
        loss, _ = lora_loss(model, batch, settings, settings.alpha if idea else 0.0)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    seconds = (time.perf_counter() - start) / profile.memory_probe_steps
    peak = (torch.cuda.max_memory_allocated() / 2**20 if cuda else _rss_mb("VmHWM")) - before
    method = ("torch.cuda.max_memory_allocated" if cuda
              else "peak RSS (VmHWM) above the process's RSS before loading, one fresh forked process each")
    return {"peak_memory_mb": round(peak, 2), "weights_mb": round(model.backbone.get_memory_footprint() / 2**20, 3),
            "seconds_per_step": seconds, "method": method}


def measure_memory(profile: LoraProfile, backbone: BackboneCheckpoint, data: LoraData, quantization: str,
                   idea: bool = True) -> dict:
    """Peak memory of a few training steps in ``quantization``: on CUDA ``max_memory_allocated``, on a CPU the
    peak RSS of a forked child above its RSS at the start (earlier allocations do not count)."""
    args = (profile, backbone, data, check_quantization(quantization), idea)
    if lora_device().type == "cuda":
        return _probe(*args)
    try:
        with ProcessPoolExecutor(1, mp_context=mp.get_context("fork")) as child:
            return child.submit(_probe, *args).result(timeout=600)
    except Exception as error:
        raise RuntimeError(f"memory probe ({quantization}) failed: {type(error).__name__}: {error}") from error


def nf4_cpu_kernel() -> str:
    """How bitsandbytes computes NF4 layers on this CPU as ``load_backbone`` sets them up."""
    try:
        from bitsandbytes.functional import has_avx512bf16
    except Exception:  # another bitsandbytes layout
        return "unknown"
    if not has_avx512bf16():
        return "dequantise to float32, then a float32 matmul (no AVX512-BF16 on this CPU)"
    return ("dequantise to float32, then a float32 matmul, in training and evaluation; the fused AVX512-BF16 "
            "inference kernel this CPU supports is switched off because it has no backward")


def paper_scale_parameter_counts(lora: LoraSettings | None = None) -> dict:
    """Trainable and frozen parameters of the wrappers around Mistral-7B-v0.1's shape (``MistralConfig()``'s
    defaults), built on the ``meta`` device: no weights, no memory, no download."""
    from transformers import AutoModelForCausalLM, MistralConfig

    counts = {}
    with torch.device("meta"), quiet_transformers():
        for name, idea, control in (("baseline", False, False), ("gated", True, False), ("control", False, True)):
            model = LoraIdeaModel(AutoModelForCausalLM.from_config(MistralConfig()),
                                  LoraIdeaConfig(idea_head=idea, lora=lora or LoraSettings(), output_adapter=control))
            counts[name] = {**model.trainable_parameter_counts(), "frozen": model.frozen_parameter_count()}
    return counts
