# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
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
# A claim is **reproduced** when our causal language model supports it, **not reproduced**
# when it does not, **not meaningful as published** when the paper's number comes from a
# model that sees the word it predicts (paper A's encoder without a causal mask), and **not
# run at this profile** when this build did not run the chapter or scale it needs. The
# *published* column is our re-run of the paper's own (non-causal) setting; the *causal*
# column is the language model; the interval is a 95% interval over seeds where the chapter
# trained several.

# %% tags=["parameters"]
# reads the other chapters' metrics: seconds at every profile
profile = "cpu"
seed = 111

# %%

import pandas as pd

from semlm.book.claims import STATUSES, evaluate_claims
from semlm.profiles import check_parameters
from semlm.book.report import (
    ChapterTimer,
    chapter_parameters,
    load_metrics,
    metrics_dir,
    write_chapter_metrics,
)

check_parameters(profile=profile, seed=seed)
timer = ChapterTimer()
metrics = load_metrics()
claims = evaluate_claims(metrics)
print(f"{len(metrics)} chapter records in {metrics_dir()}")

# %% [markdown]
# ## Claims

# %% tags=["remove-input", "full-width"]
STATUS_COLOURS = {
    "reproduced": "#d8f0d8",
    "not reproduced": "#f6d5d5",
    "not meaningful as published": "#fbecc8",
    "not run at this profile": "#e6e6e6",
    "inconclusive": "#dde6f3",
    "holds by construction": "#ece3f5",
    "not testable at this scale": "#f3eadb",
}


def show_value(value):
    if isinstance(value, float):
        return f"{value:.4g}"
    return "" if value is None else str(value)


table = pd.DataFrame(
    [
        {
            "paper": row["paper"],
            "claim": row["claim"],
            "paper value": show_value(row["paper_value"]),
            "published setting (ours)": show_value(row["published_value"]),
            "causal (ours)": show_value(row["causal_value"]),
            "95% CI": (
                ""
                if row["ci"] is None
                else f"[{row['ci'][0]:.3g}, {row['ci'][1]:.3g}]"
            ),
            "profile": row["profile"] or "",
            "status": row["status"],
            "why": row["reason"],
            "rule": row.get("rule", ""),
        }
        for row in claims
    ]
)
(
    table.style.hide(axis="index")
    .map(
        lambda status: f"background-color: {STATUS_COLOURS[status]}",
        subset=["status"],
    )
    .set_properties(
        **{"text-align": "left", "font-size": "0.8em", "vertical-align": "top"}
    )
    .set_properties(subset=["why"], **{"min-width": "20em"})
    .set_properties(subset=["rule"], **{"min-width": "16em"})
    .set_properties(subset=["claim"], **{"min-width": "12em"})
)

# %% tags=["remove-input"]
counts = (
    pd.Series([row["status"] for row in claims])
    .value_counts()
    .reindex(STATUSES, fill_value=0)
)
counts.rename("claims").to_frame()

# %% [markdown]
# ## Run manifest
#
# Where and how every chapter ran: its profile and seed, wall time, peak resident memory
# (the chapter's kernel and its finished worker processes), and the commit and packages it
# ran with.

# %% tags=["remove-input"]
chapters = pd.DataFrame(
    [
        {
            "chapter": name,
            "profile": rec.get("profile"),
            "seed": rec.get("seed"),
            "wall time (s)": rec.get("wall_seconds"),
            "peak memory (MiB)": rec.get("peak_memory_mb"),
            "git commit": (rec.get("git_commit") or "")[:10],
        }
        for name, rec in metrics.items()
    ]
).set_index("chapter")
chapters

# %% tags=["remove-input"]
first = next(iter(metrics.values()), {})
hardware = {
    "CPU": first.get("cpu_model"),
    "CPU cores": first.get("cpu_count"),
    "GPU": first.get("gpu") or "none",
    "machine": first.get("machine"),
    "python": first.get("python"),
    "total chapter wall time (min)": round(
        sum(r.get("wall_seconds", 0) for r in metrics.values()) / 60, 1
    ),
}
pd.Series(hardware, name="value").to_frame()

# %% tags=["remove-input"]
pd.Series(first.get("packages", {}), name="version").to_frame()

# %% [markdown]
# ### Benchmarks of this build
#
# The figures `make bench` prints, as recorded by the benchmark chapter of this build.

# %% tags=["remove-input"]
bench_record = metrics.get("bench", {})
bench_rows = {
    k: v
    for k, v in bench_record.items()
    if isinstance(v, (int, float))
    and not isinstance(v, bool)
    and k not in ("seed", "cpu_count", "wall_seconds", "peak_memory_mb")
}
(
    pd.Series(bench_rows, name="value").to_frame()
    if bench_rows
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
params = chapter_parameters()
pd.DataFrame(
    [
        {"chapter": name, "parameter": key, "default": repr(value)}
        for name, values in params.items()
        for key, value in values.items()
    ]
).set_index(["chapter", "parameter"])

# %%
manifest = {
    "chapters": {
        name: {
            k: rec.get(k)
            for k in (
                "profile",
                "seed",
                "wall_seconds",
                "peak_memory_mb",
                "git_commit",
            )
        }
        for name, rec in metrics.items()
    },
    "hardware": hardware,
    "packages": first.get("packages", {}),
    "bench": bench_rows,
    "parameters": params,
}
write_chapter_metrics(
    "report",
    profile,
    seed,
    {"claims": claims, "manifest": manifest},
    timer.seconds,
)
