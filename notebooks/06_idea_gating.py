# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 6. Idea-gated Transformer on WikiText
#
# *Paper B (Fofadiya, arXiv 2512.03343), Sections 3-5; the authors' v1 GPT on WikiText (NOTES.md).*
#
# Paper B adds to a language model an **Idea Head** that predicts the *bag* of tokens that
# will occur in the next K = 20 positions, and uses its probabilities to penalise, in log
# space, the token logits of words that do not fit that plan. We rebuild the authors' v1
# setting, a small GPT trained from scratch on WikiText, and compare a plain GPT with the
# idea-gated GPT of the same backbone and training budget:
#
# * validation and test perplexity (for the gated model with and without the gate);
# * domain retention: prompts from five domains, continued by both models, scored with the
#   authors' stickiness measure, the density of distinct domain terms, distinct-2 and a
#   repetition rate, with 95% intervals.
#
# Chapter 7 opens the gate up (X-ray), sweeps its settings and studies repetition loops.

# %% tags=["parameters"]
profile = "cpu"
seed = 111
workers = 2

# %%
from dataclasses import replace

import pandas as pd
from myst_nb import glue

from semlm import plots
from semlm.idea_experiment import (RunSpec, domain_retention, gradient_balance, idea_profile, load_domains,
                                   model_config, perplexity_of, prepare_data, train_runs)
from semlm.idea_targets import idea_targets
from semlm.models.idea import IdeaGPTForCausalLM, parameter_count
from semlm.profiles import check_parameters
from semlm.reference import PAPER_B_STICKINESS, PAPER_B_VAL_PPL
from semlm.report import ChapterTimer, write_chapter_metrics

check_parameters(profile=profile, seed=seed, workers=workers)
timer = ChapterTimer()
config = idea_profile(profile, seed)
config

# %% [markdown]
# ## Data and tokeniser
#
# WikiText-2 (the standard tokenised release) is read with `datasets` from `$SEMLM_DATA_DIR`.
# The `paper` profile asks for WikiText-103, the authors' corpus, which is only downloaded when
# the book runs with `--allow-downloads` (`SEMLM_ALLOW_DOWNLOADS=1`); otherwise it falls back to
# WikiText-2 and says so below. The tokeniser is a byte-level BPE of the profile's size learnt on
# the training split with `tokenizers` and loaded back as a transformers tokenizer (the authors
# use GPT-2's, which we cannot download offline).

# %%
data = prepare_data(config)
tokenizer = data.tokenizer
glue("dataset", data.splits_dataset, display=False)
glue("vocab", len(tokenizer), display=False)
pd.Series({"dataset used": data.splits_dataset, "dataset requested": data.requested_dataset,
           "note": data.note or "-", "BPE vocabulary": len(tokenizer),
           **{f"{split} tokens": len(ids) for split, ids in data.streams.items()},
           "stopword tokens (masked in the idea targets)": " ".join(repr(tokenizer.decode([i])) for i in data.stopword_ids)})

# %% [markdown]
# ## The idea targets
#
# For position $t$ the target is the multi-hot vector of the tokens $x_{t+1}, \dots, x_{t+K}$,
# without the most frequent tokens (the stopword mask), built for the whole batch with one
# `unfold` and one `scatter` (`semlm.idea_targets`). Below: the first training tokens and the
# bag that position 0 is trained to predict.

# %%
ids = data.streams["train"][: 1 + config.idea.window].long()
bag = idea_targets(ids[None, 1:], config.idea.window, len(tokenizer), data.stopword_ids, length=1)[0, 0]
pd.DataFrame({"input (position 0)": [repr(tokenizer.decode(ids[:1]))],
              "next K tokens": [tokenizer.decode(ids[1:])],
              "bag (stopwords removed)": [" | ".join(tokenizer.decode([i]) for i in bag.nonzero().flatten().tolist())]}).T

# %% [markdown]
# ## The gate
#
# With $p = \sigma(z_{\text{idea}})$ the gated logits are $z_{\text{token}} + G(p)$, where $G \le 0$
# penalises tokens the idea head does not expect. The authors' code has two forms (NOTES.md):
# v1 (their WikiText GPT) clamps $\log(p+\epsilon)$ at $\beta = -2$ and then scales by $\alpha$; v2
# (the paper's equation, their Mistral run) scales first and clamps at $\beta$. Our model offers
# both by name; this chapter uses v1, like the authors' WikiText run. The clamp bounds the
# penalty, so a wrong idea head cannot remove a token altogether.

# %%
fig = plots.plot_gate_curves(beta=config.idea.beta)

