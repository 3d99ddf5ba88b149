"""Paper B's sparse decoding (its Section 6, "Sparse Inference"), built and measured.

The paper notes that the gate sits at its clamp for most of the vocabulary and that decoding could skip
those tokens. Here the idea head runs over the whole vocabulary (it is what decides), then the token head's
matmul reads only the rows of the tokens whose gate is above the clamp plus a budget of the rest; every
other token gets -inf. :func:`sparse_decoding_record` measures what that buys (time per generated token
against the full head, same loop, one thread) and what it costs (per-step KL from the full model's
next-token distribution, and the stickiness and distinct-2 of samples drawn with the same seeds).
"""

from __future__ import annotations

import itertools
import statistics
import time
from dataclasses import replace
from typing import Iterable

import torch
from transformers import DynamicCache

from semlm.core.metrics import distinct_n, stickiness, summarise, words_of
from semlm.core.runs import RunContext, nested, run_many
from semlm.idea.compounding_penalty import CompoundingRepetitionPenalty
from semlm.idea.model import IdeaGate, gated_logits
from semlm.idea.profiles import GenerationSettings, IdeaProfile
from semlm.idea.generation import Domain, load_domains
from semlm.idea.wikitext_experiment import IDEA, idea_data, idea_gating_runs, with_chosen_gated

QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)


def decoding_gate(model) -> IdeaGate:
    """The model's gate, which sparse decoding needs on (alpha > 0)."""
    gate = model.gate
    if gate.off:
        raise ValueError(f"sparse decoding needs a gate: alpha must be > 0, got {gate.alpha}")
    return gate


def _distribution(values: torch.Tensor) -> dict:
    qs = torch.quantile(values.double(), torch.tensor(QUANTILES, dtype=torch.double)).tolist()
    return {"mean": values.double().mean().item(), **{f"q{round(100 * q):02d}": v for q, v in zip(QUANTILES, qs)},
            "n": values.numel()}


@torch.no_grad()
def clamp_share(model, batches: Iterable[torch.Tensor]) -> dict:
    """Per position, the share of the vocabulary whose gate sits at the clamp: mean, quantiles and ``n`` over
    the positions of ``batches`` ([B, L] ids). The token head is not run."""
    gate, shares = decoding_gate(model), []
    floor = gate.clamped_value()
    for ids in batches:
        shares.append((gate.apply(model.idea_head(model.transformer(ids))) <= floor).float().mean(-1).flatten())
    return _distribution(torch.cat(shares))


def full_gated_logits(model, hidden: torch.Tensor) -> torch.Tensor:
    """Gated logits [B, V] from final hidden states [B, d], as the model's forward computes them."""
    return gated_logits(model.lm_head(hidden), model.idea_head(hidden), model.gate)


def sparse_gated_logits(model, hidden: torch.Tensor, budget: int) -> torch.Tensor:
    """Gated logits [B, V] of the kept tokens, -inf elsewhere; the token head reads only the kept rows.

    Kept: every token whose gate is above the clamp, plus the ``budget`` clamped tokens of highest idea
    probability. Why those: at the clamp every token gets the same penalty, so only the token head (the
    work to skip) could rank them; the idea probability is the one free signal left, and it recovers more
    of the full model's mass per computed row than a list of the most frequent tokens (cpu-long, seed 111,
    teacher-forced: budgets 64 / 256 by idea probability compute 163 / 355 rows and leave a KL of 0.44 / 0.23
    nats; the 256 most frequent tokens instead, 268 rows and 0.39).
    The gate grows with the idea logit, so the kept tokens are each row's top ``n_above + budget`` idea logits.
    """
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
        raise ValueError(f"budget must be an int >= 0 (clamped tokens computed anyway), got {budget!r}")
    decoding = decoding_gate(model)
    idea = model.idea_head(hidden)
    gate = decoding.apply(idea)
    keep = ((gate > decoding.clamped_value()).sum(-1) + budget).clamp(max=gate.shape[-1])
    index = idea.topk(int(keep.max()), dim=-1).indices                      # [B, k], kept tokens first
    rows = model.lm_head.weight.index_select(0, index.flatten()).view(*index.shape, -1)  # [B, k, d]: k rows only
    token = (rows @ hidden.unsqueeze(-1)).squeeze(-1)
    chosen = torch.arange(index.shape[1], device=index.device) < keep[:, None]
    values = torch.where(chosen, token + gate.gather(1, index), float("-inf"))
    return torch.full_like(gate, float("-inf")).scatter_(1, index, values)


