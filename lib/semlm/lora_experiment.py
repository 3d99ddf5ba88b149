"""Paper B's second setting: an idea head on a frozen (4-bit) backbone, LoRA-tuned on FineWeb-Edu.

Profiles (``lora_profile(name)``):

* ``smoke``: seconds. The book trains a one-layer ``MistralForCausalLM`` (d = 64) on a sliver of
  WikiText-2, saves it with ``save_pretrained`` and loads it back (4-bit and full precision) as the
  frozen backbone; a dozen LoRA steps on FineWeb-Edu.
* ``cpu``: the book's default. A two-layer ``MistralForCausalLM`` (d = 128, grouped-query
  attention, 2,048-token byte-level BPE) trained by the book on WikiText-2, then LoRA-tuned on the
  offline FineWeb-Edu sample, both as baseline (LoRA only) and with the idea head, in 4-bit NF4
  (the paper's setting) and in float32 (for comparison).
* ``paper``: ``mistralai/Mistral-7B-v0.1`` in 4-bit NF4 with double quantisation and bf16 compute,
  block 512, batch 4 x 8 accumulation, 5,000 steps at a constant 2e-4 (AdamW with PyTorch's default
  weight decay 0.01, clipping at 1.0), validation every 200, patience 10, each training window read
  once from a stream of fresh documents (the authors' Mistral ``train.py``, ``model.py`` and ``data.py``
  in github.com/DarshanFofadiya/idea-gated-transformers).
  It needs a CUDA GPU and the model (Hub download or local cache); without them
  :func:`resolve_backbone` raises one :class:`BackboneUnavailable` line saying what is missing.

Training is the authors' LoRA recipe (AdamW, constant lr 2e-4 at paper scale, alpha ramp to 0.5,
lambda 0.1 on the mean idea BCE, validation every N steps, early stopping, best weights kept); the
small profiles use warmup + cosine and reuse their few documents (``lr_schedule``, ``fresh_documents``).
It is a small loop here rather than :func:`semlm.train.train`, because that trainer validates
once per epoch, has no early stopping and checkpoints the whole ``state_dict`` (a 4-bit backbone
included) instead of the adapter; the backbone pre-training *does* use it. Device placement goes
through ``accelerate``. Finished runs are cached (adapter + idea head + history) under
``default_runs_dir(profile)/lora/`` in folders keyed by their full configuration.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import math
import multiprocessing as mp
import os
import shutil
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Sequence

import torch
import torch.nn.functional as F

from .data.bpe import bpe_tokenizer, lines_fingerprint, load_tokenizer
from .data.fineweb import FineWebDocuments, load_fineweb
from .data.wikitext import downloads_allowed, load_corpus
from .experiment import default_runs_dir
from .idea_experiment import GenerationSettings, IdeaSettings, TokenBlocks, alpha_at, quiet_transformers
from .idea_targets import PAD_ID, idea_bce_sparse, window_ids
from .models.lora_idea import LoraIdeaConfig, LoraIdeaModel, LoraSettings, check_quantization, load_backbone
from .profiles import check_profile
from .train import TrainConfig, fingerprint, set_seed, train
from .reference import PAPER_B_VAL_PPL

PAPER_BACKBONE = "mistralai/Mistral-7B-v0.1"
BOOK_BACKBONE = "book-mistral (trained on WikiText-2 by this book)"

#: Validation perplexity on FineWeb-Edu of the authors' Mistral-7B LoRA run (paper B, arXiv 2512.03343,
#: FineWeb-Edu setting). Never a result of this build.
PAPER_B_LORA_PPL = PAPER_B_VAL_PPL  # FineWeb-Edu, Mistral-7B + LoRA (semlm.reference)


class BackboneUnavailable(RuntimeError):
    """The profile's backbone cannot be used here (no GPU, no network, not cached); one line says why."""


# --- configuration ------------------------------------------------------------------------------


