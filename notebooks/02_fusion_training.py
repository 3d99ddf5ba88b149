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
# # 2. Training baseline and fusion models
#
# *Paper A, Sections 2-3.2, Table 1, Figure 1, Table 6; Appendices B and C.*
#
# We train the paper's two models on its synthetic corpus, a plain Transformer LM
# (*baseline*) and the same backbone with the gated feature channel and the auxiliary
# head (*fusion*), and report the paper's Table-1 metrics. We train them **twice**:
#
# * **causal**: our default. Attention is masked so position $t$ sees tokens $\le t$,
#   and the features are causal (chapter 1). This is a language model.
# * **published setting**: what the authors' code does. No causal mask (each position
#   also attends to the token it must predict) and sentence-level features. Its
#   "perplexities" measure something easier than next-token prediction; we reproduce
#   them only to compare with the paper, and label them wherever they appear.
#
# Everything else (data, sizes, optimiser, losses, seeds) is identical between the two,
# except one detail at the end of each training sentence, where the published setting
# follows the authors' code too (below).

# %% tags=["parameters"]
# "smoke" runs this chapter in about a minute; "cpu" trains for minutes
profile = "cpu"
seed = 111
workers = 2

# %% tags=["hide-input"]
import math

import pandas as pd

from semlm import book, plots
from semlm.book.tables import show_config
from semlm.core import runs
from semlm.fusion import training_report as report
from semlm.fusion.synthetic_experiment import (
    SYNTHETIC, fusion_training_runs, prepare_data,
)
from semlm.fusion.profiles import synthetic_profile
from semlm.reference import PAPER_A_TABLE1, PAPER_A_VAL_PPL_BY_EPOCH

chapter = book.open("02_fusion_training", profile=profile, seed=seed,
                    workers=workers)
profile = chapter.profile
config = synthetic_profile(profile, seed)
show_config(config, ("name", "corpus.n_train", "corpus.n_val",
                     "backbone.d_model", "backbone.n_layers", "train.epochs",
                     "train.batch_size", "train.autocast", "seed"))

# %% [markdown]
# ## The corpus
#
# Sentences follow one template, *Subject verb the object, intensifier adjective* and,
# with probability 0.6, a second clause with the subject's pronoun. Three of the five
# adjectives of each polarity never occur in training (they are kept for the
# out-of-distribution control of chapter 3) but do occur in validation.

# %%
data = prepare_data(config.corpus, "causal")
split = data.corpus.split
pd.DataFrame(
    {
        "train sentences": [len(data.corpus.train)],
        "validation sentences": [len(data.corpus.val)],
        "vocabulary": [len(data.vocab)],
        "positive, trained": [", ".join(split.positive_train)],
        "positive, held out": [", ".join(split.positive_held_out)],
        "negative, trained": [", ".join(split.negative_train)],
        "negative, held out": [", ".join(split.negative_held_out)],
    }
).T.rename(columns={0: ""})

# %%
for words in data.corpus.train[:4]:
    print(" ".join(words))

# %% tags=["remove-cell"]
# training sentences of the longest length: padded only to that length, they never have <eos> as an input
lengths = [len(words) for words in data.corpus.train]
chapter.glue(longest_share=lengths.count(max(lengths)) / len(lengths))

# %% [markdown]
# ## The models
#
# Both share one backbone: $d = 128$, 4 post-LayerNorm blocks with 4 heads and a
# 256-wide ReLU MLP, dropout 0.1, sinusoidal positions, and an output layer tied to the
# input embedding (`semlm.fusion.backbone`). The fusion model adds, before the first block,
#
# $$u_t = W_s s_t, \qquad g_t = \sigma(W_g[e_t; s_t]), \qquad h^{(0)}_t = e_t + u_t + g_t \odot u_t ,$$
#
# and an auxiliary head $\hat s_t = \sigma(\mathrm{MLP}(H_t))$ that reconstructs the features.
# Training minimises label-smoothed cross-entropy ($\varepsilon = 0.02$)
# $+\,0.5\,\times$ auxiliary BCE $+\,0.01\,\times$ the adjective-class uniformizer (both models),
# with AdamW ($3\times10^{-4}$, weight decay 0.01), batch 64, 10% warmup then cosine, clipping at 1.0, 6 epochs.
# The authors trained in float32, and so does the `paper` profile. At `cpu`, on a processor that
# multiplies bf16 matrices natively (AVX512-BF16 or AMX), the forward pass runs under bf16 autocast
# (`train.autocast` above; weights, optimiser and every evaluation stay float32): it takes about
# two thirds of the float32 training time and gives the same validation perplexity within seed
# noise (the recorded comparison is in the benchmarks chapter). Elsewhere `cpu` trains in float32,
# and `SEMLM_CPU_BF16=off` forces float32 anywhere.