def step_divergence(sparse: torch.Tensor, full: torch.Tensor) -> torch.Tensor:
    """[B, 3]: kept-set size, the full model's mass outside it, and KL(sparse || full) of the next-token
    distributions (temperature 1). The sparse one is the full one restricted to the kept set and renormalised,
    so the KL equals -log(full mass on the kept set); computed here from its definition."""
    log_p, log_q = torch.log_softmax(full.float(), -1), torch.log_softmax(sparse.float(), -1)
    kept = torch.isfinite(sparse)
    kl = torch.where(kept, log_q.exp() * (log_q - log_p), 0.0).sum(-1)
    outside = -torch.expm1(torch.logsumexp(log_p.masked_fill(~kept, float("-inf")), -1))
    return torch.stack([kept.sum(-1).float(), outside, kl], -1)


@torch.no_grad()
def decode(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, max_new_tokens: int,
           budget: int | None = None, temperature: float | None = None, repetition_penalty: float | None = None,
           generator: torch.Generator | None = None, divergence: list | None = None) -> torch.Tensor:
    """The new tokens [B, N] of left-padded prompts, with a KV cache: greedy (``temperature`` None) or sampled,
    after the authors' compounding repetition penalty if given. ``budget`` None: the full head; else
    :func:`sparse_gated_logits`. ``divergence`` (a list) gets each step's :func:`step_divergence`."""
    if input_ids.shape[1] + max_new_tokens > model.config.n_positions:
        raise ValueError(f"prompt ({input_ids.shape[1]}) + {max_new_tokens} new tokens exceed "
                         f"n_positions={model.config.n_positions}")
    penalty = CompoundingRepetitionPenalty(repetition_penalty, model.config.n_positions) if repetition_penalty else None
    cache, ids, mask = DynamicCache(), input_ids, attention_mask
    for step in range(max_new_tokens):
        hidden = model.transformer(ids if step == 0 else ids[:, -1:], mask, cache)[:, -1]
        scores = full_gated_logits(model, hidden) if budget is None else sparse_gated_logits(model, hidden, budget)
        if divergence is not None:
            divergence.append(step_divergence(scores, full_gated_logits(model, hidden)))
        if penalty is not None:
            scores = penalty(ids, scores)
        if temperature is None:
            token = scores.argmax(-1)
        else:
            token = torch.multinomial(torch.softmax(scores / temperature, -1), 1, generator=generator)[:, 0]
        ids, mask = torch.cat([ids, token[:, None]], 1), torch.cat([mask, mask.new_ones(len(mask), 1)], 1)
    return ids[:, input_ids.shape[1]:]


def _median_seconds(jobs: dict, repeats: int) -> dict[str, float]:
    """Median wall seconds of each job over ``repeats`` rounds after a warm-up round; the jobs alternate."""
    times = {name: [] for name in jobs}
    for _ in range(repeats + 1):
        for name, job in jobs.items():
            start = time.perf_counter()
            job()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(seconds[1:]) for name, seconds in times.items()}


