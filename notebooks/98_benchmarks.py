# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     notebook_metadata_filter: -jupytext.text_representation
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Benchmarks
#
# How long does the whole synthetic experiment of paper A take on the machine that
# built this book? "Whole" means what the authors' script does: generate the corpus,
# train the baseline and the fusion model for 6 epochs at the paper's size, and
# evaluate both. Chapter 2 has already trained these two models in this build, so the
# book does not train them again: the training time below is the one the build measured
# when chapter 2 trained them (side by side, one thread each), plus the loading and
# evaluation measured here ({glue:text}`bench_source`). `make bench` runs the same
# function from the command line (`--fresh`: train both again from an empty run folder)
# and writes `book/_build/metrics/bench.json`.
#
# Our target is 60 seconds on a 2-core laptop CPU. We also time controlled decoding:
# 200 sentences under a hard positive request, decoded as one batch by the trained fusion
# model (target: at most one second; `semlm.fusion.decoding`). With the `smoke` profile the
# numbers below are for a toy-sized run and say nothing about the target. How this compares
# with the authors' own script is measured separately, on one machine, further down.

# %% tags=["parameters"]
# "smoke" runs in seconds; "cpu" times the book-scale models: minutes
profile = "cpu"
seed = 111
workers = 2
# a file written by `python -m semlm.bench --authors-script ... --out FILE`;
# "" = the comparison kept in this build's bench.json, if any
authors_comparison_file = ""

# %% tags=["hide-input"]
import pandas as pd

from semlm import book, plots
from semlm.book import bench
from semlm.idea import sparse_decoding
from semlm.book import recorded as rec

# the benchmark writes its own record (bench.json): this chapter never closes
chapter = book.open("98_benchmarks", profile=profile, seed=seed,
                    workers=workers, declared=("authors_comparison_file",))
profile = chapter.profile

# %%
record = bench.run_benchmark(profile, seed, workers)

# %% tags=["remove-input"]
chapter.glue(bench.chapter_numbers(record, profile))
chapter.glue(bench.sparse_numbers(record["idea"].get("sparse_decoding")))

# %%
bench.summary_frame(record).style.format("{:.1f}", na_rep="–")

# %%
bench.per_model_frame(record)

# %%
bench.flops_frame(record).style.format("{:.3g}", na_rep="–")

# %% [markdown]
# **Where the time goes.** Each model trains in its own one-thread worker, so the
# ceiling of one model is one core. We count a model's floating-point operations per
# position from its configuration (`semlm.book.flops.synthetic_forward_flops_per_position`: the
# attention projections and scores, the MLP, the tied output layer and, for fusion, the
# semantic input and the auxiliary head; a training step is three forward passes' worth)
# and divide by the measured training time. The peak is measured too: the best FLOP/s of
# one large float32 matrix product on one thread,
# {glue:text}`bench_peak_measured:.0f` GFLOP/s (the datasheet-style formula,
# {glue:text}`bench_peak_formula`, gives {glue:text}`bench_peak_nominal:.0f` GFLOP/s per
# core). The fusion model, trained in {glue:text}`bench_autocast` (the profile's precision on
# this CPU, below), reached {glue:text}`bench_fusion_share:.0f`% of that float32
# peak (bf16 matrix products can go past it): its matrices are small (d = 128, batches of about a thousand positions), and a
# good part of each step is element-wise work that the count leaves out (dropout,
# LayerNorm, the optimiser). Batches are trimmed to their longest sentence
# (`LMTensors.batches`), but almost every batch of 64 holds a two-clause sentence, so
# {glue:text}`bench_padding:.0f`% of the positions computed are still padding. Bucketing
# sentences by length would skip most of it; the next table shows why it stays off.
#
# **Length bucketing and bf16: do they change the results?** Bucketing changes which
# sentences share a batch (and so the training trajectory), and bf16 autocast changes
# the numerics. The table below trains both models over three seeds in each variant and
# compares the validation perplexity with the float32, plain-shuffle reference: a
# variant is *within* when its mean lies inside the reference's 95% seed interval for
# both models and both perplexities, *faster* when its training CPU time is lower. The
# same seed starts every variant from the same weights, so the table also gives the
# change of perplexity paired by seed: a shift that three seeds' wide intervals hide
# shows there. The synthetic sentences have only two lengths (one clause or two), so
# bucketing makes batches of short sentences only and of long ones only; whether that
# moves the perplexity is what the paired column answers. It runs at the profile named
# above the table (`smoke` by default, so the build stays short).
#
# At `smoke` the models are too small (d = 32) for bf16 to pay. At the paper's size it
# does, on a CPU that multiplies bf16 matrices natively, and that is what decides the
# precision of the `cpu` profile (chapter 2). The second table is that comparison at the
# `cpu` scale, float32 against bf16 only, **recorded** once by
# `python -m semlm.bench --only precision --variants-profile cpu` (six models per variant,
# several minutes; its machine, date and commit are under the table) rather than run by every
# build. On a CPU without native bf16 the profile stays float32: there oneDNN emulates bf16
# and a step gets slower, not faster. The recording shows it on its one machine: the line
# under its table gives the fusion model's bf16 / float32 step time with oneDNN as it is and
# capped (`ONEDNN_MAX_CPU_ISA`) at AVX-512 without its BF16 instructions and at AVX2, the
# instruction set of most laptops.

