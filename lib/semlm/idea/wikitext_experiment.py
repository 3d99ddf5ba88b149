"""Paper B's experiment on WikiText: data, what one GPT run is (:class:`IdeaExperiment`), evaluation and generation.

Profiles: :func:`~semlm.idea.profiles.idea_profile` (``paper``'s WikiText-103 and GPT-2 tokeniser need
``--allow-downloads``, else WikiText-2 and a book-trained BPE of GPT-2's size replace them).

Training is the authors' loop (their ``get_batch`` and ``get_lr``) as a ``TrainConfig`` of
the book's one trainer; this module says only *what* a run is, :mod:`semlm.core.runs` trains or reloads it.
"""

from __future__ import annotations

import functools
import json
import os
import itertools
import math
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Sequence

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

from semlm.core import runs
from semlm.data.bpe import bpe_tokenizer, lines_fingerprint, load_tokenizer
from semlm.data.wikitext import TextSplits, downloads_allowed, load_corpus
from semlm.idea.targets import (idea_gated_loss, idea_gated_loss_autograd, idea_gated_loss_fused, top_frequent_ids,
                                vocabulary_mask, window_ids)
from semlm.core.metrics import (NO_TARGET, distinct_n, perplexity, repetition_rate, stickiness, summarise,
                                unique_domain_density, words_of)
from semlm.idea.model import IdeaGate, IdeaGPTConfig, IdeaGPTForCausalLM, gated_logits, quiet_transformers
from semlm.core.train_config import TrainConfig
from semlm.idea.profiles import LOSS_FORMS, GenerationSettings, GPTSize, IdeaProfile, IdeaSettings, with_max_steps
from semlm.core.runs import RunRecord, RunSpec, default_runs_dir
from semlm.core.precision import autocast
from semlm.core.records import Interval
from semlm.idea.records import IdeaRunMetrics
from semlm.core.train import fingerprint

DOMAINS_DIR = Path(__file__).parents[1] / "data" / "domains"  # package data (semlm/data/domains)


# --- data ---------------------------------------------------------------------------------------


@dataclass
class TokenBatch:
    inputs: torch.Tensor    # [B, L]      x_0 .. x_{L-1}
    targets: torch.Tensor   # [B, L]      x_1 .. x_L (NO_TARGET where the text ended)
    future: torch.Tensor    # [B, L+K-1]  x_1 .. x_{L+K-1}: the next-token targets continued for the idea windows

    @classmethod
    def of(cls, rows: torch.Tensor, block_size: int) -> "TokenBatch":
        """The batch of ``rows`` [B, L + K] of token ids, x_0 .. x_{L+K-1} (``NO_TARGET`` past the text's end)."""
        return cls(rows[:, :block_size].clamp_min(0), rows[:, 1:block_size + 1], rows[:, 1:])


@dataclass
class TokenBlocks:
    """Fixed-length blocks of token ids: row i holds tokens ``[i*L, i*L + L + K)`` of the split (``NO_TARGET`` past
    its end), the inputs, next-token targets and idea windows of L positions that no other block scores."""

    input_ids: torch.Tensor  # [N, L + K] long
    block_size: int
    window: int
    device: str = "cpu"

    @classmethod
    def from_stream(cls, ids: torch.Tensor, block_size: int, window: int,
                    max_tokens: int | None = None) -> "TokenBlocks":
        ids = ids.long().flatten()[: None if max_tokens is None else max_tokens + 1]  # x_0 .. x_max_tokens
        n = (len(ids) - 1) // block_size
        if n < 1:
            raise ValueError(f"need more than {block_size} tokens to make one block, got {len(ids)}")
        padded = F.pad(ids, (0, block_size + window), value=NO_TARGET)
        rows = padded.unfold(0, block_size + window, block_size)[:n]
        return cls(rows.contiguous(), block_size, window)

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    @property
    def n_tokens(self) -> int:
        return int((self.input_ids[:, 1:self.block_size + 1] != NO_TARGET).sum())

    def batch(self, index) -> TokenBatch:
        return TokenBatch.of(self.input_ids[index].to(self.device), self.block_size)

    def batches(self, batch_size: int, generator: torch.Generator | None = None, shuffle: bool = False):
        order = torch.randperm(len(self), generator=generator) if shuffle else torch.arange(len(self))
        for start in range(0, len(self), batch_size):
            yield self.batch(order[start:start + batch_size])


class TokenStream:
    """A training split as one id stream, sampled like the authors' ``get_batch``: windows at random offsets
    (the data of ``sampling="random_windows"``; the training loop moves the batches to the model's device)."""

    def __init__(self, ids: torch.Tensor, block_size: int, window: int, max_tokens: int | None = None):
        # the stream itself (the trainer hashes input_ids into the run's fingerprint)
        self.input_ids = ids.long().flatten()[: None if max_tokens is None else max_tokens + 1]
        self.block_size, self.window = block_size, window
        if self.n_tokens < block_size + window + 1:
            raise ValueError(f"need more than {block_size + window} training tokens, got {self.n_tokens}; "
                             f"raise train_tokens or lower block_size / window")

    @property
    def n_tokens(self) -> int:
        return len(self.input_ids)

    def __len__(self) -> int:
        """The number of distinct window offsets."""
        return self.n_tokens - self.block_size - self.window

    def sample(self, batch_size: int, generator: torch.Generator) -> TokenBatch:
        starts = torch.randint(len(self), (batch_size,), generator=generator)
        return TokenBatch.of(self.input_ids[starts[:, None] + torch.arange(self.block_size + self.window)],
                             self.block_size)   # rows x_i .. x_{i+L+K-1}


