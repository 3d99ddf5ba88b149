"""Paper B's experiment on WikiText: data, profiles, training (cached), evaluation and generation.

Profiles (``idea_profile(name)``):

* ``paper``: the authors' v1 run (their ``train.py``, ``model.py`` and ``evaluate.py`` in
  github.com/DarshanFofadiya/idea-gated-transformers, WikiText-103 GPT): GPT-2 BPE (50,257), 6 layers,
  6 heads, 384 dims, block 256, dropout 0.1 after the embeddings only, weights N(0, 0.02) with
  PyTorch's default biases; 50,000 iterations of 8 random windows x 4 accumulation, AdamW 3e-4 (weight
  decay 0.01, PyTorch's default, as they pass only the learning rate), 1,000 warmup iterations then
  cosine to 3e-5, no gradient clipping; K = 20, alpha 0 -> 0.5 over 2,000 iterations, lambda 0.01 on
  the idea BCE summed over the vocabulary (pos_weight 5) with their 18 stopword strings masked out.
  WikiText-103 and GPT-2's tokeniser need ``--allow-downloads``; without it the run falls back to
  WikiText-2 and a book-trained 50,257-token byte-level BPE (recorded as ``dataset`` / ``tokenizer``).
* ``cpu``: the book's default on a 2-core laptop (see :func:`idea_profile` for its recipe).
* ``smoke``: seconds; a sliver of WikiText-2, a 512-token BPE and a one-layer model.

:func:`profile_differences` lists, from the config objects, every way a profile differs from
``paper``; each chapter prints that table. ``with_max_steps`` caps a run (e.g. a paper-profile run on
a GPU for 10 minutes) and compresses warmup, cosine and alpha ramp to keep their share of the run.

Training is the authors' loop (:func:`train_steps`): iterations of randomly placed windows of the
token stream rather than epochs, gradient accumulation, a warmup + cosine schedule with a floor.
Runs are cached under ``default_runs_dir(profile)/idea/`` in folders keyed by the full configuration
and the source of the training code, so a chapter re-run with unchanged code reloads the weights; a
finished run is saved with ``save_pretrained`` (``hf/``) next to its tokeniser. An interrupted run
restarts from scratch (no mid-run checkpoint).

Multi-GPU: the model is a plain ``PreTrainedModel``; ``accelerate launch`` can run a script that
wraps model, optimiser and data with ``Accelerator.prepare``. The book's loop is single process;
the tests cover only that path.
"""

from __future__ import annotations

import hashlib
import inspect
import math
import multiprocessing as mp
import os
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Sequence

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

from .data.bpe import bpe_tokenizer, lines_fingerprint, load_tokenizer
from .data.paths import REPO_ROOT
from .data.wikitext import TextSplits, downloads_allowed, load_corpus
from .experiment import default_runs_dir, peak_rss_mb
from .idea_targets import PAD_ID, REDUCTIONS, top_frequent_ids, vocabulary_mask, window_ids
from .losses import idea_gated_loss
from .metrics import distinct_n, repetition_rate, stickiness, summarise, unique_domain_density, words_of
from .models.idea import IdeaGPTConfig, IdeaGPTForCausalLM, check_gate_variant
from .profiles import check_profile
from .train import fingerprint, progress_bar, set_seed

DOMAINS_DIR = REPO_ROOT / "data" / "domains"


# --- configuration ------------------------------------------------------------------------------


#: The authors' v1 stopword strings (their ``train.py``): each is one GPT-2 token whose column of the
#: idea loss is multiplied by 0. Under another tokeniser a string that is not one token is not masked
#: (:attr:`IdeaData.stopwords_not_single_tokens` lists them).
AUTHORS_STOPWORDS: tuple[str, ...] = (" the", " The", " and", " to", " of", " a", " in", " is", ".", ",", ":", ";",
                                      "?", "!", "-", "'", '"', "\n")

DROPOUT_SCOPES: tuple[str, ...] = ("embeddings", "everywhere")
INITS: tuple[str, ...] = ("authors_v1", "gpt2_scaled")


@dataclass(frozen=True)
class GPTSize:
    n_layer: int = 6
    n_head: int = 6
    n_embd: int = 384
    block_size: int = 256
    dropout: float = 0.1
    # The authors' v1 model applies dropout once, to the embedding sum; "everywhere" adds it to the
    # attention weights and both residual branches (nanoGPT, semlm.models.idea's default).
    dropout_scope: str = "embeddings"
    # "authors_v1": every Linear / Embedding weight N(0, 0.02), biases left at PyTorch's default
    # uniform init; "gpt2_scaled": semlm.models.idea's GPT-2 scheme (zero biases, residual
    # projections scaled by 1/sqrt(2 n_layer)).
    init: str = "authors_v1"

    def __post_init__(self):
        if self.dropout_scope not in DROPOUT_SCOPES or self.init not in INITS:
            raise ValueError(f"dropout_scope must be one of {DROPOUT_SCOPES} and init one of {INITS}; got "
                             f"{self.dropout_scope!r}, {self.init!r}")


@dataclass(frozen=True)
class IdeaSettings:
    """The idea head's objective and gate (the authors' v1 ``train.py`` / ``model.py`` defaults)."""

    window: int = 20                 # K: the bag covers the next K tokens
    stopword_list: tuple[str, ...] = AUTHORS_STOPWORDS  # masked out of the idea loss (single tokens only) ...
    stopwords_top_n: int = 18        # ... or, if the list is empty, the N most frequent training tokens
    idea_weight: float = 0.01        # lambda
    pos_weight: float | None = 5.0
    # How the idea BCE is reduced over the (unmasked) vocabulary: "sum_vocab" (authors' v1, with
    # lambda 0.01) or "mean" (authors' v2, with lambda 0.1).
    idea_loss_reduction: str = "sum_vocab"
    alpha: float = 0.5               # target gate strength (and the strength used at inference)
    alpha_ramp_steps: int = 2000     # linear ramp 0 -> alpha over optimiser steps
    beta: float = -2.0
    gate_variant: str = "clamp_then_scale"
    eps: float = 1e-8

    def __post_init__(self):
        check_gate_variant(self.gate_variant)
        if self.idea_loss_reduction not in REDUCTIONS:
            raise ValueError(f"unknown idea_loss_reduction {self.idea_loss_reduction!r}; choose one of: "
                             f"{', '.join(REDUCTIONS)}")
        if self.window < 1 or self.alpha < 0 or self.beta > 0 or self.alpha_ramp_steps < 0:
            raise ValueError(f"need window >= 1, alpha >= 0, beta <= 0, ramp >= 0; got {self.window}, "
                             f"{self.alpha}, {self.beta}, {self.alpha_ramp_steps}")