# %%
from semlm.fusion.synthetic_experiment import model_config
from semlm.fusion.model import build_model

sizes = {
    kind: sum(
        p.numel()
        for p in build_model(
            model_config(config, kind, len(data.vocab), "causal")
        ).parameters()
    )
    for kind in ("baseline", "fusion")
}
pd.Series(sizes, name="trainable parameters").to_frame()

# %% [markdown]
# ## Training
#
# Four runs: two models times two settings. The two models of a setting train side by
# side in worker processes with one thread each; a finished run is cached under
# `book/_build/runs/` keyed by its configuration and the library's source, so
# re-building the book with unchanged code reloads identical weights.

# %%
context = runs.RunContext(profile, workers=workers)
records = runs.run_many(SYNTHETIC, fusion_training_runs(config), context)
trained = runs.nested(records, "group", "name")  # {setting: {model: run}}
report.runs_table(trained)

# %% [markdown]
# ## Validation perplexity per epoch (paper Figure 1)
#
# Left: the causal models. Right: the published setting, with the paper's reported
# points (crosses). The axes are separate on purpose: the two settings measure
# different things.

# %%
curves = report.epoch_curves(trained)
fig = plots.plot_validation_curves(curves, paper=PAPER_A_VAL_PPL_BY_EPOCH)

# %% [markdown]
# ## Table 1, side by side with the paper

# %%
table1 = report.ModelTable(
    trained, {"paper (published setting)": PAPER_A_TABLE1}
)
chapter.show(table1, table=False)
table1.table().style.format("{:.4g}", na_rep="–")

# %% tags=["remove-cell"]
chapter.glue(paper_baseline_ppl=PAPER_A_TABLE1["baseline"]["ppl"],
             paper_fusion_ppl=PAPER_A_TABLE1["fusion"]["ppl"],
             profile=profile, seed=seed)

# %%
frame = report.paper_comparison_frame(PAPER_A_TABLE1, trained, "ppl")
fig = plots.plot_table1_comparison(frame, "ppl")

# %% [markdown]
# **Reading the table** (profile {glue:text}`profile`, seed {glue:text}`seed`).
# In the causal setting the baseline reaches PPL {glue:text}`causal_baseline_ppl:.3f` and fusion
# {glue:text}`causal_fusion_ppl:.3f` ({glue:text}`causal_ppl_change:+.1f`% relative). In the published
# setting the same code gives {glue:text}`published_baseline_ppl:.3f` and {glue:text}`published_fusion_ppl:.3f`
# ({glue:text}`published_ppl_change:+.1f`%). Those count every word and the final `<eos>` as
# targets, never the `<pad>` after `<eos>` (nor do our causal floors). The authors' evaluation
# pads every sentence to 28 tokens and masks only padding *inputs*, so it also counts the
# nearly free `<eos>` -> `<pad>` target, one per sentence. Our published-setting models are
# trained on that target, as theirs are, and our causal ones are not; the column "PPL,
# authors' denominator" counts it as free in both (cross-entropy 0, what a model trained on
# it nearly reaches): the same sum over one more target per sentence.
# Counted that way the published setting gives {glue:text}`published_baseline_ppl_authors:.3f`
# and {glue:text}`published_fusion_ppl_authors:.3f`, to compare with the paper's
# {glue:text}`paper_baseline_ppl:.3f` and {glue:text}`paper_fusion_ppl:.3f`.
#
# Matching the published setting took one detail the paper does not mention: the
# authors' encoder is PyTorch's `nn.TransformerEncoder`, which initialises attention
# with Xavier weights and zero biases and starts every layer as a copy of the first.
# With PyTorch's default `Linear` initialisation instead, our published-setting
# perplexities came out clearly higher in our development runs (that comparison is not
# re-run in this build). Our backbone therefore initialises exactly as the authors'
# encoder does (`Backbone._init_like_torch_encoder`), in both settings.
#
# The second detail is the end of a training sentence. The authors' loader pads every
# sentence to 28 tokens and their loss masks only padding *inputs* (`LMDataset` and
# `lm_step` in `SemanticFusion.py`, github.com/YongchaoHuang/semantic_fusion), so every
# training row has `<eos>` as an input and the `<eos>` -> `<pad>` target is trained. Our
# published setting trains the same way (`encode_corpus(..., score_eos_pad=True)`). Padding
# only to the longest sentence instead would leave the longest training sentences (the
# two-clause ones, {glue:text}`longest_share:.1%` of this profile's training sentences) without
# the `<eos>` input that every validation row has, and the
# non-causal encoder attends to it from every position. The causal setting never trains or
# scores that target: it is not text, and no earlier position can see it.
#
# The published numbers are lower for a reason that has nothing to do with fusion:
# without a causal mask, the position that predicts a word attends to that very word.
# A causal model cannot do that. It has to *guess* the adjective's polarity (a coin flip
# in this corpus) and then one of the two training adjectives of that class, which costs
# at least $\ln 4 \approx 1.39$ nats per adjective however good the model is. So the
# paper's Table 1 cannot be reproduced by a language model, and we do not claim to. The
# cell below shows the leak directly, and chapter 4 audits it in depth.
#
# The semantic MSE of the auxiliary head is {glue:text}`causal_sem_mse:.4f` (causal) and
# {glue:text}`published_sem_mse:.4f` (published); the paper reports 0.0087.