@dataclass
class IdeaData:
    splits_dataset: str           # the corpus used
    requested_dataset: str
    note: str
    tokenizer_dir: Path
    streams: dict                 # split -> 1-D int32 ids
    stopword_ids: list[int]       # masked out of the idea loss
    tokenizer_name: str = "book-bpe"
    stopwords_not_single_tokens: list[str] = field(default_factory=list)  # listed but not one token here: not masked

    @property
    def tokenizer(self):
        return load_tokenizer(self.tokenizer_dir)

    def blocks(self, split: str, profile: IdeaProfile) -> TokenBlocks:
        cap = profile.train_tokens if split == "train" else profile.eval_tokens
        return TokenBlocks.from_stream(self.streams[split], profile.size.block_size, profile.idea.window, cap)


def encode_lines(tokenizer, lines: Sequence[str], separator: bool = False, dtype=torch.int32) -> torch.Tensor:
    """``lines`` as one id stream (``eos`` after each line with ``separator``, when the tokeniser has one)."""
    encoded = tokenizer(list(lines), add_special_tokens=False)["input_ids"]
    eos = [tokenizer.eos_token_id] if separator and tokenizer.eos_token_id is not None else []
    return torch.tensor([i for row in encoded for i in row + eos], dtype=dtype)


def prepare_data(profile: IdeaProfile, runs_dir: str | Path | None = None) -> IdeaData:
    """Corpus -> BPE (trained once) -> id streams and the stopword ids of ``profile`` (an :class:`IdeaProfile`
    or :class:`IdeaRun`), cached under ``runs_dir/idea/`` in a folder named by a hash of what it holds."""
    runs_dir = Path(runs_dir) if runs_dir is not None else default_runs_dir(profile.name)
    splits: TextSplits = load_corpus(profile.dataset)
    bpe_lines = splits.train[: profile.bpe_lines]  # [:None]: every line
    gpt2 = None
    if profile.tokenizer == "gpt2":  # the authors': from the local cache or, with downloads allowed, the Hub
        from transformers import AutoTokenizer

        try:
            with quiet_transformers():
                gpt2 = AutoTokenizer.from_pretrained("gpt2", local_files_only=not downloads_allowed())
        except (OSError, ValueError):
            pass
    note = splits.note
    if profile.tokenizer == "gpt2" and gpt2 is None:
        note = (note + "; " if note else "") + (f"GPT-2's tokeniser is not available offline: a "
                                                f"{profile.vocab_size}-token byte-level BPE learnt on the training "
                                                "split replaces it")
    name = "gpt2" if gpt2 is not None else "book-bpe"
    key = fingerprint({"dataset": splits.dataset, "lines": lines_fingerprint(bpe_lines), "vocab": profile.vocab_size,
                       "train_tokens": profile.train_tokens, "eval_tokens": profile.eval_tokens, "tokenizer": name})
    folder = runs_dir / "idea" / f"tokenizer-{splits.dataset}-{name}-{profile.vocab_size}-{key}"
    # the chapters and the book's training ahead may prepare the same data at once: one does, the other waits
    with runs.run_lock(folder):
        if gpt2 is not None:
            gpt2.pad_token = gpt2.eos_token
            folder.mkdir(parents=True, exist_ok=True)
            gpt2.save_pretrained(str(folder))
            tokenizer = load_tokenizer(folder)
        else:
            tokenizer = bpe_tokenizer(bpe_lines, profile.vocab_size, folder)
        cache = folder / "ids.safetensors"
        if cache.is_file():
            streams = load_file(cache)
        else:
            streams = {}
            for split in ("train", "valid", "test"):
                lines = splits.split(split)
                cap = profile.train_tokens if split == "train" else profile.eval_tokens
                if cap is not None:  # encode only what is needed (about 8 characters per token is plenty)
                    lines = take_chars(lines, 10 * (cap + 1) + 10_000)
                streams[split] = encode_lines(tokenizer, lines)
            save_file(streams, cache)
    missing: list[str] = []
    if profile.idea.stopword_list:  # the words that are one token here (each of the authors' 18 is under GPT-2's)
        pieces = {word: tokenizer(word, add_special_tokens=False)["input_ids"] for word in profile.idea.stopword_list}
        stop = sorted({ids[0] for ids in pieces.values() if len(ids) == 1})
        missing = [word for word, ids in pieces.items() if len(ids) != 1]  # left unmasked, not masked in pieces
    else:
        stop = top_frequent_ids(streams["train"][: profile.train_tokens].long(), profile.idea.stopwords_top_n)
    return IdeaData(splits.dataset, splits.requested, note, folder, streams, stop, name, missing)