@dataclass(frozen=True)
class StepTraining:
    """The authors' v1 training loop (``train.py``): iterations, not epochs.

    Every iteration draws ``micro_batch`` windows at random offsets of the training stream,
    ``accumulation`` times, and makes one AdamW step; the learning rate warms up linearly from 0
    over ``warmup_steps`` and then follows a cosine from ``lr`` to ``min_lr`` at ``max_steps``.
    """

    max_steps: int = 50_000
    micro_batch: int = 8
    accumulation: int = 4
    lr: float = 3e-4
    min_lr: float = 3e-5
    warmup_steps: int = 1000
    weight_decay: float = 0.01        # torch.optim.AdamW's default: the authors pass only the learning rate
    grad_clip: float | None = None    # their v1 loop does not clip (the paper's text says it does)
    eval_every: int = 1000            # validation perplexity on the whole validation split
    seed: int = 111

    def __post_init__(self):
        if min(self.max_steps, self.micro_batch, self.accumulation, self.eval_every) < 1 or self.lr <= 0:
            raise ValueError(f"training needs max_steps, micro_batch, accumulation, eval_every >= 1 and lr > 0; got {self}")
        if not 0 <= self.min_lr <= self.lr or self.warmup_steps < 0:
            raise ValueError(f"need 0 <= min_lr <= lr and warmup_steps >= 0; got {self.min_lr}, {self.lr}, "
                             f"{self.warmup_steps}")

    @property
    def batch_size(self) -> int:
        """Sequences per optimiser step."""
        return self.micro_batch * self.accumulation


def learning_rate(step: int, training: StepTraining) -> float:
    """The authors' ``get_lr``: linear warmup from 0, then cosine decay to ``min_lr`` (held after ``max_steps``)."""
    t = training
    if step < t.warmup_steps:
        return t.lr * step / t.warmup_steps
    if step > t.max_steps:
        return t.min_lr
    ratio = (step - t.warmup_steps) / max(1, t.max_steps - t.warmup_steps)
    return t.min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (t.lr - t.min_lr)


@dataclass(frozen=True)
class GenerationSettings:
    """The authors' evaluation (``evaluate.py``): 20 samples x 100 tokens per domain, temperature 0.6,
    repetition penalty 1.2 compounding per occurrence (``"authors"``) rather than transformers' once
    per distinct token (``"transformers"``)."""

    samples_per_prompt: int = 5      # x 4 prompts = 20 samples per domain and seed
    max_new_tokens: int = 100
    temperature: float = 0.6
    repetition_penalty: float = 1.2
    penalty_form: str = "authors"
    seeds: tuple[int, ...] = (0, 1)
    authors_samples: int = 20        # continuations per domain in the authors' protocol (one prompt each)
    authors_new_tokens: int = 100    # ... of this many tokens

    def __post_init__(self):
        if self.penalty_form not in ("authors", "transformers"):
            raise ValueError(f"penalty_form must be 'authors' or 'transformers', got {self.penalty_form!r}")


@dataclass(frozen=True)
class IdeaProfile:
    name: str
    dataset: str
    tokenizer: str                   # "gpt2" (the authors'; needs the Hub) or "book-bpe" (learnt on the train split)
    vocab_size: int
    bpe_lines: int | None            # train lines used to learn the BPE (None = all)
    train_tokens: int | None         # cap on training tokens (None = all)
    eval_tokens: int | None          # cap on validation / test tokens
    size: GPTSize
    train: StepTraining
    idea: IdeaSettings
    generation: GenerationSettings
    sweep_train_tokens: int | None   # smaller budget of the K / beta sweep runs (chapter 7) ...
    sweep_steps: int = 1000          # ... and their iterations
    sweep_samples_per_prompt: int = 2
    loop_new_tokens: int = 80
    max_workers: int = 2             # training processes (1 = in the notebook's own process)
    compare_loss_forms: bool = True  # chapter 6 also trains the other idea-loss form (v1 sum vs v2 mean)
    capped_from: int | None = None   # max_steps of the profile before a ``max_steps`` cap (None = not capped)


#: The idea BCE averaged over the (unmasked) vocabulary with weight 0.1: the authors' own v2 form
#: (their Mistral ``train.py``), instead of v1's sum over the vocabulary with weight 0.01.
MEAN_IDEA_LOSS = {"idea_loss_reduction": "mean", "idea_weight": 0.1}
SUM_IDEA_LOSS = {"idea_loss_reduction": "sum_vocab", "idea_weight": 0.01}