# %%
causal_floor_good = math.log(2 * len(split.positive_train))
focus = report.focus_frame(trained)
report.focus_table(trained).style.format("{:.4f}", na_rep="–")

# %% tags=["remove-cell"]
chapter.glue(floor_good=causal_floor_good)

# %% [markdown]
# ## Focus-token cross-entropy (paper Table 6)
#
# Per-occurrence cross-entropy of the tokens where control matters (nats; lower is
# better). For a seen adjective such as "good", the training distribution gives it
# {glue:text}`floor_good:.3f` nats (polarity is a coin flip, then one of two trained
# words). That is a reference, not a floor for one token: a causal model can go below it on
# "good" only by taking probability from the other adjectives that follow the same words,
# while the published setting can go below it on all of them because it sees the answer.
# Held-out adjectives ("great", "terrible") are never targets in training, so their
# cross-entropy stays high in every setting.

# %%
fig = plots.plot_focus_ce(focus)

# %% [markdown]
# ## The leak, measured on the trained models
#
# We change one token in the middle of validation sentences and ask how much the
# logits at *earlier* positions move (features recomputed from the changed ids). A
# language model must give exactly zero; anything else means it reads the future.

# %%
probe = data.val.input_ids[:64]
position, replacement = 6, data.vocab.id(
    "extremely"
)  # the intensifier slot of the first clause
featurizers = {
    setting: prepare_data(config.corpus, setting).featurizer
    for setting in trained
}
sensitivity = report.leak_sensitivity(
    trained, featurizers, probe, position, replacement
)
sensitivity.to_frame().style.format("{:.3g}")

# %% tags=["remove-cell"]
chapter.glue(causal_sensitivity=float(sensitivity["causal"].max()),
             published_sensitivity=float(sensitivity["published"].min()))

# %% [markdown]
# The causal models move by at most {glue:text}`causal_sensitivity:.2g` (floating-point
# noise); the published models by at least {glue:text}`published_sensitivity:.3g` logits. The
# test suite checks the same property on untrained models of both kinds
# (`tests/core/test_causality.py`).

# %% [markdown]
# ## Key numbers

# %%
report.key_numbers(trained, sensitivity)

# %%
chapter.close(report.fusion_training_record(
    config=config, trained=trained, sensitivity=sensitivity))