def take_chars(lines: Sequence[str], chars: int | None) -> list[str]:
    """The first lines of ``lines`` up to the one that reaches ``chars`` characters (all of them for None)."""
    before = itertools.accumulate((len(line) for line in lines), initial=0)  # the characters before each line
    return [line for line, n in zip(lines, before) if chars is None or n < chars]


# --- model and training -------------------------------------------------------------------------


def model_config(profile: IdeaProfile, vocab_size: int, idea: bool, settings: IdeaSettings | None = None,
                 eos_id: int = 0) -> IdeaGPTConfig:
    """The GPT of ``profile`` (an :class:`IdeaProfile` or :class:`IdeaRun`: its ``size`` and ``idea``)."""
    s, size = settings or profile.idea, profile.size
    return IdeaGPTConfig(vocab_size=vocab_size, n_positions=size.block_size, n_embd=size.n_embd, n_layer=size.n_layer,
                         n_head=size.n_head, dropout=size.dropout, idea_head=idea, gate_variant=s.gate_variant,
                         alpha=s.alpha if idea else 0.0, beta=s.beta, eps=s.eps, init=size.init,
                         dropout_scope=size.dropout_scope, bos_token_id=eos_id, eos_token_id=eos_id,
                         pad_token_id=eos_id)


def training_gate(settings: IdeaSettings) -> IdeaGate:
    """The gate ``settings`` train: strength, clamp, variant, eps and the ramp of the strength from 0 to ``alpha``
    over ``alpha_ramp_steps`` optimiser steps (:meth:`~semlm.idea.model.IdeaGate.at_step`)."""
    return IdeaGate(settings.alpha, settings.beta, settings.gate_variant, settings.eps, settings.alpha_ramp_steps)


def autocast_for(device: torch.device | str):
    """bf16 autocast on CUDA only; CPU runs in float32 (``semlm.core.precision``, as paper B's training)."""
    return autocast("bf16_on_cuda", device)


#: why this process's compiled loss fell back to eager (empty while the compiled loss runs); tests assert it stays empty
COMPILE_FALLBACKS: list[str] = []


@functools.cache
def _compiled_gpu_loss(mode: str | None = None):
    """:func:`~semlm.idea.targets.idea_gated_loss_autograd` compiled once per process and ``torch.compile`` mode.
    Persistent reductions are off (Triton failed to build that kernel over a 96-token vocabulary, H100, torch
    2.11); should the backend still fail, the loss warns once, records why in :data:`COMPILE_FALLBACKS` and runs
    eagerly."""
    from torch._inductor import list_mode_options  # a mode is a set of options; this one's are added to them

    options = {**(list_mode_options(mode) if mode else {}), "triton.persistent_reductions": False}
    compiled = torch.compile(idea_gated_loss_autograd, options=options)

    def loss(*args):
        if COMPILE_FALLBACKS:
            return idea_gated_loss_autograd(*args)
        try:
            return compiled(*args)
        except torch._dynamo.exc.BackendCompilerFailed as error:  # raised before anything ran: nothing lost
            errors = [line.strip() for line in str(error).splitlines() if "Error" in line] or [str(error)]
            COMPILE_FALLBACKS.append(errors[-1][:300])  # the innermost error (the backend's, e.g. Triton's)
            warnings.warn(f"torch.compile of paper B's loss failed ({COMPILE_FALLBACKS[-1]}); running it eagerly "
                          f"(same values, slower)", RuntimeWarning, stacklevel=2)
            return idea_gated_loss_autograd(*args)

    return loss