def idea_profile(profile: str, seed: int = 111, max_steps: int | None = None) -> IdeaProfile:
    """The profile's configuration; ``max_steps`` caps its iterations (see :func:`with_max_steps`).

    ``cpu`` recipe, for a 2-core CPU and a few minutes per model (chapter 6 reports the minutes and
    tokens per second of each build): a 2,048-token BPE, a 2-layer d = 128 GPT with 64-token blocks,
    no dropout (each model sees 1.2 M of WikiText-2's 3.5 M training tokens once, so it underfits),
    600 iterations of 32 random windows at 2e-3 -> 2e-4 with 30 warmup iterations and clipping at 1.0
    (a high learning rate without clipping risks early spikes). Measured once while choosing it (plain
    GPT, one thread, shared CPU): validation PPL 161 / 116 / 101 after 200 / 400 / 600 iterations at
    2e-3 and 161 / 115 / 100 at 3e-3, about 7,500 training tokens per second; the interpolated bigram
    reference of chapter 6 is 59, so these models do not pass the competence check and paper B's
    generation claims are "not testable" at this profile. The idea-loss form is chosen in chapter 6
    from a run of both forms.
    """
    check_profile(profile)
    paper = IdeaProfile(
        name="paper", dataset="wikitext-103", tokenizer="gpt2", vocab_size=50257, bpe_lines=None, train_tokens=None,
        eval_tokens=None, size=GPTSize(), train=StepTraining(seed=seed), idea=IdeaSettings(),
        generation=GenerationSettings(samples_per_prompt=5, max_new_tokens=100, seeds=(0,)),
        sweep_train_tokens=20_000_000, sweep_steps=5000, sweep_samples_per_prompt=5, loop_new_tokens=150,
        max_workers=1, compare_loss_forms=False)
    if profile == "cpu":
        config = replace(
            paper, name="cpu", dataset="wikitext-2", tokenizer="book-bpe", vocab_size=2048, bpe_lines=None,
            train_tokens=None, eval_tokens=40_000,
            size=GPTSize(n_layer=2, n_head=4, n_embd=128, block_size=64, dropout=0.0),
            train=StepTraining(max_steps=600, micro_batch=32, accumulation=1, lr=2e-3, min_lr=2e-4, warmup_steps=30,
                               weight_decay=0.01, grad_clip=1.0, eval_every=50, seed=seed),
            idea=replace(paper.idea, alpha_ramp_steps=150, **MEAN_IDEA_LOSS),
            generation=GenerationSettings(samples_per_prompt=3, max_new_tokens=50, seeds=(0, 1)),
            sweep_train_tokens=None, sweep_steps=150, sweep_samples_per_prompt=2, loop_new_tokens=48, max_workers=2,
            compare_loss_forms=True)
    elif profile == "smoke":
        config = replace(
            paper, name="smoke", dataset="wikitext-2", tokenizer="book-bpe", vocab_size=512, bpe_lines=3000,
            train_tokens=12_000, eval_tokens=3_000,
            size=GPTSize(n_layer=1, n_head=2, n_embd=32, block_size=32, dropout=0.0),
            train=StepTraining(max_steps=20, micro_batch=16, accumulation=1, lr=3e-3, min_lr=3e-4, warmup_steps=2,
                               weight_decay=0.01, grad_clip=1.0, eval_every=10, seed=seed),
            idea=replace(paper.idea, alpha_ramp_steps=5, **MEAN_IDEA_LOSS),
            generation=GenerationSettings(samples_per_prompt=2, max_new_tokens=12, seeds=(0,), authors_samples=2,
                                          authors_new_tokens=12),
            sweep_train_tokens=6_000, sweep_steps=8, sweep_samples_per_prompt=1, loop_new_tokens=16, max_workers=1,
            compare_loss_forms=True)
    else:
        config = paper
    return with_max_steps(config, max_steps)