@torch.no_grad()
def sparse_decoding_record(model, tokenizer, domains: dict[str, Domain], batches: Iterable[torch.Tensor],
                           budget: int = 64, generation: GenerationSettings = GenerationSettings(),
                           repeats: int = 9) -> dict:
    """The full and the sparse head of an idea-gated model compared, on one thread.

    ``clamp_share`` over the positions of ``batches``; ``samples`` (stickiness, distinct-2 as in
    :func:`~semlm.idea.generation.domain_retention`) of every domain prompt decoded by both paths with
    ``generation``'s settings and the same seeds, new tokens capped to fit ``n_positions``; over the sparse
    samples' steps, the mean kept-set size, full-model mass outside it and ``mean_step_kl``; timed greedy
    decoding of the first prompt alone (``seconds_per_token``, median of ``repeats``, the paths alternating),
    whose ratio is ``speedup_per_token``, and the same ratio for the two heads alone (``head_speedup``, on each
    prompt's last hidden state in turn).
    """
    from spacy.lang.en.stop_words import STOP_WORDS  # the stopwords of the book's stickiness

    threads, n = torch.get_num_threads(), generation.samples_per_prompt
    torch.set_num_threads(1)
    try:
        record = {"budget": budget, "vocab_size": model.config.vocab_size, "clamp_share": clamp_share(model, batches)}
        prompts = [(domain, prompt) for domain in domains.values() for prompt in domain.prompts]
        tokenizer.padding_side = "left"
        batch = tokenizer([p for _, p in prompts for _ in range(n)], return_tensors="pt", padding=True)
        new = min(generation.max_new_tokens, model.config.n_positions - batch.input_ids.shape[1])
        paths, steps, rows = {"full": None, "sparse": budget}, [], {"full": [], "sparse": []}
        for seed, (path, b) in itertools.product(generation.seeds, paths.items()):
            out = decode(model, batch.input_ids, batch.attention_mask, new, b, generation.temperature,
                         generation.repetition_penalty, torch.Generator().manual_seed(seed),
                         steps if b is not None else None)
            for i, words in enumerate(words_of(text) for text in tokenizer.batch_decode(out, skip_special_tokens=True)):
                rows[path].append({"stickiness": stickiness(words, prompts[i // n][0].terms, STOP_WORDS),
                                   "distinct_2": distinct_n(words, 2)})
        kept, outside, kl = torch.cat(steps).mean(0).tolist()
        one = tokenizer(prompts[0][1], return_tensors="pt")
        seconds = _median_seconds({path: lambda b=b: decode(model, one.input_ids, one.attention_mask, new, b)
                                   for path, b in paths.items()}, repeats)
        hidden = model.transformer(batch.input_ids, batch.attention_mask)[:, -1].split(1)  # each prompt's last
        heads = _median_seconds({"full": lambda: [full_gated_logits(model, h) for h in hidden],
                                 "sparse": lambda: [sparse_gated_logits(model, h, budget) for h in hidden]}, repeats)
    finally:
        torch.set_num_threads(threads)
    return record | {
        "kept_tokens": kept, "kept_share": kept / model.config.vocab_size, "mass_outside": outside,
        "mean_step_kl": kl, "seconds_per_token": {path: s / new for path, s in seconds.items()},
        "speedup_per_token": seconds["full"] / seconds["sparse"], "head_speedup": heads["full"] / heads["sparse"],
        "samples": {path: {m: summarise([r[m] for r in scored]) for m in ("stickiness", "distinct_2")}
                    for path, scored in rows.items()},
        "settings": {"new_tokens": new, "temperature": generation.temperature, "seeds": list(generation.seeds),
                     "repetition_penalty": generation.repetition_penalty, "samples": len(prompts) * n,
                     "threads": 1, "repeats": repeats}}


def bench_section(config: IdeaProfile) -> dict:
    """``bench.json``'s ``idea.sparse_decoding``: :func:`sparse_decoding_record` of chapter 6's gated model of
    ``config`` (got through the run cache as chapter 6 does: loaded from a build, else trained), on its
    validation blocks and the book's domains, one sample per prompt and seed."""
    specs = [spec for spec in idea_gating_runs(config) if spec.name != "baseline"]
    runs, chosen = with_chosen_gated(nested(run_many(IDEA, specs, RunContext(config.name, progress=False)), "name"))
    data = idea_data(config)
    batches = (batch.inputs for batch in data.blocks("valid", config).batches(64))
    record = sparse_decoding_record(runs["gated"].load("cpu"), data.tokenizer, load_domains(), batches,
                                    generation=replace(config.generation, samples_per_prompt=1))
    return {"profile": config.name, "model": chosen, "val_ppl": runs["gated"].metrics.val_ppl, **record}


def table(records: dict[str, dict]):
    """One row per ``{label: sparse_decoding_record}``: the clamp share, what the sparse head keeps and loses,
    its speed-up, and the samples' stickiness and distinct-2 from both heads."""
    import pandas as pd

    def row(r: dict) -> dict:
        full, sparse = r["samples"]["full"], r["samples"]["sparse"]
        return {"budget": r["budget"], "at clamp (mean)": r["clamp_share"]["mean"], "kept share": r["kept_share"],
                "full mass outside": r["mass_outside"], "mean step KL (nats)": r["mean_step_kl"],
                "speed-up per token": r["speedup_per_token"], "head speed-up": r["head_speedup"],
                "stickiness full": full["stickiness"]["mean"], "stickiness sparse": sparse["stickiness"]["mean"],
                "distinct-2 full": full["distinct_2"]["mean"], "distinct-2 sparse": sparse["distinct_2"]["mean"]}

    return pd.DataFrame({label: row(r) for label, r in records.items()}).T