@dataclass(frozen=True)
class BookBackboneSpec:
    """The small ``MistralForCausalLM`` the book pre-trains on WikiText-2 (cpu / smoke backbones)."""

    vocab_size: int = 2048
    hidden_size: int = 128          # bitsandbytes' CPU kernels need multiples of 64 (the NF4 block size)
    intermediate_size: int = 384
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 2
    block_size: int = 64
    bpe_lines: int | None = None
    train_tokens: int | None = 300_000
    eval_tokens: int | None = 30_000
    train: TrainConfig = TrainConfig(epochs=2, batch_size=32, lr=2e-3, weight_decay=0.1, warmup_fraction=0.05,
                                     label_smoothing=0.0, aux_weight=0.0, uniformizer_weight=0.0)

    def mistral_config(self, eos_id: int):
        from transformers import MistralConfig

        return MistralConfig(vocab_size=self.vocab_size, hidden_size=self.hidden_size,
                             intermediate_size=self.intermediate_size, num_hidden_layers=self.num_layers,
                             num_attention_heads=self.num_heads, num_key_value_heads=self.num_kv_heads,
                             max_position_embeddings=max(512, self.block_size), sliding_window=None,
                             bos_token_id=eos_id, eos_token_id=eos_id, pad_token_id=eos_id, tie_word_embeddings=False)


#: The idea head's loss and gate in the authors' LoRA run (their Mistral train.py / model.py): BCE averaged over the
#: vocabulary with lambda 0.1, no pos_weight and no stopword mask, gate max(alpha log p, beta),
#: alpha ramped to 0.5 over 1000 steps. The same settings class as chapters 6-7.
LORA_IDEA = IdeaSettings(window=20, stopword_list=(), stopwords_top_n=0, idea_weight=0.1, pos_weight=None, idea_loss_reduction="mean",
                         alpha=0.5, alpha_ramp_steps=1000, gate_variant="scale_then_clamp")


@dataclass(frozen=True)
class LoraTraining:
    """The authors' LoRA run (their Mistral ``train.py``), scaled per profile."""

    max_steps: int = 5000
    batch_size: int = 32            # sequences per optimiser step ...
    accumulation: int = 8           # ... in this many micro-batches (the authors: 4 x 8)
    block_size: int = 512
    lr: float = 2e-4
    lr_schedule: str = "constant"   # the authors: constant; "cosine": linear warmup then cosine to 0
    warmup_steps: int = 0
    weight_decay: float = 0.01      # torch.optim.AdamW's default (the authors pass only the learning rate)
    grad_clip: float = 1.0
    fresh_documents: bool = True    # every training window read once, in stream order (no repeats)
    eval_every: int = 200
    patience: int = 10              # evaluations without improvement before stopping
    idea: IdeaSettings = LORA_IDEA
    train_tokens: int | None = None
    eval_tokens: int | None = None

    def __post_init__(self):
        if min(self.max_steps, self.batch_size, self.block_size, self.eval_every, self.patience,
               self.accumulation) < 1 or self.lr <= 0 or self.batch_size % self.accumulation:
            raise ValueError(f"LoRA training needs positive steps, sizes, eval_every, patience and lr; got {self}")
        if self.lr_schedule not in ("constant", "cosine"):
            raise ValueError(f"lr_schedule must be 'constant' or 'cosine', got {self.lr_schedule!r}")


@dataclass(frozen=True)
class LoraProfile:
    name: str
    backbone: str                               # PAPER_BACKBONE, or "book" for the book's own small Mistral
    book_backbone: BookBackboneSpec | None
    lora: LoraSettings
    training: LoraTraining
    quantizations: tuple[str, ...]              # trained in this order; the first is the main comparison
    fineweb_source: str = "offline"
    max_documents: int | None = None
    validation_fraction: float = 0.1
    generation: GenerationSettings = field(default_factory=GenerationSettings)
    memory_probe_steps: int = 3
    seed: int = 111
    capped_from: int | None = None              # max_steps before a ``max_steps`` cap (None = not capped)


def lora_profile(profile: str, seed: int = 111, max_steps: int | None = None) -> LoraProfile:
    """The profile's configuration; ``max_steps`` caps its optimiser steps (the alpha ramp keeps its share)."""
    return _cap_lora(_lora_profile(profile, seed), max_steps)


