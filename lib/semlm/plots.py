"""Every figure of the book, in one place and one style (seaborn).

Functions take plain data (arrays, dicts, data frames) and return the matplotlib
``Figure`` so notebooks stay one line per figure and tests can call them headlessly.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib

if matplotlib.get_backend().lower() not in {"module://matplotlib_inline.backend_inline", "agg"}:
    matplotlib.use("Agg")  # headless by default (tests, CI); notebooks keep their inline backend
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from .fuzzy import CENTRES, FEATURE_NAMES, TAU, triangular_memberships

PALETTE = {"baseline": "#7f7f7f", "fusion": "#1f77b4", "paper": "#d62728"}
SETTING_STYLE = {"causal": "-", "published": "--"}


def use_book_style() -> None:
    sns.set_theme(context="notebook", style="whitegrid", font_scale=0.95)
    plt.rcParams.update({"figure.dpi": 110, "savefig.bbox": "tight", "axes.titleweight": "bold"})


use_book_style()


def plot_memberships(centres: Sequence[float] = CENTRES, tau: float = TAU, marks: Mapping[str, float] | None = None):
    """The low / med / high power-kernel memberships over x in [0, 1] (paper Eq. 1).

    ``marks`` (label -> x) draws vertical lines, e.g. the intensifier strengths.
    """
    x = np.linspace(0, 1, 401)
    tri = triangular_memberships(x, centres, tau)
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    for j, (label, c) in enumerate(zip(("low", "med", "high"), centres)):
        ax.plot(x, tri[:, j], lw=2, label=f"{label} (c = {c})")
    for name, value in (marks or {}).items():
        ax.axvline(value, color="0.5", lw=0.8, ls=":")
        ax.text(value, 1.005, name, rotation=90, va="bottom", ha="center", fontsize=8, color="0.3")
    ax.set(xlabel="signal x", ylabel=r"membership $\mu(x; c, \tau)$", ylim=(0.6, 1.02))
    ax.set_title(rf"Power-kernel memberships, $\tau$ = {tau}", pad=48 if marks else 6)
    ax.legend(loc="lower center", ncols=3, frameon=False)
    return fig


def plot_semantic_matrix(features: np.ndarray, tokens: Sequence[str], title: str = "", ax=None,
                         feature_names: Sequence[str] = FEATURE_NAMES, vmin: float = 0.0, vmax: float = 1.0,
                         cmap: str = "mako_r", annotate: bool = False):
    """Heatmap of a sentence's semantic matrix S (tokens x predicates)."""
    features = np.asarray(features)
    own = ax is None
    if own:
        fig, ax = plt.subplots(figsize=(0.42 * len(feature_names) + 1.5, 0.32 * len(tokens) + 1.2))
    sns.heatmap(pd.DataFrame(features, index=list(tokens), columns=list(feature_names)), ax=ax, cmap=cmap,
                vmin=vmin, vmax=vmax, linewidths=0.3, linecolor="white", cbar_kws={"shrink": 0.6},
                annot=annotate, fmt=".2f", annot_kws={"fontsize": 6})
    ax.set(title=title, xlabel="", ylabel="")
    ax.tick_params(axis="x", labelrotation=90, labelsize=8)
    ax.tick_params(axis="y", labelrotation=0, labelsize=9)
    return ax.figure


def plot_future_sensitivity(changes: Mapping[str, np.ndarray], tokens: Sequence[str], changed_at: int,
                            feature_names: Sequence[str] = FEATURE_NAMES):
    """Side-by-side heatmaps of |S(a) - S(b)| for two sentences that differ only from ``changed_at`` on.

    In a causal featurizer every row above the dashed line must be zero. The colour scale
    is set by the largest change *above* the line, so a small leak stands out (the changed
    rows below it saturate).
    """
    fig, axes = plt.subplots(1, len(changes), figsize=(7.2 * len(changes), 0.34 * len(tokens) + 1.6), sharey=True)
    axes = np.atleast_1d(axes)
    vmax = max(float(np.max(v[:changed_at])) for v in changes.values()) or 1.0
    for ax, (title, diff) in zip(axes, changes.items()):
        plot_semantic_matrix(diff, tokens, title=title, ax=ax, feature_names=feature_names,
                             vmin=0.0, vmax=vmax, cmap="rocket_r")
        ax.axhline(changed_at, color="#d62728", lw=1.5, ls="--")
    fig.tight_layout()
    return fig


def plot_validation_curves(curves: Mapping[tuple[str, str], Sequence[float]],
                           paper: Mapping[str, Mapping[int, float]] | None = None):
    """Validation perplexity per epoch; keys are (setting, model). ``paper`` adds the published points.

    One panel per setting: the published (non-causal) setting's perplexities are not
    language-model perplexities, so the two never share an axis.
    """
    settings = list(dict.fromkeys(s for s, _ in curves))
    fig, axes = plt.subplots(1, len(settings), figsize=(5.6 * len(settings), 3.6), squeeze=False)
    for ax, setting in zip(axes[0], settings):
        for (s, model), values in curves.items():
            if s != setting:
                continue
            epochs = np.arange(1, len(values) + 1)
            ax.plot(epochs, values, marker="o", color=PALETTE.get(model), label=f"{model} (this build)")
        if paper and setting == "published":
            for model, points in paper.items():
                ax.scatter(list(points), list(points.values()), marker="x", s=60, color=PALETTE.get(model),
                           label=f"{model} (paper)", zorder=3)
        ax.set(yscale="log", xlabel="epoch", ylabel="validation perplexity (log scale)",
               title="causal (language model)" if setting == "causal" else "published setting (non-causal)")
        ax.legend(frameon=False, fontsize=8)
    fig.tight_layout()
    return fig