# %% [markdown]
# ## The models
#
# Both are the same pre-LayerNorm GPT (GELU MLP, dropout, causal attention through PyTorch's
# `scaled_dot_product_attention`, token head tied to the embedding), a transformers
# `PreTrainedModel`. The gated model adds the untied Idea Head $d \to d \to V$ with a ReLU. Its
# loss is cross-entropy on the **gated** logits plus $\lambda$ times the idea BCE (`pos_weight` 5),
# with $\alpha$ ramped linearly from 0 to 0.5. The authors' v1 sums the BCE over the vocabulary
# and uses $\lambda = 0.01$; their v2 averages it over the vocabulary and uses $\lambda = 0.1$. This
# build trains with {glue:text}`loss_form` (the next section shows why the small profiles depart
# from v1). Both models use the shared trainer of this book (AdamW, warmup then cosine, clipping at 1.0).

# %%
FORMS = {"v1: sum over vocabulary, lambda 0.01": replace(config.idea, idea_loss_reduction="sum_vocab", idea_weight=0.01),
         "v2: mean over vocabulary, lambda 0.1": replace(config.idea, idea_loss_reduction="mean", idea_weight=0.1)}
loss_form = next((name for name, form in FORMS.items() if form == config.idea), "a custom idea loss")
glue("loss_form", loss_form.split(":")[0] + "'s form (" + loss_form.split(": ")[1] + ")", display=False)
sizes = {name: parameter_count(IdeaGPTForCausalLM(model_config(config, len(tokenizer), idea)))
         for name, idea in (("baseline", False), ("gated", True))}
pd.DataFrame({"parameters": sizes, "layers": config.size.n_layer, "heads": config.size.n_head,
              "d": config.size.n_embd, "block": config.size.block_size})

# %% [markdown]
# ## Balancing the two losses
#
# The idea head and the token head read the same backbone, so the weight of the idea loss decides
# how much the backbone is shaped for the bag-of-words task rather than for the next token. Summed
# over the vocabulary, the BCE grows with the vocabulary size, and $\lambda = 0.01$ was chosen by the
# authors for a 50,257-token GPT-2 vocabulary. In an earlier build of this chapter at the `cpu`
# profile with v1's form, the gated model's backbone trained much worse than the plain GPT (not
# re-run here); the hypothesis is that the summed idea loss dominates the backbone's gradient. The
# probe below tests it in every build: a fresh gated model trains the first
# {glue:text}`balance_steps` steps under each form (same initial weights, same batches, the real
# schedule and clipping), and every few steps we measure, on the backbone only, the gradient norm of
# the token loss and of $\lambda \times$ idea loss separately, plus the factor by which clipping at
# 1.0 shrinks the whole update.

# %%
balance = gradient_balance(config, data, FORMS, config.balance_steps, config.balance_every)
rows = pd.DataFrame([{"loss form": name, **row} for name, b in balance.items() for row in b["rows"]])
summary = pd.DataFrame({name: {
    "idea / token gradient, first step": b["rows"][0]["ratio"],
    "idea / token gradient, largest": max(r["ratio"] for r in b["rows"]),
    "smallest clipping factor": min(r["token_grad_kept"] for r in b["rows"]),
    "token CE, mean of last 10 steps": sum(b["token_ce"][-10:]) / len(b["token_ce"][-10:]),
} for name, b in balance.items()}).T
v1, v2 = summary.index
glue("balance_steps", config.balance_steps, display=False)
glue("ratio_v1", summary.loc[v1, "idea / token gradient, largest"], display=False)
glue("ratio_v2", summary.loc[v2, "idea / token gradient, largest"], display=False)
glue("clip_v1", summary.loc[v1, "smallest clipping factor"], display=False)
glue("ce_v1", summary.loc[v1, "token CE, mean of last 10 steps"], display=False)
glue("ce_v2", summary.loc[v2, "token CE, mean of last 10 steps"], display=False)
dominates = summary.loc[v1, "idea / token gradient, largest"] >= 0.5
glue("balance_verdict", (
    "the summed idea loss pulls on the backbone with a gradient comparable to the token loss's, the averaged "
    "one barely at all" if dominates and summary.loc[v2, "idea / token gradient, largest"] < 0.1 else
    "the two forms do not differ in the way the hypothesis predicts"), display=False)
glue("ce_verdict", "higher" if summary.loc[v1, "token CE, mean of last 10 steps"] >
     summary.loc[v2, "token CE, mean of last 10 steps"] else "not higher", display=False)
glue("clip_verdict", "clipping is a minor channel; the imbalance acts through the update's direction" if
     summary.loc[v1, "smallest clipping factor"] >= 0.5 else "clipping also shrinks the token gradient markedly",
     display=False)
summary.style.format("{:.3f}")