def with_max_steps(profile: IdeaProfile, max_steps: int | None) -> IdeaProfile:
    """``profile`` capped at ``max_steps`` iterations (``None``: unchanged; a cap above the profile's is refused).

    The warmup, the cosine and the alpha ramp keep their share of the run (a 1,000-step cap of the
    paper's 50,000 warms up for 20 steps and ramps alpha over 40; chapter 7's sweep runs shrink by the same
    share), so a capped run is the same recipe compressed, not the first minutes of the long one.
    ``capped_from`` records the original length.
    """
    if max_steps is None:
        return profile
    if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
        raise ValueError(f"max_steps must be an int >= 1 or None, got {max_steps!r}")
    full = profile.train.max_steps
    if max_steps >= full:
        return profile
    share = max_steps / full
    train = replace(profile.train, max_steps=max_steps, warmup_steps=round(profile.train.warmup_steps * share),
                    eval_every=max(1, min(profile.train.eval_every, max_steps // 5 or 1)))
    idea = replace(profile.idea, alpha_ramp_steps=round(profile.idea.alpha_ramp_steps * share))
    return replace(profile, train=train, idea=idea, sweep_steps=max(1, round(profile.sweep_steps * share)),
                   capped_from=full)


def _flatten(prefix: str, value) -> dict:
    if hasattr(value, "__dataclass_fields__"):
        out = {}
        for name in value.__dataclass_fields__:
            out.update(_flatten(f"{prefix}.{name}" if prefix else name, getattr(value, name)))
        return out
    return {prefix: value}


def _get_path(obj, dotted: str):
    for name in dotted.split("."):
        obj = getattr(obj, name)
    return obj


#: Fields that are not part of the recipe (bookkeeping of the book's own runs).
_NOT_RECIPE = {"name", "max_workers", "capped_from", "compare_loss_forms", "train.seed", "seed"}


def profile_differences(profile, reference=None) -> list[dict]:
    """Every configuration field where ``profile`` differs from ``reference`` (the authors' run: the
    ``paper`` profile of :func:`idea_profile` by default; pass ``lora_profile("paper")`` for chapter 8).

    Computed from the two config objects (nested dataclasses flattened to dotted names), so a
    difference cannot be left out of the chapters' "our profile vs the authors' run" tables.
    """
    reference = reference or idea_profile("paper", profile.train.seed)
    theirs = _flatten("", reference)
    ours = {}
    for key, value in _flatten("", profile).items():
        # a part the authors' run does not have (e.g. the book's own backbone) is one row, not one per field
        parent = next((p for p in theirs if key.startswith(p + ".")), None)
        if parent is None:
            ours[key] = value
        elif parent not in ours:
            ours[parent] = f"{type(_get_path(profile, parent)).__name__} (the book's own)"
    return [{"setting": key, "this run": ours[key], "authors' run": theirs.get(key, "-")}
            for key in ours if key not in _NOT_RECIPE and ours[key] != theirs.get(key, "-")]


# --- data ---------------------------------------------------------------------------------------


@dataclass
class TokenBatch:
    inputs: torch.Tensor    # [B, L]      x_0 .. x_{L-1}
    targets: torch.Tensor   # [B, L]      x_1 .. x_L (PAD_ID where the text ended)
    future: torch.Tensor    # [B, L+K-1]  x_1 .. x_{L+K-1}: the next-token targets continued for the idea windows


@dataclass
class TokenBlocks:
    """Fixed-length blocks of token ids for the shared trainer.

    Row i holds tokens ``[i*L, i*L + L + K)`` of the split (``PAD_ID`` past its end): the first L
    are the inputs, tokens 1..L the next-token targets, and tokens 1..L+K-1 the idea windows, so
    the scored positions of consecutive blocks never overlap while the last positions of a block
    still see a full window (as in the authors' pipeline).
    """

    input_ids: torch.Tensor  # [N, L + K] long
    block_size: int
    window: int
    device: str = "cpu"

    @classmethod
    def from_stream(cls, ids: torch.Tensor, block_size: int, window: int, max_tokens: int | None = None) -> "TokenBlocks":
        ids = ids.long().flatten()
        if max_tokens is not None:
            ids = ids[: max_tokens + 1]
        n = (len(ids) - 1) // block_size
        if n < 1:
            raise ValueError(f"need more than {block_size} tokens to make one block, got {len(ids)}")
        padded = F.pad(ids, (0, block_size + window), value=PAD_ID)
        rows = padded.unfold(0, block_size + window, block_size)[:n]
        return cls(rows.contiguous(), block_size, window)

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    @property
    def n_tokens(self) -> int:
        return int((self.input_ids[:, 1:self.block_size + 1] != PAD_ID).sum())

    def batch(self, index) -> TokenBatch:
        rows = self.input_ids[index].to(self.device)
        L = self.block_size
        return TokenBatch(rows[:, :L].clamp_min(0), rows[:, 1:L + 1], rows[:, 1:])

    def batches(self, batch_size: int, generator: torch.Generator | None = None, shuffle: bool = False):
        order = torch.randperm(len(self), generator=generator) if shuffle else torch.arange(len(self))
        for start in range(0, len(self), batch_size):
            yield self.batch(order[start:start + batch_size])


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

    def blocks(self, split: str, profile: IdeaProfile, window: int | None = None, max_tokens: int | None = -1) -> TokenBlocks:
        cap = (profile.train_tokens if split == "train" else profile.eval_tokens) if max_tokens == -1 else max_tokens
        return TokenBlocks.from_stream(self.streams[split], profile.size.block_size,
                                       window or profile.idea.window, cap)


def _encode(tokenizer, lines: Sequence[str]) -> torch.Tensor:
    encoded = tokenizer(list(lines), add_special_tokens=False)["input_ids"]
    return torch.tensor([i for row in encoded for i in row], dtype=torch.int32)


_PREPARED: dict[tuple, IdeaData] = {}


def prepare_data(profile: IdeaProfile, runs_dir: str | Path | None = None) -> IdeaData:
    """Corpus -> BPE (trained once, cached) -> id streams (cached) and the stopword ids.

    Memoised per process (a chapter calls it once per run it trains or reloads).
    """
    runs_dir = Path(runs_dir) if runs_dir is not None else default_runs_dir(profile.name)
    key = (profile.dataset, profile.tokenizer, profile.vocab_size, profile.bpe_lines, profile.train_tokens,
           profile.eval_tokens, profile.idea.stopwords_top_n, profile.idea.stopword_list, str(runs_dir.resolve()),
           os.environ.get("SEMLM_DATA_DIR"), os.environ.get("SEMLM_ALLOW_DOWNLOADS"))
    if key not in _PREPARED or not _PREPARED[key].tokenizer_dir.is_dir():
        _PREPARED[key] = _prepare_data(profile, runs_dir)
    return _PREPARED[key]


def gpt2_tokenizer():
    """GPT-2's tokeniser (the authors'), from the local cache or, with downloads allowed, the Hub; else None."""
    from transformers import AutoTokenizer

    try:
        with quiet_transformers():
            return AutoTokenizer.from_pretrained("gpt2", local_files_only=not downloads_allowed())
    except (OSError, ValueError):
        return None


def _prepare_data(profile: IdeaProfile, runs_dir: Path) -> IdeaData:
    splits: TextSplits = load_corpus(profile.dataset)
    bpe_lines = splits.train if profile.bpe_lines is None else splits.train[: profile.bpe_lines]
    gpt2 = gpt2_tokenizer() if profile.tokenizer == "gpt2" else None
    note = splits.note
    if profile.tokenizer == "gpt2" and gpt2 is None:
        note = (note + "; " if note else "") + (f"GPT-2's tokeniser is not available offline: a {profile.vocab_size}-token "
                                                "byte-level BPE learnt on the training split replaces it")
    name = "gpt2" if gpt2 is not None else "book-bpe"
    key = fingerprint({"dataset": splits.dataset, "lines": lines_fingerprint(bpe_lines), "vocab": profile.vocab_size,
                       "train_tokens": profile.train_tokens, "eval_tokens": profile.eval_tokens, "tokenizer": name})
    folder = runs_dir / "idea" / f"tokenizer-{splits.dataset}-{name}-{profile.vocab_size}-{key}"
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
                lines = _take_chars(lines, 10 * (cap + 1) + 10_000)
            streams[split] = _encode(tokenizer, lines)
        save_file(streams, cache)
    train_ids = streams["train"] if profile.train_tokens is None else streams["train"][: profile.train_tokens]
    missing: list[str] = []
    if profile.idea.stopword_list:
        stop, missing = stopword_ids(tokenizer, profile.idea.stopword_list)
    else:
        stop = top_frequent_ids(train_ids.long(), profile.idea.stopwords_top_n)
    return IdeaData(splits.dataset, splits.requested, note, folder, streams, stop, name, missing)


def stopword_ids(tokenizer, words: Sequence[str]) -> tuple[list[int], list[str]]:
    """The ids of the ``words`` that are one token under ``tokenizer`` (as each of the authors' 18 is under
    GPT-2's), and the words that are not (left unmasked rather than masking their pieces)."""
    ids, not_single = [], []
    for word in words:
        pieces = tokenizer(word, add_special_tokens=False)["input_ids"]
        if len(pieces) == 1:
            ids.append(pieces[0])
        else:
            not_single.append(word)
    return sorted(set(ids)), not_single


def _take_chars(lines: Sequence[str], chars: int) -> list[str]:
    out, total = [], 0
    for line in lines:
        if total >= chars:
            break
        out.append(line)
        total += len(line)
    return out


# --- model and training -------------------------------------------------------------------------


def model_config(profile: IdeaProfile, vocab_size: int, idea: bool, settings: IdeaSettings | None = None,
                 eos_id: int = 0) -> IdeaGPTConfig:
    s, size = settings or profile.idea, profile.size
    return IdeaGPTConfig(vocab_size=vocab_size, n_positions=size.block_size, n_embd=size.n_embd, n_layer=size.n_layer,
                         n_head=size.n_head, dropout=size.dropout, idea_head=idea, gate_variant=s.gate_variant,
                         alpha=s.alpha if idea else 0.0, beta=s.beta, eps=s.eps,
                         bos_token_id=eos_id, eos_token_id=eos_id, pad_token_id=eos_id)


def alpha_at(step: int, settings: IdeaSettings) -> float:
    """Linear ramp of the gate strength from 0 to ``settings.alpha`` over ``alpha_ramp_steps`` optimiser steps."""
    if settings.alpha_ramp_steps == 0:
        return settings.alpha
    return settings.alpha * min(1.0, step / settings.alpha_ramp_steps)


def autocast_for(device: torch.device | str):
    """bf16 autocast on CUDA only; CPU runs in float32."""
    device = torch.device(device)
    return torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else nullcontext()


def idea_loss_fn(settings: IdeaSettings, stopword_ids: Sequence[int], idea: bool, steps_done: int = 0):
    """``loss_fn(model, batch) -> (loss, parts)``: :func:`semlm.losses.idea_gated_loss` with alpha ramped.

    Every call is one optimiser step's worth of ramp (pass ``advance=False`` for the further
    micro-batches of an accumulated step). The stopword ids become the vocabulary mask of the idea
    BCE. ``parts`` holds the token CE, the idea BCE in the settings' reduction and per counted
    column (``idea_bce_per_column``, comparable between the two reductions), and alpha.
    """
    state = {"step": steps_done}
    stop = torch.tensor(sorted(set(stopword_ids)), dtype=torch.long)
    masks: dict = {}

    def loss_fn(model, batch: TokenBatch, step: int | None = None, advance: bool = True):
        if step is not None:  # the shared trainer says which optimiser step this is
            state["step"] = steps_done + step
        alpha = alpha_at(state["step"], settings) if idea else 0.0
        if advance and step is None:
            state["step"] += 1
        with autocast_for(batch.inputs.device):
            out = model(batch.inputs, alpha=alpha)
        if not idea:
            loss, ce, _ = idea_gated_loss(out.logits, batch.targets, None, None, None, 0.0, ignore_index=PAD_ID)
            return loss, {"token_ce": ce.item()}
        vocab = out.idea_logits.shape[-1]
        key = (vocab, str(out.idea_logits.device))
        if key not in masks:
            masks[key] = vocabulary_mask(vocab, stop, out.idea_logits.device)
        positives = window_ids(batch.future, settings.window, batch.inputs.shape[1])
        loss, ce, bce = idea_gated_loss(out.logits, batch.targets, out.idea_logits, positives, masks[key],
                                        settings.idea_weight, settings.pos_weight, settings.idea_loss_reduction,
                                        ignore_index=PAD_ID)
        per_column = bce.item() / (float(masks[key].sum()) if settings.idea_loss_reduction == "sum_vocab" else 1.0)
        return loss, {"token_ce": ce.item(), "idea_bce": bce.item(), "idea_bce_per_column": per_column, "alpha": alpha}

    return loss_fn


def apply_authors_choices(model: IdeaGPTForCausalLM, size: GPTSize) -> IdeaGPTForCausalLM:
    """Give a freshly built model the profile's initialisation and dropout placement (:class:`GPTSize`).

    ``init="authors_v1"`` re-draws every Linear and Embedding weight from N(0, 0.02) and gives
    Linear biases PyTorch's default U(-1/sqrt(fan_in), 1/sqrt(fan_in)), as the authors' ``model.py``
    (its ``_init_weights`` sets weights only, and no residual scaling). ``dropout_scope="embeddings"``
    switches off the attention and residual-branch dropout, leaving the one after the embeddings.
    """
    if size.init == "authors_v1":
        with torch.no_grad():
            for module in model.modules():
                if isinstance(module, torch.nn.Linear):
                    torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
                    if module.bias is not None:
                        bound = 1 / math.sqrt(module.in_features)
                        torch.nn.init.uniform_(module.bias, -bound, bound)
                elif isinstance(module, torch.nn.Embedding):
                    torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
    if size.dropout_scope == "embeddings":
        for name, module in model.named_modules():
            if isinstance(module, torch.nn.Dropout) and name != "transformer.drop":
                module.p = 0.0
            if hasattr(module, "dropout") and isinstance(module.dropout, float):
                module.dropout = 0.0  # attention-weight dropout inside scaled_dot_product_attention
    return model


class TokenStream:
    """A training split as one id stream, sampled like the authors' ``get_batch``: windows at random offsets."""

    def __init__(self, ids: torch.Tensor, block_size: int, window: int, max_tokens: int | None = None):
        ids = ids.long().flatten()
        self.ids = ids if max_tokens is None else ids[: max_tokens + 1]
        self.block_size, self.window = block_size, window
        if len(self.ids) < block_size + window + 1:
            raise ValueError(f"need more than {block_size + window} training tokens, got {len(self.ids)}; "
                             f"raise train_tokens or lower block_size / window")

    @property
    def n_tokens(self) -> int:
        return len(self.ids)

    def sample(self, batch_size: int, generator: torch.Generator, device: str | torch.device = "cpu") -> TokenBatch:
        L, K = self.block_size, self.window
        starts = torch.randint(len(self.ids) - L - K, (batch_size,), generator=generator)
        rows = self.ids[starts[:, None] + torch.arange(L + K)].to(device)   # x_i .. x_{i+L+K-1}
        return TokenBatch(rows[:, :L], rows[:, 1:L + 1], rows[:, 1:])


def train_steps(model: IdeaGPTForCausalLM, stream: TokenStream, val_blocks: TokenBlocks, training: StepTraining,
                loss_fn, device: str = "cpu", progress: bool | str = False) -> tuple[list[dict], float]:
    """The authors' v1 loop: ``max_steps`` iterations of ``accumulation`` random micro-batches and one AdamW step.

    The learning rate of iteration i is :func:`learning_rate` (set before the step, as theirs);
    gradients are clipped only if ``training.grad_clip`` is set. Every ``eval_every`` iterations and
    at the end, the validation perplexity (gated logits) is recorded with the means of the training
    parts since the last record. Returns ``(history, train_seconds)``.
    """
    import time

    t = training
    optimizer = torch.optim.AdamW(model.parameters(), lr=t.lr, weight_decay=t.weight_decay)
    generator = torch.Generator().manual_seed(t.seed)
    torch.manual_seed(t.seed + 1)  # dropout
    history, running, spent = [], [], 0.0
    bar = progress_bar(t.max_steps, progress if isinstance(progress, str) else "train", bool(progress))
    model.train()
    start = time.perf_counter()
    for step in range(t.max_steps):
        lr = learning_rate(step, t)
        for group in optimizer.param_groups:
            group["lr"] = lr
        optimizer.zero_grad(set_to_none=True)
        logged = []
        for micro in range(t.accumulation):
            batch = stream.sample(t.micro_batch, generator, device)
            loss, parts = loss_fn(model, batch, advance=micro == 0)
            (loss / t.accumulation).backward()
            logged.append({"loss": loss.item(), **parts})
        if t.grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), t.grad_clip)
        optimizer.step()
        running.append({k: sum(row[k] for row in logged) / len(logged) for k in logged[0]} | {"lr": lr})
        bar.update(1)
        done = step + 1
        if done % t.eval_every == 0 or done == t.max_steps:
            spent += time.perf_counter() - start
            val = perplexity_of(model, val_blocks)
            history.append({"step": done, "val_ppl": val, "train_seconds": spent,
                            **{k: sum(r[k] for r in running) / len(running) for k in running[0]}})
            running = []
            bar.set_postfix(val_ppl=f"{val:.2f}")
            model.train()
            start = time.perf_counter()
    bar.close()
    model.eval()
    return history, spent


@torch.no_grad()
def perplexity_of(model, blocks: TokenBlocks, alpha: float | None = None, batch_size: int = 64) -> float:
    """exp(mean CE) of the next token over all scored positions; ``alpha=0`` gives the ungated logits."""
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    device = next(model.parameters()).device
    for batch in blocks.batches(batch_size):
        inputs, targets = batch.inputs.to(device), batch.targets.to(device)
        with autocast_for(device):
            logits = model(inputs, alpha=alpha).logits.float()
        total += F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=PAD_ID,
                                 reduction="sum").item()
        count += int((targets != PAD_ID).sum())
    model.train(was_training)
    return math.exp(total / max(count, 1))