def plot_table1_comparison(frame: pd.DataFrame, metric: str = "ppl"):
    """Grouped bars of one metric: rows of ``frame`` have columns source, model, value."""
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    sns.barplot(frame, x="source", y="value", hue="model", palette=PALETTE, ax=ax)
    for container in ax.containers:
        ax.bar_label(container, fmt="%.3f", fontsize=8, padding=2)
    ax.set(xlabel="", ylabel=metric, title=f"{metric}: paper vs this build")
    ax.legend(frameon=False)
    return fig


def plot_focus_ce(frame: pd.DataFrame):
    """Focus-token cross-entropy (nats), one bar per token and model; ``frame``: token, model, setting, ce."""
    g = sns.catplot(frame, x="token", y="ce", hue="model", col="setting", kind="bar", palette=PALETTE,
                    height=3.4, aspect=1.4, sharey=False)
    g.set_axis_labels("gold next token", "cross-entropy (nats)")
    g.set_titles("{col_name}")
    return g.figure


def plot_confusion(counts: Mapping[str, Mapping[str, int]], title: str = "intended vs realised polarity", ax=None):
    """Heatmap of counts, rows = intended, columns = realised (POS / NEG / OTHER), annotated."""
    frame = pd.DataFrame(counts).T
    own = ax is None
    if own:
        fig, ax = plt.subplots(figsize=(4.2, 2.8))
    sns.heatmap(frame, annot=True, fmt="d", cmap="Blues", cbar=False, ax=ax, linewidths=0.5)
    ax.set(xlabel="realised", ylabel="intended", title=title)
    return ax.figure


def plot_control_curve(frame: pd.DataFrame, reference: float | None = None):
    """Accuracy (with its 95% interval) against control strength; ``frame``: strength, accuracy, low, high, series."""
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for name, rows in frame.groupby("series", sort=False):
        line, = ax.plot(rows["strength"], rows["accuracy"], marker="o", label=name)
        ax.fill_between(rows["strength"], rows["low"], rows["high"], color=line.get_color(), alpha=0.15)
    if reference is not None:
        ax.axhline(reference, color="0.4", ls=":", lw=1)
    ax.set(xlabel="control value", ylabel="accuracy", ylim=(-0.02, 1.02), title="soft control (no class restriction)")
    ax.legend(frameon=False, fontsize=8)
    return fig


def plot_ood_sweep(frame: pd.DataFrame, reference: float, paper: Mapping[str, float] | None = None):
    """Held-out hit rate against mixture weight alpha; ``frame``: alpha, rate, low, high, class."""
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for name, rows in frame.groupby("class", sort=False):
        line, = ax.plot(rows["alpha"], rows["rate"], marker="o", label=f"{name} (this build)")
        ax.fill_between(rows["alpha"], rows["low"], rows["high"], color=line.get_color(), alpha=0.15)
        if paper and name in paper:
            ax.scatter([paper[name][0]], [paper[name][1]], marker="x", s=70, color=line.get_color(),
                       label=f"{name} (paper)", zorder=3)
    ax.axhline(reference, color="0.3", ls="--", lw=1, label=f"class-uniform reference ({reference:.1f})")
    ax.set(xlabel=r"mixture weight $\alpha$", ylabel="held-out adjective rate", ylim=(-0.02, 1.02),
           title="out-of-distribution control")
    ax.legend(frameon=False, fontsize=8)
    return fig


def plot_seed_intervals(frame: pd.DataFrame, title: str = "", references: Mapping[str, Mapping[str, float]] | None = None):
    """One panel per metric: each seed as a dot and the mean with its 95% interval as a bar.

    ``frame`` has columns metric, row (y label, e.g. "causal / fusion"), seed, value, mean,
    ci_low, ci_high. ``references`` maps a label (e.g. "paper", "causal floor") to
    {metric: value}, drawn as vertical lines.
    """
    metrics = list(dict.fromkeys(frame["metric"]))
    fig, axes = plt.subplots(1, len(metrics), figsize=(3.4 * len(metrics), 0.45 * frame["row"].nunique() + 1.6),
                             sharey=True, squeeze=False)
    styles = {"paper": ("#d62728", "--"), "causal floor": ("0.2", ":")}
    for ax, metric in zip(axes[0], metrics):
        rows = frame[frame["metric"] == metric]
        order = list(dict.fromkeys(rows["row"]))
        y = {name: i for i, name in enumerate(order)}
        summary = rows.drop_duplicates("row")
        ax.errorbar(summary["mean"], [y[r] for r in summary["row"]],
                    xerr=[summary["mean"] - summary["ci_low"], summary["ci_high"] - summary["mean"]],
                    fmt="o", color="black", capsize=3, ms=5, label="mean, 95% CI")
        ax.scatter(rows["value"], [y[r] + 0.18 for r in rows["row"]], s=12, color=PALETTE["fusion"], alpha=0.7,
                   label="one seed")
        for label, values in (references or {}).items():
            if metric in values and values[metric] is not None and np.isfinite(values[metric]):
                color, ls = styles.get(label, ("0.5", "-."))
                ax.axvline(values[metric], color=color, ls=ls, lw=1, label=label)
        ax.set_yticks(range(len(order)), order)
        ax.invert_yaxis()
        ax.set(xlabel=metric, title=metric)
    axes[0][-1].legend(frameon=False, fontsize=7, loc="best")
    if title:
        fig.suptitle(title, fontweight="bold")
    fig.tight_layout()
    return fig