# %%
rows.assign(form=rows["loss form"].str.split(":").str[0]).pivot(
    index="step", columns="form", values=["token_grad", "idea_grad", "total_grad", "token_ce"]).round(3)

# %% [markdown]
# In this build the idea / token gradient ratio on the backbone reaches {glue:text}`ratio_v1:.2f` with
# v1's form and {glue:text}`ratio_v2:.3f` with v2's: {glue:text}`balance_verdict`. After the
# probe's steps the token cross-entropy under v1's form is {glue:text}`ce_v1:.3f` against
# {glue:text}`ce_v2:.3f` under v2's ({glue:text}`ce_verdict` with v1). Clipping acts only while the
# total norm exceeds 1.0; its smallest factor under v1 is {glue:text}`clip_v1:.2f`, so
# {glue:text}`clip_verdict`. The `smoke` and `cpu` profiles train the gated models with v2's loss form
# (`IdeaSettings.idea_loss_reduction = "mean"`, $\lambda = 0.1$, the authors' own second
# configuration); this is their one departure from v1, chosen from this gradient evidence, not by
# comparing validation perplexities. The `paper` profile keeps v1 exactly.

# %% [markdown]
# ## Training
#
# The two models train side by side, each in its own process with one thread, with the same
# data order and budget. Finished runs are cached under `book/_build/runs/` (keyed by the
# configuration and the training code) and saved with `save_pretrained` next to the tokeniser.
#
# On several GPUs the same model trains with 🤗 Accelerate: a script that builds model,
# optimiser and data loader and passes them through `Accelerator.prepare` is started with
# `accelerate launch --num_processes 4 train_idea.py`. The book's trainer is single-process;
# only that path is tested.

# %%
runs = train_runs(config, [RunSpec("baseline", False), RunSpec("gated", True)], workers=workers)
step_time_ratio = runs["gated"].seconds_per_step / runs["baseline"].seconds_per_step
glue("step_time_ratio", step_time_ratio, display=False)
pd.DataFrame([{"model": n, "status": r.status, "steps": r.steps, "train seconds": round(r.train_seconds, 1),
               "seconds per step": round(r.seconds_per_step, 3)} for n, r in runs.items()])

# %% [markdown]
# A training step of the gated model takes {glue:text}`step_time_ratio:.2f` times as long as one
# of the plain GPT (one thread each, measured during this training). At these sizes a
# vocabulary-wide projection is a large share of a step, and the idea head adds a second one
# plus its loss; `make bench` measures the same ratio in isolation.

# %% [markdown]
# ## Perplexity
#
# Validation and test perplexity of the next token. For the gated model we report its gated
# logits (what it was trained on) and the token head alone (gate off, $\alpha = 0$).

# %%
models = {name: run.load() for name, run in runs.items()}
test = data.blocks("test", config)
ppl = pd.DataFrame({
    "validation": {"baseline": runs["baseline"].val_ppl, "gated": runs["gated"].val_ppl,
                   "gated (ungated logits)": runs["gated"].val_ppl_ungated},
    "test": {"baseline": perplexity_of(models["baseline"], test), "gated": perplexity_of(models["gated"], test),
             "gated (ungated logits)": perplexity_of(models["gated"], test, alpha=0.0)},
})
for name in ppl.index:
    glue(f"val_{name.split()[0]}{'_ungated' if 'ungated' in name else ''}", ppl.loc[name, "validation"], display=False)
ppl.style.format("{:.2f}")

# %%
fig = plots.plot_idea_curves({name: [row["val_ppl"] for row in run.history] for name, run in runs.items()})

# %% [markdown]
# On {glue:text}`dataset` the baseline reaches validation
# perplexity {glue:text}`val_baseline:.2f` and the gated model {glue:text}`val_gated:.2f` with
# its gate, {glue:text}`val_gated_ungated:.2f` without it. The paper reports 8.07 against 7.78
# on FineWeb-Edu with Mistral-7B: another model, tokeniser and corpus, so only the direction
# of the difference can be compared (table below). With a tokeniser learnt on WikiText itself
# and a small budget, our perplexities are per BPE token of that tokeniser.

# %%
pd.DataFrame({"paper B (Mistral-7B + LoRA, FineWeb-Edu, validation)": PAPER_B_VAL_PPL})

# %% [markdown]
# ## Domain retention
#
# Each domain (`data/domains/`, written for this book) has four prompts and a word list.
# Both models continue every prompt several times with temperature 0.6 and transformers'
# repetition penalty 1.2, over two sampling seeds, as the authors' evaluation does (their 20
# samples of 100 tokens per domain at the `paper` profile). The scores, per continuation:
#
# * **stickiness**: domain-word hits / content words (spaCy stopwords removed);
# * **unique density**: distinct domain terms per 100 words;
# * **distinct-2**: distinct word bigrams / bigrams (diversity);
# * **repetition**: share of word 4-grams already seen in the same continuation.
#
# Intervals are 95% Student-t intervals of the mean over continuations (all seeds pooled).
# Only one model of each kind is trained per build, so they cover sampling, not training noise.