def _cap_lora(profile: LoraProfile, max_steps: int | None) -> LoraProfile:
    if max_steps is None:
        return profile
    if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
        raise ValueError(f"max_steps must be an int >= 1 or None, got {max_steps!r}")
    t = profile.training
    if max_steps >= t.max_steps:
        return profile
    share = max_steps / t.max_steps
    training = replace(t, max_steps=max_steps, warmup_steps=round(t.warmup_steps * share),
                       eval_every=max(1, min(t.eval_every, max_steps // 5 or 1)),
                       idea=replace(t.idea, alpha_ramp_steps=round(t.idea.alpha_ramp_steps * share)))
    return replace(profile, training=training, capped_from=t.max_steps)


def _lora_profile(profile: str, seed: int = 111) -> LoraProfile:
    check_profile(profile)
    paper = LoraProfile(
        name="paper", backbone=PAPER_BACKBONE, book_backbone=None, lora=LoraSettings(), training=LoraTraining(),
        # 5,000 x 32 windows of 512 tokens = 82 M training tokens, read once: about 90,000 documents
        quantizations=("nf4",), fineweb_source="stream", max_documents=100_000,
        generation=GenerationSettings(samples_per_prompt=5, max_new_tokens=100, seeds=(0, 1, 2)), seed=seed)
    if profile == "paper":
        return paper
    if profile == "cpu":
        return replace(
            paper, name="cpu", backbone="book", book_backbone=BookBackboneSpec(), fineweb_source="offline",
            max_documents=None,
            training=replace(paper.training, max_steps=240, batch_size=16, accumulation=1, block_size=64, lr=1e-3,
                             lr_schedule="cosine", warmup_steps=12, fresh_documents=False,
                             eval_every=20, patience=4, train_tokens=None, eval_tokens=16_384,
                             idea=replace(paper.training.idea, alpha_ramp_steps=60)),
            quantizations=("nf4", "none"),
            generation=GenerationSettings(samples_per_prompt=2, max_new_tokens=40, seeds=(0,)))
    return replace(
        paper, name="smoke", backbone="book",
        book_backbone=BookBackboneSpec(vocab_size=512, hidden_size=64, intermediate_size=128, num_layers=1,
                                       num_heads=2, num_kv_heads=1, block_size=32, bpe_lines=2000,
                                       train_tokens=8_000, eval_tokens=2_000,
                                       train=replace(BookBackboneSpec.train, epochs=1, batch_size=16, lr=3e-3)),
        fineweb_source="offline", max_documents=40,
        training=replace(paper.training, max_steps=8, batch_size=8, accumulation=1, block_size=32, lr=1e-3,
                         lr_schedule="cosine", warmup_steps=1, fresh_documents=False,
                         eval_every=4, patience=2, train_tokens=8_000, eval_tokens=1_024,
                         idea=replace(paper.training.idea, alpha_ramp_steps=4)),
        quantizations=("nf4", "none"),
        generation=GenerationSettings(samples_per_prompt=1, max_new_tokens=8, seeds=(0,)),
        memory_probe_steps=2)


def lora_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


# --- the backbone -------------------------------------------------------------------------------


@dataclass
class Backbone:
    """Where the frozen backbone and its tokeniser live (a folder, or a Hub name) and how it was made."""

    name: str                    # what the metrics call it
    path: str                    # from_pretrained() argument
    tokenizer_path: str
    config: dict
    wikitext_val_ppl: float | None = None
    history: list[dict] = field(default_factory=list)
    train_seconds: float = 0.0
    status: str = "hub"
    n_parameters: int | None = None   # of the full-precision model, when known

    @property
    def tokenizer(self):
        if self.status == "hub":
            from transformers import AutoTokenizer

            return AutoTokenizer.from_pretrained(self.tokenizer_path)
        return load_tokenizer(self.tokenizer_path)


def paper_backbone_problems(name: str = PAPER_BACKBONE) -> list[str]:
    """What stops the paper profile here: no CUDA GPU; the model neither cached nor downloadable."""
    problems = []
    if not torch.cuda.is_available():
        problems.append("no CUDA GPU (4-bit NF4 with double quantisation and bf16 compute needs one; "
                        f"torch {torch.__version__} sees none)")
    cached = False
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = isinstance(try_to_load_from_cache(name, "config.json"), str)
    except Exception:  # an unusual hub install: treat as not cached
        cached = False
    hub_offline = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}
    if not cached and (hub_offline or not downloads_allowed()):
        problems.append(f"{name} is not in the local Hugging Face cache and downloads are off "
                        "(run the book with --allow-downloads and SEMLM_ALLOW_DOWNLOADS=1)")
    return problems


def resolve_backbone(profile: LoraProfile, runs_dir: str | Path | None = None, progress: bool = False) -> Backbone:
    """The frozen backbone of ``profile``: the book's own small Mistral (trained once, cached) or the paper's."""
    if profile.backbone == "book":
        return train_book_backbone(profile, runs_dir, progress)
    problems = paper_backbone_problems(profile.backbone)
    if problems:
        raise BackboneUnavailable(f"profile {profile.name!r} needs {profile.backbone}: " + "; ".join(problems))
    return Backbone(profile.backbone, profile.backbone, profile.backbone, {"name": profile.backbone})


def _encode(tokenizer, texts: Sequence[str], separator: bool = False) -> torch.Tensor:
    encoded = tokenizer(list(texts), add_special_tokens=False)["input_ids"]
    eos = [tokenizer.eos_token_id] if separator and tokenizer.eos_token_id is not None else []
    return torch.tensor([i for row in encoded for i in row + eos], dtype=torch.long)


def _take_chars(lines: Sequence[str], chars: int | None) -> list[str]:
    if chars is None:
        return list(lines)
    out, total = [], 0
    for line in lines:
        if total >= chars:
            break
        out.append(line)
        total += len(line)
    return out


@torch.no_grad()
def plain_perplexity(model, blocks: TokenBlocks, batch_size: int = 64) -> float:
    """exp(mean next-token CE) of any causal LM's ``logits`` on ``blocks`` (pads ignored)."""
    was = model.training
    model.eval()
    total, count = 0.0, 0
    for batch in blocks.batches(batch_size):
        logits = model(input_ids=batch.inputs).logits.float()
        total += F.cross_entropy(logits.flatten(0, 1), batch.targets.flatten(), ignore_index=PAD_ID,
                                 reduction="sum").item()
        count += int((batch.targets != PAD_ID).sum())
    model.train(was)
    return math.exp(total / max(count, 1))


def _backbone_loss(model, batch, step=None):
    logits = model(input_ids=batch.inputs).logits
    ce = F.cross_entropy(logits.float().flatten(0, 1), batch.targets.flatten(), ignore_index=PAD_ID)
    return ce, {"token_ce": ce.item()}


def train_book_backbone(profile: LoraProfile, runs_dir: str | Path | None = None, progress: bool = False) -> Backbone:
    """Pre-train (or reload) the book's small Mistral on WikiText-2 with the shared trainer; ``save_pretrained`` it."""
    from transformers import MistralForCausalLM

    spec = profile.book_backbone
    if spec is None:
        raise ValueError(f"profile {profile.name!r} has no book backbone; it uses {profile.backbone}")
    runs_dir = Path(runs_dir) if runs_dir is not None else default_runs_dir(profile.name)
    splits = load_corpus("wikitext-2")
    bpe_lines = splits.train if spec.bpe_lines is None else splits.train[: spec.bpe_lines]
    key = fingerprint(asdict(spec), lines_fingerprint(bpe_lines), _source_hash(BookBackboneSpec, train_book_backbone,
                                                                               _backbone_loss, plain_perplexity))
    folder = runs_dir / "lora" / f"backbone-wikitext-2-seed{profile.seed}-{key}"
    tokenizer = bpe_tokenizer(bpe_lines, spec.vocab_size, folder / "tokenizer")
    cap = None if spec.train_tokens is None else 10 * spec.train_tokens + 10_000
    train_ids = _encode(tokenizer, _take_chars(splits.train, cap))
    cap = None if spec.eval_tokens is None else 10 * spec.eval_tokens + 10_000
    val_ids = _encode(tokenizer, _take_chars(splits.valid, cap))
    train_blocks = TokenBlocks.from_stream(train_ids, spec.block_size, 1, spec.train_tokens)
    val_blocks = TokenBlocks.from_stream(val_ids, spec.block_size, 1, spec.eval_tokens)
    set_seed(profile.seed)
    config = spec.mistral_config(tokenizer.eos_token_id)
    with quiet_transformers():
        model = MistralForCausalLM(config)
    description = {"spec": asdict(spec), "dataset": splits.dataset}
    result = train(model, train_blocks, val_blocks, replace(spec.train, seed=profile.seed), run_dir=folder / "run",
                   run_description=description, progress="backbone" if progress else False,
                   loss_fn=_backbone_loss, validate=lambda m, v, step: plain_perplexity(m, v))
    hf = folder / "hf"
    if not (hf / "config.json").is_file():
        with quiet_transformers():
            model.save_pretrained(str(hf))
            tokenizer.save_pretrained(str(hf))
    return Backbone(BOOK_BACKBONE, str(hf), str(hf), config.to_dict(), plain_perplexity(model, val_blocks),
                    result.history, result.train_seconds, result.status, model.num_parameters())


# --- FineWeb-Edu blocks -------------------------------------------------------------------------


@dataclass
class LoraData:
    documents: FineWebDocuments
    train: TokenBlocks
    validation: TokenBlocks

    @property
    def summary(self) -> dict:
        d = self.documents
        return {"dataset": d.dataset, "source": d.source, "documents": d.n_documents,
                "train_documents": len(d.train), "validation_documents": len(d.validation),
                "characters": d.n_characters, "train_tokens": self.train.n_tokens,
                "validation_tokens": self.validation.n_tokens}


def prepare_fineweb(profile: LoraProfile, tokenizer) -> LoraData:
    """FineWeb-Edu documents -> token streams (``eos`` between documents) -> blocks with idea windows."""
    t = profile.training
    documents = load_fineweb(profile.fineweb_source, profile.validation_fraction, seed=0,
                             max_documents=profile.max_documents)
    train_ids = _encode(tokenizer, documents.train, separator=True)
    val_ids = _encode(tokenizer, documents.validation, separator=True)
    return LoraData(documents,
                    TokenBlocks.from_stream(train_ids, t.block_size, t.idea.window, t.train_tokens),
                    TokenBlocks.from_stream(val_ids, t.block_size, t.idea.window, t.eval_tokens))


# --- LoRA training ------------------------------------------------------------------------------


@torch.no_grad()
def lora_perplexity(model: LoraIdeaModel, blocks: TokenBlocks, alpha: float | None = None, batch_size: int = 32) -> float:
    """exp(mean next-token CE) of the (gated, unless ``alpha=0``) logits over all scored positions."""
    was = model.training
    model.eval()
    total, count = 0.0, 0
    for batch in blocks.batches(batch_size):
        batch = _to(batch, model.device)
        logits = model(batch.inputs, alpha=alpha).logits.float()
        total += F.cross_entropy(logits.flatten(0, 1), batch.targets.flatten(), ignore_index=PAD_ID,
                                 reduction="sum").item()
        count += int((batch.targets != PAD_ID).sum())
    model.train(was)
    return math.exp(total / max(count, 1))


def _micro_batches(batch, parts: int) -> list:
    """``batch`` split into ``parts`` consecutive micro-batches (fewer if it has fewer rows)."""
    if parts <= 1:
        return [batch]
    chunks = [torch.tensor_split(x, min(parts, x.shape[0])) for x in (batch.inputs, batch.targets, batch.future)]
    return [type(batch)(*rows) for rows in zip(*chunks)]


def _to(batch, device):
    return type(batch)(batch.inputs.to(device), batch.targets.to(device), batch.future.to(device))


def lora_loss(model: LoraIdeaModel, batch, settings: IdeaSettings, alpha: float) -> tuple[torch.Tensor, dict]:
    """Token CE on the gated logits + lambda * mean idea BCE (the authors' LoRA objective; no stopword mask)."""
    out = model(batch.inputs, alpha=alpha)
    ce = F.cross_entropy(out.logits.float().flatten(0, 1), batch.targets.flatten(), ignore_index=PAD_ID)
    if out.idea_logits is None:
        return ce, {"token_ce": ce.item()}
    positives = window_ids(batch.future, settings.window, batch.inputs.shape[1])
    bce = idea_bce_sparse(out.idea_logits, positives, batch.targets != PAD_ID, settings.pos_weight, settings.idea_loss_reduction)
    return ce + settings.idea_weight * bce, {"token_ce": ce.item(), "idea_bce": bce.item()}


def _source_hash(*objects) -> str:
    h = hashlib.sha256()
    for obj in objects:
        h.update(inspect.getsource(obj).encode())
    return h.hexdigest()[:12]


@dataclass
class LoraRun:
    name: str
    quantization: str
    idea: bool
    history: list[dict]
    val_ppl: float
    val_ppl_ungated: float | None
    trainable: dict
    frozen_params: int
    steps: int
    stopped_early: bool
    best_step: int
    train_seconds: float
    seconds_per_step: float
    weights_mb: float
    status: str
    run_dir: str

    def load(self, backbone: Backbone) -> LoraIdeaModel:
        with quiet_transformers():
            return LoraIdeaModel.from_adapter(Path(self.run_dir) / "final", backbone.path, self.quantization)

    @property
    def trainable_params(self) -> int:
        return sum(self.trainable.values())


def build_model(profile: LoraProfile, backbone: Backbone, quantization: str, idea: bool) -> LoraIdeaModel:
    t = profile.training
    config = LoraIdeaConfig(idea_head=idea, gate_variant=t.idea.gate_variant, alpha=t.idea.alpha if idea else 0.0,
                            beta=t.idea.beta, eps=t.idea.eps, n_positions=t.block_size,
                            quantization=check_quantization(quantization), lora=profile.lora)
    with quiet_transformers():
        return LoraIdeaModel(load_backbone(backbone.path, quantization, lora_device()), config)


def train_lora(profile: LoraProfile, backbone: Backbone, data: LoraData, quantization: str, idea: bool,
               runs_dir: str | Path | None = None, progress: bool = False) -> LoraRun:
    """Train (or reload) the LoRA baseline (``idea=False``) or LoRA + idea gate on the frozen backbone."""
    from accelerate import Accelerator
    from transformers import get_constant_schedule, get_cosine_schedule_with_warmup

    from .train import progress_bar

    t = profile.training
    name = f"{'gated' if idea else 'baseline'}-{quantization}"
    runs_dir = Path(runs_dir) if runs_dir is not None else default_runs_dir(profile.name)
    description = {"training": asdict(t), "lora": asdict(profile.lora), "quantization": quantization, "idea": idea,
                   "backbone": backbone.config, "backbone_path": backbone.path, "seed": profile.seed,
                   "data": fingerprint(data.train.input_ids, data.validation.input_ids),
                   "source": _source_hash(LoraIdeaModel, LoraIdeaConfig, lora_loss, lora_perplexity, train_lora)}
    run_dir = runs_dir / "lora" / f"{name}-seed{profile.seed}-{fingerprint(description)}"
    final = run_dir / "final"
    if (final / "run.json").is_file():
        return LoraRun(**{**json.loads((final / "run.json").read_text()), "status": "loaded"})

    set_seed(profile.seed)
    model = build_model(profile, backbone, quantization, idea)
    accelerator = Accelerator(cpu=lora_device().type == "cpu")
    params = list(model.trainable_parameters().values())
    optimizer = torch.optim.AdamW(params, lr=t.lr, weight_decay=t.weight_decay)
    scheduler = (get_constant_schedule(optimizer) if t.lr_schedule == "constant"
                 else get_cosine_schedule_with_warmup(optimizer, t.warmup_steps, t.max_steps))
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    generator = torch.Generator().manual_seed(profile.seed)
    if t.fresh_documents and len(data.train) < t.max_steps * t.batch_size:
        raise ValueError(f"fresh_documents needs {t.max_steps * t.batch_size:,} training windows of {t.block_size} "
                         f"tokens but the documents give {len(data.train):,}; raise max_documents or lower max_steps")

    def batches():
        if t.fresh_documents:  # the authors' stream: each window once, in document order
            yield from data.train.batches(t.batch_size)
            return
        epoch = 0
        while True:
            generator.manual_seed(profile.seed * 1_000_003 + epoch)
            yield from data.train.batches(t.batch_size, generator, shuffle=True)
            epoch += 1

    history, best, best_state, bad, step, running = [], math.inf, None, 0, 0, []
    spent, stopped_early, best_step = 0.0, False, 0
    bar = progress_bar(t.max_steps, name, progress)
    model.train()
    start = time.perf_counter()
    for batch in batches():
        alpha = alpha_at(step, t.idea) if idea else 0.0
        optimizer.zero_grad(set_to_none=True)
        pieces = _micro_batches(batch, t.accumulation)
        logged = []
        for piece in pieces:  # gradient accumulation: the same update as one batch, less activation memory
            loss, parts = lora_loss(model, _to(piece, accelerator.device), t.idea, alpha)
            accelerator.backward(loss / len(pieces) if len(pieces) > 1 else loss)
            logged.append({"loss": loss.item(), **parts})
        accelerator.clip_grad_norm_(params, t.grad_clip)
        optimizer.step()
        scheduler.step()
        step += 1
        running.append({k: sum(row[k] for row in logged) / len(logged) for k in logged[0]})
        bar.update(1)
        if step % t.eval_every == 0 or step == t.max_steps:
            spent += time.perf_counter() - start
            eval_alpha = alpha_at(step, t.idea) if idea else 0.0
            val = lora_perplexity(model, data.validation, alpha=eval_alpha)
            row = {"step": step, "alpha": eval_alpha, "val_ppl": val, "train_seconds": spent,
                   **{k: sum(r[k] for r in running) / len(running) for k in running[0]}}
            history.append(row)
            running = []
            ramp_done = not idea or step >= t.idea.alpha_ramp_steps
            if val < best or not ramp_done:  # a ramping gate changes the model: no stopping before alpha is reached
                best, best_step, bad = val, step, 0
                best_state = {k: v.detach().clone() for k, v in model.trainable_parameters().items()}
            else:
                bad += 1
            bar.set_postfix(val_ppl=f"{val:.2f}")
            if bad >= t.patience:
                stopped_early = True
            start = time.perf_counter()
        if stopped_early or step >= t.max_steps:
            break
    bar.close()
    if best_state is not None:
        with torch.no_grad():
            for key, value in model.trainable_parameters().items():
                value.copy_(best_state[key])
    model.eval()
    val_ppl = lora_perplexity(model, data.validation)
    ungated = lora_perplexity(model, data.validation, alpha=0.0) if idea else None
    run = LoraRun(name, quantization, idea, history, val_ppl, ungated, model.trainable_parameter_counts(),
                  model.frozen_parameter_count(), step, stopped_early, best_step, spent, spent / max(step, 1),
                  round(model.backbone.get_memory_footprint() / 2**20, 3), "trained", str(run_dir))
    tmp = run_dir / "final.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    with quiet_transformers():
        model.save_adapter(tmp)
    (tmp / "run.json").write_text(json.dumps(asdict(run), indent=2))
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)
    return run