def training_source_hash() -> str:
    """Hash of the code a trained model depends on (not of figures, metrics or decoding)."""
    here = Path(__file__).parent
    h = hashlib.sha256()
    for name in ("models/idea.py", "idea_targets.py", "data/bpe.py"):
        h.update((here / name).read_bytes())
    from .losses import idea_gated_loss as loss

    for obj in (GPTSize, IdeaSettings, StepTraining, TokenBlocks, TokenStream, model_config, alpha_at, learning_rate,
                idea_loss_fn, apply_authors_choices, train_steps, train_run, loss):
        h.update(inspect.getsource(obj).encode())
    return h.hexdigest()[:12]


@dataclass(frozen=True)
class RunSpec:
    """One model to train: ``idea=False`` is the plain GPT; ``settings`` override the profile's idea settings."""

    name: str
    idea: bool
    settings: IdeaSettings | None = None
    train_tokens: int | None = -1    # -1: the profile's budget
    steps: int | None = None         # None: the profile's max_steps (schedule and ramp scaled like with_max_steps)


@dataclass
class IdeaRun:
    name: str
    idea: bool
    config: dict
    settings: dict
    history: list[dict]
    train_seconds: float
    status: str
    run_dir: str
    val_ppl: float
    val_ppl_ungated: float | None
    steps: int
    seconds_per_step: float
    peak_rss_mb: float = 0.0

    def load(self, device: str | torch.device | None = None) -> IdeaGPTForCausalLM:
        """The trained model in eval mode, on ``device`` (default: CUDA when there is one, else CPU)."""
        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        with quiet_transformers():
            return IdeaGPTForCausalLM.from_pretrained(str(Path(self.run_dir) / "hf")).to(device).eval()


