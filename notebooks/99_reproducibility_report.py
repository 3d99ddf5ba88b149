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
# # Reproducibility report
#
# *Both papers, every headline claim, generated from the metrics files the chapters of this
# build wrote (`book/_build/metrics/*.json`); nothing on this page is typed by hand except
# the papers' own values and the rules that judge them (`semlm.book.claims`).*
#
# The page opens with the verdicts, counted per paper, and the legend of every status (generated
# from `semlm.book.claims`). In the claims table the *ours* column is the quantity our causal
# language model's claim is decided on (a paired difference where the rule pairs seeds) with
# its 95% interval where it has one, and, where the paper's setting was re-run, that
# (non-causal) setting's value of the same quantity; each row opens to the reason and the rule
# that judged it. `A-soft-control` and `A-intensity` test a request channel this book adds
# (chapter 10: a sentence-level request written into the features), not the paper's own
# per-token feature channel.

# %% tags=["parameters"]
# reads the other chapters' metrics: seconds at every profile
profile = "cpu"
seed = 111

# %% tags=["hide-input"]
from pathlib import Path

import pandas as pd

from semlm import book
from semlm.book import report
from semlm.book.claims import evaluate_claims
from semlm.book.effects import power_frame
from semlm.book import cpu_decisive
from semlm.book.decisive import registration_progress
from semlm.book.recorded import recorded_verdicts

chapter = book.open("report", profile=profile, seed=seed)
metrics = report.load_metrics()
claims = report.final_verdicts(
    report.attach_recorded(evaluate_claims(metrics), recorded_verdicts())
)
manifest = report.report_manifest(metrics, report.chapter_parameters())
modified = report.modified_data(metrics)
if modified:  # a build run with --allow-modified-data: its verdicts are not the book's
    print(f"data differs from the pinned release in chapters {', '.join(modified)}: "
          "these verdicts are not the book's")

# %% [markdown]
# ## Verdicts
#
# Each claim has one final verdict, taken from a fixed order of sources: the claim's
# registered decisive recording when it is complete, else this build's verdict, else, for a
# claim this profile cannot test, the competent recorded run its rule names. The counts below
# are of that final column, per paper, with the claims that test what this book adds (its
# extensions) counted apart from the paper's own.

# %% tags=["remove-input"]
summary = report.plain_summary(claims)
for text in summary.values():
    print(text, end="\n\n")

# %% tags=["remove-input"]
report.verdict_summary(claims).reset_index()

# %% tags=["remove-input"]
print(report.multiplicity_sentence(claims))

# %% tags=["remove-input"]
report.status_legend()

# %% [markdown]
# ## Claims
#
# By paper, verdicts first. The status is the final verdict; under it are its source and this
# build's own verdict, marked *(disagree)* where one says reproduced and the other not
# reproduced. Open a row's *why* for the reason and the rule (this build's) and, where there
# are any, the recorded runs: not this build, but the same claims code applied to the runs
# recorded in `book/recorded/` (a whole book build from a fresh clone, long CPU runs, GPU
# runs), each with its folder and commit, where that folder holds what the claim needs.
# Recorded folders holding the same result are one entry.

# %% tags=["remove-input"]
report.claims_table(claims)

# %% [markdown]
# ## What each effect rule can decide
#
# An effect claim is judged against a smallest effect of interest `m`, half the effect the
# paper reports, frozen beside its rule: *not reproduced* when the interval excludes an effect
# of `m`, *reproduced* when it lies above 0. Its power is simulated through the rule itself
# at the seeds it is planned for, with the pilot recording's per-seed SD inflated for its few
# seeds: the chance of *not reproduced* when there is no effect, and of *reproduced* when the
# effect is `m`. A half-width over `m` near 0.5 or below can tell the two apart; this build's
# own is beside it.

# %% tags=["remove-input"]
power_frame(claims)

# %% [markdown]
# ## Registered decisive seeds
#
# A claim's deciding seeds are fixed before they run: one commit registers its seed count,
# the seeds (from 1001; planning runs use 501-999) and the protocol, with no results. The
# deciding command refuses to run from a tree that differs from that commit, trains in a new
# runs folder, and records exactly the registered seeds, one small file per seed. Nothing stops
# anyone from training seed 1001 privately before the registration; what a reader can check is
# that the recorded seeds are what the code gives. Re-run any two registered seeds beside the
# recording, e.g. `python -m semlm.book decisive --recheck --claims B-lora-ppl --seeds
# 1001-1002 --folder /tmp/recheck`, and compare the `values` in the result files with those
# in the recording's `seeds/` folder.

# %% tags=["remove-input"]
print(registration_progress())
print(cpu_decisive.registration_progress())

# %% [markdown]
# ## Run manifest
#
# Where and how every chapter ran: its profile and seed, wall time, peak resident memory
# (the chapter's kernel and its finished worker processes), and the commit and packages it
# ran with.

# %% tags=["remove-input"]
where = report.metrics_dir().resolve()
if where.is_relative_to(Path.cwd()):
    where = where.relative_to(Path.cwd())
print(f"{len(metrics)} chapter records, read from {where}")
report.run_manifest_frame(metrics)

# %% tags=["remove-input"]
pd.Series(manifest["hardware"], name="value").to_frame()

# %% tags=["remove-input"]
pd.Series(manifest["packages"], name="version").to_frame()

# %% [markdown]
# ### Benchmarks of this build
#
# The figures `make bench` prints, as recorded by the benchmark chapter of this build.

# %% tags=["remove-input"]
(
    pd.Series(manifest["bench"], name="value").to_frame()
    if manifest["bench"]
    else print("no benchmark record in this build")
)

# %% [markdown]
# ## How to re-run
#
# Every chapter is a jupytext file in `notebooks/` with a `parameters` cell; the table
# below is read from those cells. Run the whole book with `make book` (profile `cpu`), or
# `.venv/bin/python -m semlm.book run --profile {smoke,cpu,paper} [--only CHAPTER]`; one
# chapter with papermill directly:
#
# ```bash
# .venv/bin/jupytext --to ipynb notebooks/04_leakage_audit.py -o book/_build/04.ipynb
# .venv/bin/papermill book/_build/04.ipynb book/_build/04-out.ipynb \
#     -p profile smoke -p n_seeds 3
# ```
#
# Profiles: `smoke` (seconds per chapter; tests and CI), `cpu` (this book on a 2-core
# laptop), `paper` (the papers' scale; paper B wants a GPU). Data are read from
# `$SEMLM_DATA_DIR` (see `data/README.md`); nothing is downloaded unless you pass
# `--allow-downloads`. On a GPU the paper-B chapters use CUDA and bf16 automatically;
# multi-GPU training goes through `accelerate launch` (see chapter 6).

# %% tags=["remove-input"]
report.parameters_frame(manifest["parameters"])

# %% tags=["remove-cell"]
chapter.close({"claims": claims, "summary": summary, "counts": report.verdict_counts(claims),
               "manifest": manifest, "modified_data": modified or None})