# %%
domains = load_domains()
retention = {name: domain_retention(model, tokenizer, domains, config.generation) for name, model in models.items()}
frame = pd.DataFrame([{"domain": d, "model": m, "metric": k, **v}
                      for m, by_domain in retention.items() for d, res in by_domain.items()
                      for k, v in res["summary"].items()])
fig = plots.plot_domain_retention(frame)

# %%
def show(v):
    return f"{v['mean']:.3f} [{v['ci_low']:.3f}, {v['ci_high']:.3f}]"


table = pd.DataFrame([{"domain": d, "model": m, **{k: show(v) for k, v in res["summary"].items()
                                                      if k in ("stickiness", "unique_density", "distinct_2", "repetition")}}
                      for m, by_domain in retention.items() for d, res in by_domain.items()])
table.set_index(["domain", "model"]).sort_index()

# %%
mean = frame[frame.metric == "stickiness"].groupby("model")["mean"].mean()
wins = sum(retention["gated"][d]["summary"]["stickiness"]["mean"] > retention["baseline"][d]["summary"]["stickiness"]["mean"]
           for d in domains)
glue("stick_baseline", mean["baseline"], display=False)
glue("stick_gated", mean["gated"], display=False)
glue("stick_wins", f"{wins} of {len(domains)}", display=False)

# %% [markdown]
# Averaged over domains, stickiness is {glue:text}`stick_baseline:.3f` for the baseline and
# {glue:text}`stick_gated:.3f` for the gated model; the gated model is ahead in
# {glue:text}`stick_wins` domains. Where the intervals overlap, this build does not show a
# difference. For comparison, the authors' README (other domains, other model) reports:

# %%
pd.DataFrame(PAPER_B_STICKINESS).T.rename_axis("paper B domain")

# %% [markdown]
# ## Examples
#
# The first continuation of the first prompt of each domain, from each model.

# %%
pd.DataFrame([{"domain": d, "prompt": domains[d].prompts[0].strip(),
               **{m: retention[m][d]["samples"][0]["text"].strip() for m in models}} for d in domains]).set_index("domain")

# %%
def domain_numbers(model):
    return {d: {k: res["summary"][k]["mean"] for k in ("stickiness", "unique_density", "distinct_2", "repetition")}
            | {f"{k}_ci": [res["summary"][k]["ci_low"], res["summary"][k]["ci_high"]] for k in ("stickiness", "distinct_2")}
            for d, res in retention[model].items()}


by_model = {m: domain_numbers(m) for m in models}
write_chapter_metrics("06_idea_gating", profile, seed, {
    "dataset": data.splits_dataset, "dataset_requested": data.requested_dataset, "dataset_note": data.note,
    "vocab_size": len(tokenizer),
    "baseline": {"val_ppl": runs["baseline"].val_ppl, "test_ppl": ppl.loc["baseline", "test"],
                 "val_ppl_per_epoch": [r["val_ppl"] for r in runs["baseline"].history],
                 "train_seconds": runs["baseline"].train_seconds, "parameters": sizes["baseline"]},
    "gated": {"val_ppl": runs["gated"].val_ppl, "val_ppl_ungated": runs["gated"].val_ppl_ungated,
              "test_ppl": ppl.loc["gated", "test"], "test_ppl_ungated": ppl.loc["gated (ungated logits)", "test"],
              "val_ppl_per_epoch": [r["val_ppl"] for r in runs["gated"].history],
              "train_seconds": runs["gated"].train_seconds, "parameters": sizes["gated"]},
    "domains": {d: {m: by_model[m][d] for m in models} for d in domains},
    "step_time_ratio": step_time_ratio,
    "idea_loss": {"reduction": config.idea.idea_loss_reduction, "weight": config.idea.idea_weight,
                  "pos_weight": config.idea.pos_weight},
    "gradient_balance": {"steps": config.balance_steps, **{name: summary.loc[name].to_dict() for name in summary.index}},
    "generation": {"samples_per_domain": len(retention["gated"][next(iter(domains))]["samples"]),
                   "max_new_tokens": config.generation.max_new_tokens, "temperature": config.generation.temperature,
                   "repetition_penalty": config.generation.repetition_penalty},
    "paper": {"val_ppl": PAPER_B_VAL_PPL, "stickiness": PAPER_B_STICKINESS},
}, timer.seconds)