@contextmanager
def quiet_transformers():
    """No progress bars or info lines from transformers while saving / loading / generating."""
    from transformers.utils import logging

    was = logging.is_progress_bar_enabled()
    verbosity = logging.get_verbosity()
    logging.disable_progress_bar()
    logging.set_verbosity_error()
    try:
        yield
    finally:
        logging.set_verbosity(verbosity)
        if was:
            logging.enable_progress_bar()


def train_run(profile: IdeaProfile, spec: RunSpec, runs_dir: str | Path, threads: int = 1,
              device: str | None = None, progress: bool = False) -> IdeaRun:
    """Train (or reload) one model of ``spec`` and measure its validation perplexity (gated and ungated)."""
    import json

    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        if spec.steps is not None:
            profile = with_max_steps(profile, spec.steps)
        data = prepare_data(profile, runs_dir)
        settings = spec.settings or profile.idea
        if spec.steps is not None and spec.settings is not None:  # keep the ramp's share of the shorter run
            settings = replace(settings, alpha_ramp_steps=profile.idea.alpha_ramp_steps)
        tokenizer = data.tokenizer
        train_tokens = profile.train_tokens if spec.train_tokens == -1 else spec.train_tokens
        stream = TokenStream(data.streams["train"], profile.size.block_size, settings.window, train_tokens)
        val_blocks = data.blocks("valid", profile, settings.window)
        val_blocks.device = device
        tc = profile.train
        config = model_config(profile, len(tokenizer), spec.idea, settings, tokenizer.eos_token_id)
        description = {"config": config.to_dict(), "settings": asdict(settings), "idea": spec.idea,
                       "size": asdict(profile.size), "training": asdict(tc), "train_tokens": stream.n_tokens,
                       "stopwords": data.stopword_ids, "source": training_source_hash(), "dataset": data.splits_dataset,
                       "data": fingerprint(stream.ids, val_blocks.input_ids)}
        description["config"].pop("transformers_version", None)
        key = fingerprint(description)
        run_dir = Path(runs_dir) / "idea" / data.splits_dataset / f"{spec.name}-seed{tc.seed}-{key}"
        final = run_dir / "final.json"
        if final.is_file() and (run_dir / "hf" / "config.json").is_file():
            saved = json.loads(final.read_text())
            history, seconds, status = saved["history"], saved["train_seconds"], "loaded"
            model = IdeaGPTForCausalLM.from_pretrained(str(run_dir / "hf")).to(device)
        else:
            set_seed(tc.seed)
            model = apply_authors_choices(IdeaGPTForCausalLM(config), profile.size).to(device)
            history, seconds = train_steps(model, stream, val_blocks, tc,
                                           idea_loss_fn(settings, data.stopword_ids, spec.idea), device,
                                           spec.name if progress else False)
            status = "trained"
            with quiet_transformers():
                model.save_pretrained(str(run_dir / "hf"))
                tokenizer.save_pretrained(str(run_dir / "hf"))
            final.write_text(json.dumps({"history": history, "train_seconds": seconds, "description": description},
                                        indent=2, default=str))
        model.eval()
        val_ppl = perplexity_of(model, val_blocks)
        ungated = perplexity_of(model, val_blocks, alpha=0.0) if spec.idea else None
        return IdeaRun(spec.name, spec.idea, config.to_dict(), asdict(settings), history, seconds, status,
                       str(run_dir), val_ppl, ungated, tc.max_steps, seconds / max(tc.max_steps, 1), peak_rss_mb())
    finally:
        torch.set_num_threads(previous)