def idea_loss_fn(settings: IdeaSettings, stopword_ids: Sequence[int], idea: bool, fused: bool = True,
                 compile_on_cuda: bool | str = False):
    """``loss_fn(model, batch, step) -> (loss, parts)`` for :func:`semlm.core.train.train`: paper B's loss
    (:func:`semlm.idea.targets.idea_gated_loss`) with the gate of :func:`training_gate` at ``step``
    (``step=None``: full strength), the stopwords masked out of the idea BCE. ``parts``: detached token CE, idea
    BCE, the BCE per counted column (comparable between the two reductions) and alpha.

    The gate is applied once, with the same numbers to float precision: off CUDA (``fused``) inside the loss
    (:func:`~semlm.idea.targets.idea_gated_loss_fused`; the model runs ungated), on CUDA in the model's forward
    (``gate=``), or with ``compile_on_cuda`` inside the compiled :func:`~semlm.idea.targets.idea_gated_loss_autograd`
    (a string: in that ``torch.compile`` mode).
    """
    stop = torch.tensor(sorted(set(stopword_ids)), dtype=torch.long)
    mode = compile_on_cuda if isinstance(compile_on_cuda, str) else None
    ramp = training_gate(settings) if idea else None
    masks: dict = {}  # the vocabulary mask per (vocabulary size, device): built once

    def loss_fn(model, batch: TokenBatch, step: int | None = None):
        device = batch.inputs.device
        compiled = compile_on_cuda and batch.inputs.is_cuda
        if ramp is None:  # the plain GPT: the token CE
            out = model(batch.inputs)
            if compiled:
                loss, ce, _ = _compiled_gpu_loss(mode)(out.logits, None, torch.zeros((), device=device), 0.0,
                                                   "clamp_then_scale", 0.0, batch.targets, None, None, 0.0, None,
                                                   "mean", NO_TARGET)
            else:
                loss, ce, _ = idea_gated_loss(out.logits, batch.targets, None, None, None, 0.0, ignore_index=NO_TARGET)
            return loss, {"token_ce": ce.detach()}
        gate = ramp.at_step(step)
        in_loss = compiled or (fused and not batch.inputs.is_cuda)  # the model runs ungated, the loss gates
        out = model(batch.inputs, gate=gate.with_alpha(0.0) if in_loss else gate)
        vocab = out.idea_logits.shape[-1]
        if (vocab, str(device)) not in masks:
            masks[vocab, str(device)] = vocabulary_mask(vocab, stop, device)
        mask = masks[vocab, str(device)]
        positives = window_ids(batch.future, settings.window, batch.inputs.shape[1])
        losses = (mask, settings.idea_weight, settings.pos_weight, settings.idea_loss_reduction, NO_TARGET)
        if compiled:  # a compiled module forwards .config
            loss, ce, bce = _compiled_gpu_loss(mode)(out.token_logits, out.idea_logits,
                                                 torch.full((), gate.alpha, device=device), gate.beta, gate.variant,
                                                 gate.eps, batch.targets, positives, *losses)
        elif not in_loss:  # the model's gated logits
            loss, ce, bce = idea_gated_loss(out.logits, batch.targets, out.idea_logits, positives, *losses)
        elif out.token_logits.dtype == out.idea_logits.dtype == torch.float32:
            loss, ce, bce = idea_gated_loss_fused(out.token_logits, out.idea_logits, gate, batch.targets, positives,
                                                  *losses)
        else:  # a CPU run in bf16: the gate applied here once
            logits = gated_logits(out.token_logits, out.idea_logits, gate)
            loss, ce, bce = idea_gated_loss(logits, batch.targets, out.idea_logits, positives, *losses)
        bce = bce.detach()  # parts are detached tensors: the loop decides when to wait for the device
        per_column = bce / mask.sum() if settings.idea_loss_reduction == "sum_vocab" else bce
        return loss, {"token_ce": ce.detach(), "idea_bce": bce, "idea_bce_per_column": per_column,
                      "alpha": gate.alpha}

    return loss_fn


@dataclass(frozen=True)
class IdeaRun:
    """What one paper-B GPT run is: everything its weights depend on and nothing else (the corpus fields and
    ``name`` are the profile's; ``run_tokens``: its training tokens, -1 for ``train_tokens``)."""

    name: str
    dataset: str
    tokenizer: str
    vocab_size: int
    bpe_lines: int | None
    train_tokens: int | None
    eval_tokens: int | None
    size: GPTSize
    train: TrainConfig
    idea: IdeaSettings
    gated: bool
    run_tokens: int | None = -1
    #: training processes the profile allows side by side: how runs are scheduled, not what they compute, so in no
    #: key (:func:`semlm.core.train_config.execution_fields`); the profile's, set by :func:`idea_run`
    max_workers: int | None = field(default=None, metadata={"execution": True})


def idea_run(profile: IdeaProfile, name: str, gated: bool, settings: IdeaSettings | None = None,
             train_tokens: int | None = -1, steps: int | None = None) -> RunSpec:
    """The run ``name`` of ``profile``, plain or gated; ``settings``, ``train_tokens`` (-1: the profile's; None:
    all) and ``steps`` (schedules keep their share, :func:`with_max_steps`) replace the profile's."""
    capped = with_max_steps(profile, steps)
    idea = settings or capped.idea
    if steps is not None and settings is not None:  # keep the ramp's share of the shorter run
        idea = replace(idea, alpha_ramp_steps=capped.idea.alpha_ramp_steps)
    run = IdeaRun(profile.name, profile.dataset, profile.tokenizer, profile.vocab_size, profile.bpe_lines,
                  profile.train_tokens, profile.eval_tokens, profile.size, capped.train, idea, gated, train_tokens,
                  profile.max_workers)
    return RunSpec(name, profile.seed, run, group=profile.dataset)