# %%
variants, caption = bench.training_variants_frame(record)
print(caption)
variants

# %%
recorded_precision, precision_note = bench.recorded_precision_frame(record)
print(precision_note)
recorded_precision

# %% [markdown]
# Paper B's models were compared the same way, recorded once by
# `python -m semlm.bench --only precision-idea`: chapter 6's plain and gated GPT over three
# seeds (validation perplexity), chapter 9's topic models over five (excess drift), and the
# X-ray of chapter 7 on each gated GPT. The rule printed under the table was written into the
# record before its numbers. It decided the `cpu` profile of chapters 6 and 7: bf16 where the
# CPU computes it natively. Chapter 9's models, much smaller, trained slower in bf16, so they
# stay in float32 (the last column). The X-ray line compares how many top tokens float32 and
# bf16 share with how many two float32 seeds share.

# %%
idea_precision, idea_precision_note = bench.recorded_idea_precision_frame()
print(idea_precision_note)
idea_precision

# %% [markdown]
# ## Idea-gated GPT: what the gate costs (paper B)
#
# The idea head adds a $d \times d$ layer and a second $d \times V$ projection to every position,
# as large as the token head. So the gated model *should* be slower, and the question is only
# whether it is slower by more than the extra arithmetic. We count the floating-point operations
# of both models from their configs (`semlm.book.flops.forward_flops_per_position`: the attention
# projections and scores, the MLP, the token head and the idea head; a multiply-add counts two;
# a training step is three forward passes' worth) and put the FLOP ratio, gated over plain, next to
# the measured time ratio. Two workloads at this profile's chapter-6 size, random weights (the
# cost of a step does not depend on what the model has learnt), plain and gated timed in turn:
#
# * a training step: forward with the book's alpha-gated loss, backward, AdamW;
# * cached generation: greedy `generate()` with the KV cache, time per new token (the time for
#   many new tokens minus the time for one, so the prompt's prefill is left out).
#
# The targets: the time ratio at most 1.05 times the FLOP ratio for training and 1.1
# times for generation. These are printed with a verdict, not enforced by a test: timings on a
# shared machine move by tens of percent from run to run.

# %%
bench.idea_ratio_frame(record["idea"])

# %% [markdown]
# Where the FLOPs go, per position of the gated model (forward, this profile's sizes; the idea
# head's share is what the ratio above is made of):

# %%
bench.idea_flop_parts_frame(record["idea"]).style.format(
    {"FLOPs per position (forward)": "{:,.0f}", "share": "{:.1%}"}
)