#: The two idea-loss forms of the authors' code: v1 (WikiText GPT) and v2 (Mistral LoRA).
LOSS_FORMS = {"sum": SUM_IDEA_LOSS, "mean": MEAN_IDEA_LOSS}


def main_run_specs(profile: IdeaProfile) -> list[RunSpec]:
    """Chapter 6's models: the plain GPT and the gated GPT, the latter in both loss forms when
    ``profile.compare_loss_forms`` (``gated-sum``, ``gated-mean``), else in the profile's form (``gated``)."""
    specs = [RunSpec("baseline", False)]
    if profile.compare_loss_forms:
        specs += [RunSpec(f"gated-{form}", True, replace(profile.idea, **kw)) for form, kw in LOSS_FORMS.items()]
    else:
        specs.append(RunSpec("gated", True))
    return specs


def main_runs(profile: IdeaProfile, workers: int = 1, runs_dir: str | Path | None = None) -> tuple[dict, str]:
    """Train or reload :func:`main_run_specs`; ``runs["gated"]`` is the chosen gated model. With both loss
    forms trained, the choice is the form with the lower validation perplexity (gated logits): the
    evidence chapter 6 reports. Returns ``(runs, chosen run name)``; chapters 6 and 7 share it."""
    runs = train_runs(profile, main_run_specs(profile), runs_dir, workers)
    if "gated" in runs:
        return runs, "gated"
    chosen = min((f"gated-{form}" for form in LOSS_FORMS), key=lambda name: runs[name].val_ppl)
    runs["gated"] = runs[chosen]
    return runs, chosen


def train_runs(profile: IdeaProfile, specs: Sequence[RunSpec], runs_dir: str | Path | None = None,
               workers: int = 1) -> dict[str, IdeaRun]:
    """Train every spec (in ``workers`` spawned processes with one thread each when > 1)."""
    runs_dir = Path(runs_dir) if runs_dir is not None else default_runs_dir(profile.name)
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise ValueError(f"run names must be unique, got {names}")
    prepare_data(profile, runs_dir)  # tokeniser and id cache once, before the workers read them
    workers = max(1, min(workers, len(specs), profile.max_workers))
    if workers == 1:
        return {s.name: train_run(profile, s, runs_dir) for s in specs}
    with ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn")) as pool:
        futures = {s.name: pool.submit(train_run, profile, s, runs_dir, 1, "cpu") for s in specs}
        return {name: f.result() for name, f in futures.items()}


# --- domains and generation ---------------------------------------------------------------------


@dataclass
class Domain:
    name: str
    prompts: list[str]
    terms: list[str] = field(default_factory=list)


def load_domains(folder: str | Path = DOMAINS_DIR) -> dict[str, Domain]:
    """``<name>.txt`` files with ``[prompts]`` and ``[terms]`` sections (see data/domains/README.md)."""
    folder = Path(folder)
    files = sorted(folder.glob("*.txt"))
    if not files:
        raise FileNotFoundError(f"no domain files (*.txt) in {folder}; see data/domains/README.md")
    domains = {}
    for path in files:
        section, prompts, terms = None, [], []
        for raw in path.read_text().splitlines():
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            if line in ("[prompts]", "[terms]"):
                section = line
            elif section == "[prompts]":
                prompts.append(" " + line)
            elif section == "[terms]":
                terms += line.lower().split()
            else:
                raise ValueError(f"{path}: text before a [prompts] or [terms] header: {line!r}")
        if not prompts or not terms:
            raise ValueError(f"{path} needs both a [prompts] and a [terms] section")
        domains[path.stem] = Domain(path.stem, prompts, terms)
    return domains


def stopwords() -> frozenset[str]:
    from spacy.lang.en.stop_words import STOP_WORDS

    return frozenset(STOP_WORDS)