# %% [markdown]
# ## Exercises
#
# Each exercise has a hint and a worked solution; open them only after trying.
#
# 1. **Seeds** (★★ explore). Run the chapter with `profile = "smoke"` and two
#    other values of `seed`. Compare Table 1 across the runs: is the
#    seed-to-seed spread of a perplexity smaller than the gap between baseline
#    and fusion? (Chapter 4 answers this properly, with intervals.)
#
#    <details><summary>Hint</summary>
#
#    You do not need to re-run the whole chapter: `synthetic_profile(profile,
#    seed)` builds the configuration for another seed, `runs.run_many` trains
#    (or reloads) its four runs, and `report.ModelTable(other, {}).numbers()`
#    holds the perplexities by name (`causal_baseline_ppl`,
#    `causal_fusion_ppl`, ...).
#
#    </details>
#
#    <details><summary>Solution</summary>
#
#    ```python
#    rows = {}
#    for s in (seed, seed + 1, seed + 2):
#        other = runs.nested(
#            runs.run_many(
#                SYNTHETIC, fusion_training_runs(synthetic_profile(profile, s)),
#                context,
#            ),
#            "group", "name",
#        )
#        numbers = report.ModelTable(other, {}).numbers()
#        rows[s] = {
#            "baseline": numbers.causal_baseline_ppl,
#            "fusion": numbers.causal_fusion_ppl,
#        }
#    seeds_frame = pd.DataFrame(rows).T
#    seeds_frame["gap"] = seeds_frame["fusion"] - seeds_frame["baseline"]
#    seeds_frame
#    ```
#    Each seed trains four new models (the chapter's own seed is reloaded from
#    the cache). Compare the spread of the `baseline` column (its largest minus
#    its smallest value) with the `gap` column. If the gap keeps its sign and is
#    larger than the spread, the difference between the models is larger than
#    the seed noise; if it changes sign between seeds, three seeds at this
#    profile cannot tell the models apart. At `smoke` the models are tiny and
#    undertrained, so expect the spread to be large; chapter 4 replaces this
#    eyeballing with t-intervals over seeds.
#
#    </details>
#
# 2. **Fewer epochs** (★★ explore). After the configuration cell, set
#    `config = replace(config, train=replace(config.train, epochs=2))`
#    (`from dataclasses import replace`). In the per-epoch curves, from which
#    epoch on is the published setting better than the causal one?
#
#    <details><summary>Hint</summary>
#
#    Rather than overwriting `config`, build a shortened copy and train its runs
#    with `runs.run_many`; `report.epoch_curves` turns the runs into
#    `{(setting, model): validation PPL per epoch}`.
#
#    </details>
#
#    <details><summary>Solution</summary>
#
#    ```python
#    from dataclasses import replace
#
#    short = replace(config, train=replace(config.train, epochs=2))
#    short_runs = runs.nested(
#        runs.run_many(SYNTHETIC, fusion_training_runs(short), context),
#        "group", "name",
#    )
#    curves_short = pd.DataFrame(report.epoch_curves(short_runs))
#    curves_short.rename(index=lambda i: i + 1).rename_axis("epoch")
#    ```
#    The frame has one row per epoch and one column per (setting, model);
#    the answer is the first epoch at which a published column is below its
#    causal counterpart. Without a causal mask the position that predicts a
#    word attends to that word, so a published model that has learnt to copy
#    goes below anything a causal model can reach (the causal ones stay above
#    the floor of about $\ln 4$ nats per adjective). Learning to copy still
#    takes training: early on, the published models can be *worse*, because
#    every position also sees a jumble of later tokens. At `smoke` this is what
#    two epochs show (both settings are still far from trained); at `cpu`,
#    by the end of training the published setting is far below the causal
#    one, as Table 1 shows.
#
#    </details>
#
# 3. **The leak** (★ warm-up). The leak section measures how much the logits at
#    earlier positions move when a token later in the sentence changes
#    (`report.leak_sensitivity`). Compare its value for the causal and the
#    published fusion model: which one could a reader use to generate text left
#    to right?
#
#    <details><summary>Hint</summary>
#
#    The cell already computed `sensitivity`, a dictionary keyed by
#    `(setting, model)`.
#
#    </details>
#
#    <details><summary>Solution</summary>
#
#    ```python
#    for setting in ("causal", "published"):
#        print(setting, sensitivity[(setting, "fusion")])
#    ```
#    The causal fusion model moves by floating-point noise at most (0, or of
#    the order of `1e-6`), the published one by a clearly non-zero amount (at
#    `smoke` a fraction of a logit, more at `cpu`, where it has learnt to use
#    what it sees).
#    Only the causal model can generate left to right: when it samples word $t$
#    it does not have word $t + 1$, and its predictions do not depend on it. The
#    published model's predictions were computed with the future in view, so its
#    perplexity says nothing about how well it would generate.
#
#    </details>