# --- memory: 4-bit vs full precision -----------------------------------------------------------


def _rss_mb(field_name: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _probe(profile: LoraProfile, backbone: Backbone, data: LoraData, quantization: str, idea: bool) -> dict:
    """Peak memory of loading the backbone and ``memory_probe_steps`` training steps (in this process)."""
    t = profile.training
    device = lora_device()
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
    else:
        torch.set_num_threads(1)
        Path("/proc/self/clear_refs").write_text("5")  # reset the peak-RSS mark (VmHWM) to the current RSS
        before = _rss_mb("VmRSS")
    set_seed(profile.seed)
    model = build_model(profile, backbone, quantization, idea)
    params = list(model.trainable_parameters().values())
    optimizer = torch.optim.AdamW(params, lr=t.lr)
    model.train()
    micro_batch = t.batch_size // t.accumulation  # what one forward/backward holds in memory
    batch = _to(data.train.batch(torch.arange(min(micro_batch, len(data.train)))), device)
    start = time.perf_counter()
    for _ in range(profile.memory_probe_steps):
        loss, _ = lora_loss(model, batch, t.idea, t.idea.alpha if idea else 0.0)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    seconds = (time.perf_counter() - start) / profile.memory_probe_steps
    if cuda:
        peak = (torch.cuda.max_memory_allocated() - before) / 2**20
        method = "torch.cuda.max_memory_allocated"
    else:
        peak = _rss_mb("VmHWM") - before
        method = "peak RSS (VmHWM) above the process's RSS before loading, one fresh forked process each"
    return {"peak_memory_mb": round(peak, 2), "weights_mb": round(model.backbone.get_memory_footprint() / 2**20, 3),
            "seconds_per_step": seconds, "method": method}


def _probe_in_child(queue, *args) -> None:
    try:
        queue.put(_probe(*args))
    except BaseException as error:  # report, do not hang the parent
        queue.put({"error": f"{type(error).__name__}: {error}"})


def measure_memory(profile: LoraProfile, backbone: Backbone, data: LoraData, quantization: str,
                   idea: bool = True) -> dict:
    """Peak memory of a few training steps of the model in ``quantization``.

    CPU: in a forked child (so earlier allocations of this process do not count), the peak RSS
    above the child's RSS at the start. CUDA: ``torch.cuda.max_memory_allocated`` in this process.
    """
    args = (profile, backbone, data, check_quantization(quantization), idea)
    if lora_device().type == "cuda":
        return _probe(*args)
    context = mp.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_probe_in_child, args=(queue, *args))
    child.start()
    try:
        result = queue.get(timeout=600)
    finally:
        child.join(timeout=60)
    if "error" in result:
        raise RuntimeError(f"memory probe ({quantization}) failed: {result['error']}")
    return result