# %% [markdown]
# On {glue:text}`idea_bench_device` a training step of the gated model costs
# {glue:text}`idea_step_over:.2f` times what its FLOP ratio of {glue:text}`idea_step_flop_ratio:.2f`
# predicts, which {glue:text}`idea_step_verdict` the 1.05 target; a cached generation step costs
# {glue:text}`idea_gen_over:.2f` times its FLOP ratio ({glue:text}`idea_gen_verdict` the 1.1 target).
# The FLOP count includes the work that is linear in the vocabulary rather
# than in $d \times V$: the gate (a sigmoid, a log, a clamp, a scale and an
# add over all $V$ logits of every position, and its backward) and the idea
# loss (a binary cross-entropy over all $V$ columns, forward and backward).
# That work is a small share of the FLOPs but a larger
# share of the time at a small $d$: each pass over a $B \times T \times V$
# tensor is limited by memory traffic, not arithmetic, and only fused kernels
# would bring it near its FLOP share. The gate and the loss here have hand-written
# backward passes that make as few of those passes as PyTorch's separate
# operations allow. In generation only one position per sequence is computed
# and the fixed per-step cost of `generate()` is shared by both models, so the
# time ratio there stays below the FLOP ratio at small sizes. A GPU run
# (`make test-gpu`, recorded in
# `book/recorded/`) reports the same two ratios with bf16 autocast.

# %% [markdown]
# ### Recorded GPU run
#
# The table below is **not computed by this build**. It is what `make test-gpu` (`.ci/run-gpu`)
# measured on a GPU machine at the `paper` size, in bf16 autocast, and stored in
# `book/recorded/<gpu>/` with the GPU, the date and the git commit it ran. It stays beside the
# numbers above, never mixed into them; when nothing is recorded it says so.

# %%
recorded, recorded_note = rec.recorded_bench_frame()
print(recorded_note)
recorded if not recorded.empty else None

# %% [markdown]
# ### Sparse decoding: skip the tokens the gate clamps
#
# Paper B's discussion notes that the gate sits at its clamp for most of the vocabulary, so a
# decoder could skip those tokens. We test that idea rather than assume it. The sparse head
# (`semlm.idea.sparse_decoding`) computes the token head only for the tokens whose gate is above
# the clamp, plus a stated budget of the clamped ones with the highest idea probability;
# every other token gets probability zero. Its next-token distribution is the full model's,
# restricted to the kept tokens and renormalised, so its per-step KL divergence from the full
# model is minus the log of the full model's mass on the kept set. The cost is honest only if
# the speed-up is measured beside that divergence and beside what the samples become
# (stickiness and distinct-2, the same seeds for both heads).
#
# This build, on {glue:text}`sparse_model`: on average {glue:text}`sparse_clamp:.1%` of the
# vocabulary sits at the clamp. With a budget of {glue:text}`sparse_budget` the sparse head
# keeps {glue:text}`sparse_kept:.1%` of the tokens, and the full model puts
# {glue:text}`sparse_outside:.1%` of its probability outside them (mean step KL
# {glue:text}`sparse_kl:.2f` nats). Its speed-up per generated token, on one thread, is
# {glue:text}`sparse_speedup:.2f` (below 1 means the sparse head is slower).

# %%
sparse = record["idea"]["sparse_decoding"]
if "skipped" in sparse:
    print("not measured:", sparse["skipped"])
else:
    display(sparse_decoding.table({"this build": sparse}).T.round(3))

# %% [markdown]
# The same measurement on competent models is recorded, **not computed by this build**: chapter
# 6's gated models of the `cpu-long` profile (three seeds) and of a recorded `cpu` build, at
# three budgets, with the speed-up at the paper's size timed on random weights. At the book's
# 2,048-token vocabulary the idea head is itself a full-vocabulary projection, and choosing the
# kept rows costs about as much as the small token head it skips. The gain can only appear when
# the vocabulary dominates the cost, as at the paper's 50,257 tokens.

# %%
recorded_sparse = bench.recorded_sparse_decoding()
if recorded_sparse is None:
    print("nothing recorded in book/recorded/sparse-decoding/")
else:
    table, provenance = recorded_sparse
    for name, models in provenance["models"].items():
        print(f"{name}: {models}")
    print(provenance["machine"])
    speedups = {
        key: round(value["speedup_per_token"], 2)
        for key, value in provenance["paper_size"].items()
        if key.startswith("budget")
    }
    print("paper size, random weights, speed-up per token by budget:", speedups)
    display(table.round(3))