class IdeaExperiment(runs.Experiment):
    """Paper B's plain and idea-gated GPT on WikiText for :mod:`semlm.core.runs` (chapters 6, 7)."""

    name = "idea"
    metrics_type = IdeaRunMetrics
    packages = (*runs.KEYED_PACKAGES, "datasets")  # WikiText-103 comes through datasets at the paper profile

    def hub_sources(self, spec: RunSpec) -> tuple[str, ...]:
        """GPT-2's tokeniser and WikiText-103, read from the Hub cache by the ``paper`` profile's runs."""
        run = spec.config
        return (("models/gpt2",) if run.tokenizer == "gpt2" else ()) + (
            ("datasets/Salesforce/wikitext", "datasets/wikitext") if run.dataset == "wikitext-103" else ())

    def data_key(self, spec: RunSpec):
        r = spec.config
        return (r.name, r.dataset, r.tokenizer, r.vocab_size, r.bpe_lines, r.train_tokens, r.eval_tokens,
                r.idea.stopword_list, r.idea.stopwords_top_n)

    def prepare(self, spec: RunSpec) -> IdeaData:
        return prepare_data(spec.config)

    def build(self, spec: RunSpec, data: IdeaData) -> IdeaGPTForCausalLM:
        run = spec.config
        tokenizer = data.tokenizer
        return IdeaGPTForCausalLM(model_config(run, len(tokenizer), run.gated, run.idea, tokenizer.eos_token_id))

    @staticmethod
    def stream(run: IdeaRun, data: IdeaData) -> TokenStream:
        tokens = run.train_tokens if run.run_tokens == -1 else run.run_tokens
        return TokenStream(data.streams["train"], run.size.block_size, run.idea.window, tokens)

    def fit(self, spec: RunSpec, data: IdeaData) -> runs.Fit:
        run = spec.config
        return runs.Fit(self.stream(run, data), data.blocks("valid", run), run.train,
                        loss_fn=idea_loss_fn(run.idea, data.stopword_ids, run.gated,
                                             compile_on_cuda=run.train.compile_on_cuda))

    def evaluate(self, spec: RunSpec, data: IdeaData, model, result) -> IdeaRunMetrics:
        run, val = spec.config, data.blocks("valid", spec.config)
        return IdeaRunMetrics(val_ppl=perplexity(model, val),
                              val_ppl_ungated=perplexity(model, val, alpha=0.0) if run.gated else None,
                              train_tokens=self.stream(run, data).n_tokens)

    def total_steps(self, spec: RunSpec) -> int:
        return spec.config.train.max_steps

    def max_workers(self, specs: Sequence[RunSpec]) -> int | None:
        """The runs' ``max_workers`` (the profile's: 1 at ``smoke`` and ``paper``, one run after another)."""
        return min((s.config.max_workers for s in specs if s.config.max_workers is not None), default=None)


IDEA = IdeaExperiment()


def idea_gating_runs(profile: IdeaProfile, n_seeds: int | None = 1) -> list[RunSpec]:
    """Chapter 6's models: the plain GPT and the gated GPT (in both loss forms, ``gated-sum`` and ``gated-mean``,
    when ``profile.compare_loss_forms``), and for each further seed of ``n_seeds`` (None: the profile's) the plain
    GPT and the gated one in the profile's loss form (:func:`profile_form_run`)."""
    specs = [idea_run(profile, "baseline", False)]
    if profile.compare_loss_forms:
        specs += [idea_run(profile, f"gated-{form}", True, replace(profile.idea, **kw))
                  for form, kw in LOSS_FORMS.items()]
    else:
        specs.append(idea_run(profile, "gated", True))
    for seed in training_seeds(profile, n_seeds)[1:]:
        seeded = replace(profile, seed=seed)
        specs += [idea_run(seeded, "baseline", False), idea_run(seeded, profile_form_run(profile), True)]
    return specs


def profile_form_run(profile: IdeaProfile) -> str:
    """The name of the gated run in the profile's own idea-loss form (``gated-mean``, ``gated-sum`` or ``gated``)."""
    if not profile.compare_loss_forms:
        return "gated"
    return next(f"gated-{form}" for form, kw in LOSS_FORMS.items() if replace(profile.idea, **kw) == profile.idea)