def nf4_cpu_kernel(cpu_inference_repacking: bool = False) -> str:
    """How bitsandbytes computes NF4 layers on this CPU as ``load_backbone`` sets them up."""
    try:
        from bitsandbytes.functional import has_avx512bf16
    except Exception:  # another bitsandbytes layout
        return "unknown"
    if not has_avx512bf16():
        return "dequantise to float32, then a float32 matmul (no AVX512-BF16 on this CPU)"
    if cpu_inference_repacking:
        return "fused 4-bit x bf16 kernel in no-grad evaluation (AVX512-BF16); training steps dequantise to float32"
    return ("dequantise to float32, then a float32 matmul, in training and evaluation; the fused AVX512-BF16 "
            "inference kernel this CPU supports is switched off because it has no backward")


def paper_scale_parameter_counts(lora: LoraSettings | None = None) -> dict:
    """Trainable and frozen parameters of the baseline and gated wrappers around Mistral-7B's architecture.

    ``MistralConfig()``'s defaults are Mistral-7B-v0.1's shape (32 layers, d = 4096, 32 heads, 8 KV heads,
    V = 32,000). The models are built on the ``meta`` device: no weights, no memory, no download.
    """
    from transformers import AutoModelForCausalLM, MistralConfig

    counts = {}
    with torch.device("meta"), quiet_transformers():
        for name, idea in (("baseline", False), ("gated", True)):
            model = LoraIdeaModel(AutoModelForCausalLM.from_config(MistralConfig()),
                                  LoraIdeaConfig(idea_head=idea, lora=lora or LoraSettings()))
            counts[name] = {**model.trainable_parameter_counts(), "frozen": model.frozen_parameter_count()}
    return counts