# %% [markdown]
# ### Recorded GPU runs: training speed per execution setting
#
# `python -m semlm.bench --only gpu` (run by `make test-gpu`) trains paper B's GPT at the `paper`
# size for a few steps in each execution setting of `semlm.book.gpu_throughput.VARIANTS`: eager
# with the profile's micro-batches (how the earlier recorded chapters ran), eager with the whole
# batch of 32 sequences in one micro-batch, that with `torch.compile` of the model and of gate +
# losses (what the `paper` profile asks for on CUDA), then with the vocabulary padded from 50,257
# to 50,304 rows (`semlm.idea.model.pad_vocabulary`: the logits are cut back to 50,257 columns, so
# the model computes the same function), and last with CUDA graphs on top (`torch.compile` mode
# `reduce-overhead`: each step's kernels replay as one graph instead of being launched one by one
# from Python). Every setting takes the same optimiser step: the relative difference of its
# gradient from the profile's micro-batches is printed under the table. MFU counts the model's
# training FLOPs per token against the GPU's dense bf16 peak; the target is 20%. Like the
# table above, this one is **recorded, not computed by this build**; the `machine` column says
# which GPU measured each row, and only rows of one machine compare.

# %%
gpu_speed, gpu_note = rec.recorded_gpu_throughput_frame()
print(gpu_note)
if not gpu_speed.empty:
    for model, rows in gpu_speed.groupby("model", sort=False):
        best = rows.loc[rows["MFU"].idxmax()]
        verdict = "met" if best["MFU"] >= 0.20 else "not met"
        print(f"{model} GPT: best MFU {best['MFU']:.1%} "
              f"({best['setting']}, {best['machine']}); "
              f"target 20%: {verdict}")
    for folder, checks in gpu_speed.attrs["same_update"].items():
        print(f"same update, {folder}:")
        for name, value in checks.items():
            print(f"  {name}: {value:.1e}")
    gpu_speed = gpu_speed.assign(
        **{"k tokens/s": (gpu_speed["tokens/s"] / 1e3).round()}
    ).drop(columns=["date", "commit", "profile", "tokens/s"])
gpu_speed if not gpu_speed.empty else None

# %% [markdown]
# What bounds the fastest setting is in its profiler trace: the entries with the most GPU time.
# Host-side operations carry the device time of the kernels they launched, so a kernel appears
# twice. In the H100 record, before padding, one GEMM kernel was named `cutlass_75_...`: a tile
# built for an older architecture, which cuBLAS takes when a matrix side is not a multiple of 8,
# as 50,257 is not. The latest record's trace is of its fastest setting, padded: its matrix
# products run in Hopper kernels (`nvjet_sm90_...`), and the softmax passes over the vocabulary
# take a large share of what remains.

# %%
trace, trace_note = rec.recorded_trace_frame("gated", rows=8)
print(trace_note)
trace if not trace.empty else None

# %% [markdown]
# ## Seeds side by side in one process
#
# Many seeds of a small model could train as one vectorised ensemble (PyTorch's "model
# ensembling" recipe: the seeds' weights stacked, the model called under `torch.func.vmap`),
# instead of one one-thread process per seed. Before any trainer does so, this build measures
# what it would save, for each small model kind: the CPU time of one training step (forward
# and backward with the experiment's own batch and loss) of several seeds, one after another
# and stacked.

# %%
stacking, stacking_note = bench.seed_stacking_frame(record)
print(stacking_note)
stacking if not stacking.empty else None

# %% [markdown]
# The note says for which kinds stacking is adopted. (On a CPU, PyTorch warns that vmap has
# no batching rule for its fused attention kernel, so that kernel runs seed by seed inside a
# stacked step.)

# %% [markdown]
# ## The authors' script against ours, on one machine
#
# A time measured on another machine says nothing about this one, so the only comparison
# with the authors' public script this page shows is one measured on a single machine:
# `python -m semlm.bench --authors-script PATH` (or `make bench AUTHORS=PATH`) runs their
# `SemanticFusion.py`, or the code cells of their notebook, which you download from their
# repository (this project does not ship it), and our synthetic experiment, trained from
# scratch, as whole processes in turn: ours, theirs, ours, theirs. It records the median wall
# time, the CPU time (user + sys of each run's process tree) and the peak memory of the tree
# on each side, and the ratio of every pair. It runs only on request, never in the book
# build; the table shows the last record it wrote, with the machine and date it names, and
# where this build wrote none, the one kept in `book/recorded/authors-comparison/` (written
# by the same command with `--record`). Our side is `python -m semlm.fusion`, a process that
# loads only the experiment, so its memory is the experiment's and not the benchmark's.
# The two sides do not do identical work: ours trains the causal models of this book, and
# what their script trains is whatever it does, which the record does not try to read from it.
# The note under each table says whether the ratios meet the targets we set for our side,
# which depend on how many models it trains at once. With one training process, the
# parallelism of their script, at most their peak memory in at most half their wall time;
# with two (the default on two cores), at most 1.3 times their memory in at most a third
# of their time. Where this build measured none, both recorded comparisons are shown: two
# workers (`book/recorded/authors-comparison/`), then one
# (`book/recorded/authors-comparison-one-worker/`).