def training_seeds(profile, n_seeds: int | None = None) -> list[int]:
    """``seed, seed + 1, ...``: the training seeds of a comparison over ``n_seeds`` (default: the profile's)."""
    n = profile.n_seeds if n_seeds is None else n_seeds
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n_seeds must be an int >= 1 or None (the profile's {profile.n_seeds}), got {n!r}")
    return [profile.seed + i for i in range(n)]


def with_chosen_gated(runs: dict[str, RunRecord]) -> tuple[dict[str, RunRecord], str]:
    """``runs`` with ``"gated"`` naming the gated model the chapters use, and its run name: with both loss forms
    trained, the one with the lower validation perplexity."""
    if "gated" in runs:
        return dict(runs), "gated"
    chosen = min((f"gated-{form}" for form in LOSS_FORMS), key=lambda name: runs[name].metrics.val_ppl)
    return {**runs, "gated": runs[chosen]}, chosen


def idea_data(profile: IdeaProfile) -> IdeaData:
    """The data of ``profile``'s runs, prepared once per process by :data:`IDEA` (the copy its runs use)."""
    return IDEA.data(idea_run(profile, "baseline", False))


# --- domains and generation ---------------------------------------------------------------------


@dataclass
class Domain:
    name: str
    prompts: list[str]
    terms: list[str] = field(default_factory=list)


def load_domains(folder: str | Path = DOMAINS_DIR) -> dict[str, Domain]:
    """``<name>.txt`` files with ``[prompts]`` and ``[terms]`` sections (see semlm/data/domains/README.md)."""
    folder = Path(folder)
    files = sorted(folder.glob("*.txt"))
    if not files:
        raise FileNotFoundError(f"no domain files (*.txt) in {folder}; see semlm/data/domains/README.md")
    domains = {}
    for path in files:
        sections, section = {"[prompts]": [], "[terms]": []}, None
        for line in (raw.strip() for raw in path.read_text().splitlines()):
            if line in sections:
                section = line
            elif line and not line.startswith("#"):
                if section is None:
                    raise ValueError(f"{path}: text before a [prompts] or [terms] header: {line!r}")
                sections[section].append(line)
        prompts = [" " + line for line in sections["[prompts]"]]
        terms = [word for line in sections["[terms]"] for word in line.lower().split()]
        if not prompts or not terms:
            raise ValueError(f"{path} needs both a [prompts] and a [terms] section")
        domains[path.stem] = Domain(path.stem, prompts, terms)
    return domains


@torch.no_grad()
def generate_texts(model, tokenizer, prompts: Sequence[str], samples_per_prompt: int, max_new_tokens: int,
                   seed: int, alpha: float | None = None, do_sample: bool = True, temperature: float = 0.6,
                   repetition_penalty: float | None = 1.2, logits_processor=None,
                   penalty_form: str = "authors", gate: IdeaGate | None = None) -> list[dict]:
    """Continuations of every prompt (one left-padded batch) by ``generate()``, each with ``text`` (the
    continuation) and ``full_text``; ``gate`` (an :class:`~semlm.idea.model.IdeaGate`) or ``alpha`` replace the
    model's own gate. ``penalty_form="authors"``: the repetition penalty compounds per occurrence
    (:class:`~semlm.idea.compounding_penalty.CompoundingRepetitionPenalty`); ``"transformers"``: once per token.
    """
    from transformers import LogitsProcessorList

    from semlm.idea.compounding_penalty import CompoundingRepetitionPenalty

    if penalty_form not in ("authors", "transformers"):
        raise ValueError(f"penalty_form must be 'authors' or 'transformers', got {penalty_form!r}")

    tokenizer.padding_side = "left"
    batch = tokenizer([p for p in prompts for _ in range(samples_per_prompt)], return_tensors="pt", padding=True)
    torch.manual_seed(seed)
    kwargs = dict(max_new_tokens=max_new_tokens, do_sample=do_sample, pad_token_id=tokenizer.pad_token_id,
                  eos_token_id=None,
                  # our GPT keeps a KV cache (identical tokens, linear instead of quadratic time); the
                  # LoRA wrapper of chapter 8 re-reads its context every step
                  use_cache=isinstance(model, IdeaGPTForCausalLM))
    if do_sample:
        kwargs.update(temperature=temperature, top_k=0, top_p=1.0)
    processors = list(logits_processor or [])
    if repetition_penalty and penalty_form == "transformers":
        kwargs["repetition_penalty"] = repetition_penalty
    elif repetition_penalty:
        processors.insert(0, CompoundingRepetitionPenalty(repetition_penalty, window=model.config.n_positions))
    if processors:
        kwargs["logits_processor"] = LogitsProcessorList(processors)
    if alpha is not None:
        kwargs["alpha"] = alpha
    if gate is not None:
        kwargs["gate"] = gate
    with quiet_transformers():
        out = model.generate(batch.input_ids.to(model.device), attention_mask=batch.attention_mask.to(model.device),
                             **kwargs)
    new = out[:, batch.input_ids.shape[1]:].cpu()
    return [{"prompt": prompts[i // samples_per_prompt], "seed": seed, "ids": new[i].tolist(),
             "text": tokenizer.decode(new[i], skip_special_tokens=True),
             "full_text": tokenizer.decode(out[i].cpu(), skip_special_tokens=True)} for i in range(len(new))]


METRIC_NAMES = ("stickiness", "unique_density", "distinct_1", "distinct_2", "repetition", "token_repetition")


@dataclass
class DomainScores:
    """One model's continuations of one domain's prompts: each metric's mean with its 95% interval over the
    samples (``summary``, all seeds pooled) and every scored sample."""

    summary: dict[str, Interval]
    samples: list[dict]


def sample_interval(values: Sequence[float]) -> Interval:
    """Mean and 95% interval of ``values`` over samples (NaNs dropped; :func:`semlm.core.metrics.summarise`)."""
    return Interval.from_dict(summarise(values))


def stop_words() -> frozenset[str]:
    """The stopwords of the book's stickiness: spaCy's English list, or the same list as a JSON array of words at
    ``$SEMLM_STOP_WORDS`` where spaCy is not installed (a bare GPU machine: ``.ci/run-gpu --prepare`` writes it)."""
    path = os.environ.get("SEMLM_STOP_WORDS")
    if path:
        try:
            words = json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            raise ValueError(f"SEMLM_STOP_WORDS={path} is not a readable JSON list of words ({exc}); write it with "
                             f"`.ci/run-gpu --prepare` or unset it to use spaCy's list") from None
        if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
            raise ValueError(f"SEMLM_STOP_WORDS={path} is not a JSON list of words; write it with "
                             f"`.ci/run-gpu --prepare`")
        return frozenset(words)
    try:
        from spacy.lang.en.stop_words import STOP_WORDS
    except ImportError:
        raise RuntimeError("the book's stickiness needs spaCy's English stop list: install spacy, or set "
                           "SEMLM_STOP_WORDS to that list as JSON (`.ci/run-gpu --prepare` writes one)") from None
    return frozenset(STOP_WORDS)


def domain_retention(model, tokenizer, domains: dict[str, Domain], generation: GenerationSettings,
                     alpha: float | None = None) -> dict[str, DomainScores]:
    """Per domain: every sample's scores and their means with 95% intervals over samples (all seeds pooled).
    All domains' prompts decode in one batch per seed."""
    stop, n = stop_words(), generation.samples_per_prompt
    prompts = [(name, p) for name, domain in domains.items() for p in domain.prompts]
    rows = {name: [] for name in domains}
    for seed in generation.seeds:
        samples = generate_texts(model, tokenizer, [p for _, p in prompts], n, generation.max_new_tokens, seed, alpha,
                                 temperature=generation.temperature, repetition_penalty=generation.repetition_penalty,
                                 penalty_form=generation.penalty_form)
        for i, sample in enumerate(samples):
            name, words = prompts[i // n][0], words_of(sample["text"])
            rows[name].append({**sample, "domain": name, "stickiness": stickiness(words, domains[name].terms, stop),
                               "unique_density": unique_domain_density(words, domains[name].terms),
                               "distinct_1": distinct_n(words, 1), "distinct_2": distinct_n(words, 2),
                               "repetition": repetition_rate(words, 4),
                               "token_repetition": repetition_rate(sample["ids"], 4)})
    return {name: DomainScores({m: sample_interval([r[m] for r in domain_rows]) for m in METRIC_NAMES}, domain_rows)
            for name, domain_rows in rows.items()}


# --- the authors' evaluation protocol -------------------------------------------------------------


#: The 15 words the authors' ``evaluate.py`` removes before computing stickiness.
AUTHORS_EVAL_STOPWORDS = frozenset({"the", "a", "an", "and", "or", "but", "in", "on", "at", "to", "for", "of", "with",
                                    "is", "was"})


def authors_stickiness(text: str, terms) -> float:
    """The authors' ``calculate_stickiness_ratio``: lower-case, drop "." and ",", split on whitespace, remove
    their 15 stopwords; domain hits / remaining words (0.0 if none remain). The authors apply it to prompt +
    continuation (``authors_stickiness``); the book also applies it to the continuation alone (``stickiness``),
    so that the prompt's own domain words, the same for both models, do not count."""
    words = text.lower().replace(".", "").replace(",", "").split()
    content = [w for w in words if w not in AUTHORS_EVAL_STOPWORDS]
    if not content:
        return 0.0
    vocabulary = set(terms)
    return sum(w in vocabulary for w in content) / len(content)


AUTHORS_METRICS = ("authors_stickiness", "stickiness", "unique_density", "distinct_2")


def authors_protocol(model, tokenizer, domains: dict, generation: GenerationSettings) -> dict[str, DomainScores]:
    """The authors' evaluation: per domain of ``domains`` (:data:`semlm.reference.PAPER_B_EVAL_DOMAINS`) one
    prompt, ``authors_samples`` continuations with the compounding penalty, scored by :func:`authors_stickiness`
    on prompt + continuation, and on the continuation alone (``stickiness``), density and distinct-2.
    """
    out, samples = {}, generation.authors_samples
    per_seed = max(1, math.ceil(samples / len(generation.seeds)))
    for name, domain in domains.items():
        rows = []
        for seed in generation.seeds:
            for sample in generate_texts(model, tokenizer, [domain["prompt"]], per_seed, generation.authors_new_tokens,
                                         seed, temperature=generation.temperature,
                                         repetition_penalty=generation.repetition_penalty, penalty_form="authors"):
                words = words_of(sample["text"])
                rows.append({**sample, "domain": name,
                             "authors_stickiness": authors_stickiness(sample["full_text"], domain["terms"]),
                             "stickiness": authors_stickiness(sample["text"], domain["terms"]),
                             "unique_density": unique_domain_density(words, domain["terms"]),
                             "distinct_2": distinct_n(words, 2)})
        rows = rows[:samples]
        out[name] = DomainScores({m: sample_interval([r[m] for r in rows]) for m in AUTHORS_METRICS}, rows)
    return out


def _encode_scores(scores: dict[str, DomainScores]) -> dict:
    return {name: {"summary": {m: v.to_dict() for m, v in s.summary.items()}, "samples": s.samples}
            for name, s in scores.items()}


def _decode_scores(data: dict) -> dict[str, DomainScores]:
    return {name: DomainScores({m: Interval.from_dict(v) for m, v in s["summary"].items()}, s["samples"])
            for name, s in data.items()}


def scored_authors(record: RunRecord, tokenizer, domains: dict, generation: GenerationSettings,
                   model=None) -> dict[str, DomainScores]:
    """:func:`authors_protocol` of ``record``'s model (``model``, or loaded from the run when it must be computed),
    computed once per run, code and setting and kept with the run (:func:`~semlm.core.runs.cached_evaluation`)."""
    return runs.cached_evaluation(
        record, authors_protocol, (domains, generation),
        lambda: authors_protocol(model if model is not None else record.load(), tokenizer, domains, generation),
        _encode_scores, _decode_scores)


def scored_retention(record: RunRecord, tokenizer, domains: dict[str, Domain], generation: GenerationSettings,
                     model=None, alpha: float | None = None) -> dict[str, DomainScores]:
    """:func:`domain_retention` of ``record``'s model, computed once per run, code and setting, as
    :func:`scored_authors` (the stopword list is part of the setting)."""
    settings = (domains, generation, alpha, sorted(stop_words()))
    return runs.cached_evaluation(
        record, domain_retention, settings,
        lambda: domain_retention(model if model is not None else record.load(), tokenizer, domains, generation,
                                 alpha=alpha),
        _encode_scores, _decode_scores)


#: validation blocks whose teacher-forced entropy sets the sharpening control's temperature
SHARPENING_BLOCKS = 64


def protocols_over_seeds(by_seed: dict[int, dict[str, RunRecord]], tokenizer, authors_domains: dict,
                         domains: dict[str, Domain], generation: GenerationSettings, val_blocks):
    """Every seed's plain and gated GPT scored with the authors' protocol and the book's, with the sharpening
    control as the model ``"sharpened"``: the plain GPT at the temperature that gives it the gated GPT's mean
    next-token entropy on ``val_blocks`` (:func:`~semlm.idea.sharpening.sharpening_temperature`). Returns
    ``{seed: {model: {domain: scores}}}`` of each protocol and ``{seed: temperature}``. Each score is computed
    once per run and setting (:func:`scored_authors`, :func:`scored_retention`): what the chapter scored already
    for its first seed's pair is read back."""
    from semlm.idea.sharpening import sharpening_temperature

    authors, book, temperatures = {}, {}, {}
    for seed, pair in by_seed.items():
        models = {name: record.load() for name, record in pair.items()}
        temperatures[seed], _ = sharpening_temperature(models["baseline"], models["gated"], val_blocks,
                                                       generation.temperature, SHARPENING_BLOCKS)
        arms = {**pair, "sharpened": pair["baseline"]}  # the sharpening control: the plain GPT, cooler
        models["sharpened"] = models["baseline"]
        settings = {**dict.fromkeys(pair, generation), "sharpened": replace(generation, temperature=temperatures[seed])}
        authors[seed] = {name: scored_authors(arms[name], tokenizer, authors_domains, settings[name], model)
                         for name, model in models.items()}
        book[seed] = {name: scored_retention(arms[name], tokenizer, domains, settings[name], model)
                      for name, model in models.items()}
    return authors, book, temperatures


#: A model is competent to be judged on paper B's generation claims if its validation perplexity is
#: at most this fraction of the best count-based bigram model's on the same tokens (see :func:`competence`).
COMPETENCE_RATIO = 0.75


def ngram_reference(train_ids: torch.Tensor, valid_ids: torch.Tensor, vocab_size: int,
                    lambdas: Sequence[float] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95)) -> dict:
    """Validation perplexities of count models from the training tokens: add-one unigram, and a bigram
    interpolated with it, ``p = l p_bigram(v | u) + (1 - l) p_unigram(v)``, at the best ``l`` of a
    grid *chosen on the validation split itself* (so the bigram reference is, if anything, optimistic)."""
    train, valid = train_ids.long().flatten(), valid_ids.long().flatten()
    unigram = (torch.bincount(train, minlength=vocab_size).double() + 1) / (len(train) + vocab_size)
    pairs = train[:-1] * vocab_size + train[1:]
    keys, counts = torch.unique(pairs, return_counts=True)
    context = torch.bincount(train[:-1], minlength=vocab_size).double()
    prev, nxt = valid[:-1], valid[1:]
    query = prev * vocab_size + nxt
    pos = torch.searchsorted(keys, query).clamp_max(len(keys) - 1)
    pair_count = torch.where(keys[pos] == query, counts[pos].double(), torch.zeros_like(query, dtype=torch.double))
    p_bigram = torch.where(context[prev] > 0, pair_count / context[prev].clamp_min(1), torch.zeros_like(pair_count))
    p_uni = unigram[nxt]
    best = min(((math.exp(-torch.log(l * p_bigram + (1 - l) * p_uni).mean().item()), l) for l in lambdas))
    return {"unigram_val_ppl": math.exp(-torch.log(p_uni).mean().item()), "bigram_val_ppl": best[0],
            "bigram_lambda": best[1], "tokens": len(nxt)}


def competence(model_ppls: dict, reference: dict, ratio: float = COMPETENCE_RATIO) -> dict:
    """Does every model beat the bigram reference by the margin ``ratio`` (PPL <= ratio x bigram PPL)? A model
    that cannot beat word-pair counts does not use context, so the topic of its continuations is noise.
    """
    worst = max(model_ppls, key=model_ppls.get)
    passes = all(p <= ratio * reference["bigram_val_ppl"] for p in model_ppls.values())
    return {**reference, "model_val_ppl": dict(model_ppls), "threshold_ratio": ratio,
            "threshold_ppl": ratio * reference["bigram_val_ppl"], "worst_model": worst,
            "worst_ratio": model_ppls[worst] / reference["bigram_val_ppl"], "passes": passes}