@torch.no_grad()
def generate_texts(model, tokenizer, prompts: Sequence[str], samples_per_prompt: int, max_new_tokens: int,
                   seed: int, alpha: float | None = None, do_sample: bool = True, temperature: float = 0.6,
                   repetition_penalty: float | None = 1.2, logits_processor=None,
                   penalty_form: str = "authors") -> list[dict]:
    """Continuations of every prompt (one left-padded batch), via transformers' ``generate()``.

    ``penalty_form="authors"``: the repetition penalty compounds per occurrence over the model's
    context window (:class:`~semlm.decoding.compounding_penalty.CompoundingRepetitionPenalty`, the
    authors' ``evaluate.py``); ``"transformers"``: transformers' once-per-token penalty. Left padding
    (several prompts of different lengths) counts as occurrences of the pad token in both.
    Each sample carries ``text`` (the continuation) and ``full_text`` (prompt + continuation).
    """
    from transformers import LogitsProcessorList

    from .decoding.compounding_penalty import CompoundingRepetitionPenalty

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
    with quiet_transformers():
        out = model.generate(batch.input_ids.to(model.device), attention_mask=batch.attention_mask.to(model.device),
                             **kwargs)
    new = out[:, batch.input_ids.shape[1]:].cpu()
    return [{"prompt": prompts[i // samples_per_prompt], "seed": seed, "ids": new[i].tolist(),
             "text": tokenizer.decode(new[i], skip_special_tokens=True),
             "full_text": tokenizer.decode(out[i].cpu(), skip_special_tokens=True)} for i in range(len(new))]


def score_generation(sample: dict, domain: Domain, stop: frozenset[str]) -> dict:
    words = words_of(sample["text"])
    return {"stickiness": stickiness(words, domain.terms, stop),
            "unique_density": unique_domain_density(words, domain.terms),
            "distinct_1": distinct_n(words, 1), "distinct_2": distinct_n(words, 2),
            "repetition": repetition_rate(words, 4), "token_repetition": repetition_rate(sample["ids"], 4)}


METRIC_NAMES = ("stickiness", "unique_density", "distinct_1", "distinct_2", "repetition", "token_repetition")


def domain_retention(model, tokenizer, domains: dict[str, Domain], generation: GenerationSettings,
                     alpha: float | None = None, samples_per_prompt: int | None = None) -> dict:
    """Per domain: every sample's scores and their means with 95% intervals over samples (all seeds pooled).

    All domains' prompts decode in one batch per seed. ``by_seed`` keeps the spread of the per-seed means.
    """
    stop, out = stopwords(), {}
    n = samples_per_prompt or generation.samples_per_prompt
    prompts = [(name, p) for name, domain in domains.items() for p in domain.prompts]
    rows = {name: [] for name in domains}
    for seed in generation.seeds:
        samples = generate_texts(model, tokenizer, [p for _, p in prompts], n, generation.max_new_tokens, seed, alpha,
                                 temperature=generation.temperature, repetition_penalty=generation.repetition_penalty,
                                 penalty_form=generation.penalty_form)
        for i, sample in enumerate(samples):
            name = prompts[i // n][0]
            rows[name].append({**sample, "domain": name, **score_generation(sample, domains[name], stop)})
    for name, domain_rows in rows.items():
        summary = {m: summarise([r[m] for r in domain_rows]) for m in METRIC_NAMES}
        by_seed = {m: summarise([summarise([r[m] for r in domain_rows if r["seed"] == s])["mean"]
                                 for s in generation.seeds]) for m in METRIC_NAMES}
        out[name] = {"summary": summary, "by_seed": by_seed, "samples": domain_rows}
    return out


# --- the authors' evaluation protocol -------------------------------------------------------------


#: The 15 words the authors' ``evaluate.py`` removes before computing stickiness.
AUTHORS_EVAL_STOPWORDS = frozenset({"the", "a", "an", "and", "or", "but", "in", "on", "at", "to", "for", "of", "with",
                                    "is", "was"})


def authors_stickiness(text: str, terms) -> float:
    """The authors' ``calculate_stickiness_ratio``: lower-case, drop "." and ",", split on whitespace, remove
    their 15 stopwords; domain hits / remaining words (0.0 if none remain). Applied to prompt + continuation."""
    words = text.lower().replace(".", "").replace(",", "").split()
    content = [w for w in words if w not in AUTHORS_EVAL_STOPWORDS]
    if not content:
        return 0.0
    vocabulary = set(terms)
    return sum(w in vocabulary for w in content) / len(content)


AUTHORS_METRICS = ("authors_stickiness", "unique_density", "distinct_2")


def authors_protocol(model, tokenizer, domains: dict, generation: GenerationSettings, alpha: float | None = None) -> dict:
    """The authors' evaluation: per domain one prompt, ``authors_samples`` continuations of ``authors_new_tokens`` at
    temperature ``generation.temperature`` with the compounding repetition penalty, scored by
    :func:`authors_stickiness` on prompt + continuation. ``domains``: ``{name: {"prompt", "terms"}}``
    (:data:`semlm.reference.PAPER_B_EVAL_DOMAINS`). Also the paper's density (distinct domain terms per
    100 words) and distinct-2, on the continuation's words. One batch per domain and seed (no padding).
    """
    out, samples = {}, generation.authors_samples
    per_seed = max(1, math.ceil(samples / len(generation.seeds)))
    for name, domain in domains.items():
        rows = []
        for seed in generation.seeds:
            for sample in generate_texts(model, tokenizer, [domain["prompt"]], per_seed, generation.authors_new_tokens, seed,
                                         alpha, temperature=generation.temperature,
                                         repetition_penalty=generation.repetition_penalty, penalty_form="authors"):
                words = words_of(sample["text"])
                rows.append({**sample, "domain": name,
                             "authors_stickiness": authors_stickiness(sample["full_text"], domain["terms"]),
                             "unique_density": unique_domain_density(words, domain["terms"]),
                             "distinct_2": distinct_n(words, 2)})
        rows = rows[:samples]
        out[name] = {"summary": {m: summarise([r[m] for r in rows]) for m in AUTHORS_METRICS}, "samples": rows}
    return out


def difference_interval(a: Sequence[float], b: Sequence[float]) -> dict:
    """Mean of ``a`` minus mean of ``b`` with a Welch 95% interval (independent samples; NaNs dropped), as
    JSON: :meth:`semlm.records.Interval.welch`."""
    from .records import Interval

    return Interval.welch(a, b).to_dict()


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
    """Does every model beat the bigram reference by the margin ``ratio`` (PPL <= ratio x bigram PPL)?

    Why a bigram: a model that cannot clearly beat word-pair counts has not learnt to use context
    beyond the previous token, so its 100-token continuations are not text whose topic can drift or
    stay; judging topic retention or diversity on them measures noise. The 25% margin asks for a
    gain of at least ln(1/0.75) = 0.29 nats per token over the bigram counts.
    """
    worst = max(model_ppls, key=model_ppls.get)
    passes = all(p <= ratio * reference["bigram_val_ppl"] for p in model_ppls.values())
    return {**reference, "model_val_ppl": dict(model_ppls), "threshold_ratio": ratio,
            "threshold_ppl": ratio * reference["bigram_val_ppl"], "worst_model": worst,
            "worst_ratio": model_ppls[worst] / reference["bigram_val_ppl"], "passes": passes}