# %%
for comparison, note in bench.authors_comparison_frames(
    record, authors_comparison_file
):
    print(note)
    if not comparison.empty:
        display(comparison)

# %% [markdown]
# ## The whole book: time per chapter, core use, models trained or loaded
#
# The book runner records every chapter's wall time, how busy it kept the cores (CPU seconds
# of the runner's whole process tree ÷ (wall seconds × cores), sampled with psutil) and, from
# the run log of `semlm.core.runs`, which of its models it trained and which it loaded from
# the run cache (`manifest.json` in the build folder, which also gets the whole build's
# start-to-HTML wall time and whether it started from an empty run cache).
#
# The runner does not leave the training to the chapters one after another: when the build
# starts it trains every model the chapters declare (`python -m semlm.book plan` lists them) in
# one pool of one-thread processes, one per core, in the chapters' order and the longest run of
# each chapter first, while the chapters execute. A chapter that asks for a model the pool is
# training waits for it (each run trains under a file lock), so no model is trained twice; a
# chapter evaluates while the pool trains the next chapters' models, and the core use below
# counts both. Chapter 7's sweep and chapter 8's LoRA runs depend on an earlier result and are
# trained by their chapters. This chapter runs after chapters 1-10, so the table is this build's
# own; `python -m semlm.bench --only book` prints the same for the last build. The target for a
# `cpu` build from scratch on a 2-core CPU is {glue:text}`book_target:.0f` minutes with the cores
# at least 90% busy.

# %%
pd.DataFrame(bench.book_build_times()["chapters"])

# %% [markdown]
# The chapters above took {glue:text}`book_minutes:.1f` minutes in this build
# ({glue:text}`book_scratch`), with the cores {glue:text}`book_busy` busy over those
# chapters, before this chapter and the report; {glue:text}`book_ahead` models were trained
# beside the chapters (a chapter that used one counts it as loaded).
#
# Where the CPU-seconds go: training of each paper's models (every model's own CPU time, from
# the trainer), each chapter's kernel starting and importing its libraries (until
# `book.open` returns), the chapters' other work (evaluation, generation, the notebooks
# themselves) and, for a finished build, the HTML (jupyter-book's own time) and the runner.
# This build's bar covers the chapters so far; the recorded builds' bars are whole builds
# (those recorded before a part was measured show it inside the next one).

# %%
cpu_parts = bench.cpu_breakdown_frame()
fig = plots.plot_cpu_breakdown(cpu_parts)

# %% [markdown]
# ### Recorded build of the whole book from scratch
#
# A build cannot report its own start-to-HTML time on its pages (the HTML comes last), and a
# reader's build usually starts with a filled run cache. The table below is **not computed by
# this build**: it is the manifest of a `make book` in a fresh clone with an empty run cache on
# this project's 2-core development machine, kept in `book/recorded/cpu-book-*/` with the
# machine, the date and the commit it ran (`python -m semlm.book.recorded collect-book`).

# %%
builds, build_chapters, builds_note = rec.recorded_book_builds_frame(
    target_minutes=bench.BOOK_TARGET_MINUTES
)
print(builds_note)
builds if not builds.empty else None

# %% [markdown]
# The builds differ in what they ran: `cpu-book-before-scheduler` trained each chapter's models
# in that chapter; `cpu-book-scheduler` trained them in one pool beside the chapters;
# `cpu-book-bf16` did that with paper A's models under bf16 autocast (the precision the `cpu`
# profile picks on a CPU with native bf16, as this build's first table says), the first two in
# float32. The latest recorded build, chapter by chapter (a chapter's core use counts the
# training beside it, so a chapter that waited for its models is as busy as the pool was):

# %% tags=["hide-input"]
build_chapters if not build_chapters.empty else None
