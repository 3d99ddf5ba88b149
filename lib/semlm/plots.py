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

from semlm.fusion.fuzzy import CENTRES, FEATURE_NAMES, TAU, triangular_memberships

#: The colour of every model, arm and variant the figures name.
COLOURS = {"baseline": "#7f7f7f", "plain": "#7f7f7f", "fusion": "#1f77b4", "data": "#1f77b4", "intent": "#1f77b4",
           "paper": "#d62728", "shuffled": "#d62728", "gated": "#2ca02c", "control_code": "#2ca02c",
           "gated (ungated logits)": "#98df8a", "no_request": "#9467bd"}

sns.set_theme(context="notebook", style="whitegrid", font_scale=0.95)  # the book's style
plt.rcParams.update({"figure.dpi": 110, "savefig.bbox": "tight", "axes.titleweight": "bold"})


def _band(ax, x, frame, columns, colour=None, alpha: float = 0.2, **line) -> str:
    """A mean column of ``frame`` against ``x`` with its 95% band in the line's colour (the cycle's next if
    ``colour`` is None), which it returns; ``columns``: (mean, low, high), or ``m`` for (m, m_low, m_high)."""
    mean, low, high = (columns, f"{columns}_low", f"{columns}_high") if isinstance(columns, str) else columns
    drawn, = ax.plot(x, frame[mean], color=colour, **line)
    ax.fill_between(x, frame[low], frame[high], color=drawn.get_color(), alpha=alpha)
    return drawn.get_color()


def _tight(fig, title: str = ""):
    """``fig`` laid out tightly, under its bold ``title`` if there is one."""
    if title:
        fig.suptitle(title, fontweight="bold")
    fig.tight_layout()
    return fig


def _grouped_bars(ax, rows: pd.DataFrame, x: str, hue: str, hues: Sequence[str], columns: Sequence[str], colour,
                  capsize: float) -> list:
    """Bars of ``rows`` side by side for each of ``hues`` (values of column ``hue``) at each value of column ``x``,
    with error bars; ``columns``: (mean, low, high); ``colour(j, name)`` colours the j-th hue. Returns the x values."""
    mean, low, high = columns
    xs = list(dict.fromkeys(rows[x]))
    width = 0.8 / max(len(hues), 1)
    for j, name in enumerate(hues):
        part = rows[rows[hue] == name].set_index(x).reindex(xs)
        error = np.vstack([part[mean] - part[low], part[high] - part[mean]]).clip(min=0)
        ax.bar(np.arange(len(xs)) + (j - (len(hues) - 1) / 2) * width, part[mean], width, yerr=error,
               capsize=capsize, label=name, color=colour(j, name))
    return xs


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
    if ax is None:
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
    return _tight(fig)


def plot_validation_curves(curves: Mapping[tuple[str, str], Sequence[float]],
                           paper: Mapping[str, Mapping[int, float]] | None = None):
    """Validation perplexity per epoch; keys are (setting, model). ``paper`` adds the published points.

    One panel per setting: the published (non-causal) setting's perplexities are not
    language-model perplexities, so the two never share an axis.
    """
    settings = list(dict.fromkeys(s for s, _ in curves))
    fig, axes = plt.subplots(1, len(settings), figsize=(5.6 * len(settings), 3.6), squeeze=False)
    for ax, setting in zip(axes[0], settings):
        for model, values in ((model, values) for (s, model), values in curves.items() if s == setting):
            ax.plot(np.arange(1, len(values) + 1), values, marker="o", color=COLOURS.get(model),
                    label=f"{model} (this build)")
        if paper and setting == "published":
            for model, points in paper.items():
                ax.scatter(list(points), list(points.values()), marker="x", s=60, color=COLOURS.get(model),
                           label=f"{model} (paper)", zorder=3)
        ax.set(yscale="log", xlabel="epoch", ylabel="validation perplexity (log scale)",
               title="causal (language model)" if setting == "causal" else "published setting (non-causal)")
        ax.legend(frameon=False, fontsize=8)
    return _tight(fig)


def plot_table1_comparison(frame: pd.DataFrame, metric: str = "ppl"):
    """Grouped bars of one metric: rows of ``frame`` have columns source, model, value."""
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    sns.barplot(frame, x="source", y="value", hue="model", palette=COLOURS, ax=ax)
    for container in ax.containers:
        ax.bar_label(container, fmt="%.3f", fontsize=8, padding=2)
    ax.set(xlabel="", ylabel=metric, title=f"{metric}: paper vs this build")
    ax.legend(frameon=False)
    return fig


def plot_focus_ce(frame: pd.DataFrame):
    """Focus-token cross-entropy (nats), one bar per token and model; ``frame``: token, model, setting, ce."""
    g = sns.catplot(frame, x="token", y="ce", hue="model", col="setting", kind="bar", palette=COLOURS,
                    height=3.4, aspect=1.4, sharey=False)
    g.set_axis_labels("gold next token", "cross-entropy (nats)")
    g.set_titles("{col_name}")
    return g.figure


def plot_confusion(counts: Mapping[str, Mapping[str, int]], title: str = "intended vs realised polarity"):
    """Heatmap of counts, rows = intended, columns = realised (POS / NEG / OTHER), annotated."""
    fig, ax = plt.subplots(figsize=(4.2, 2.8))
    sns.heatmap(pd.DataFrame(counts).T, annot=True, fmt="d", cmap="Blues", cbar=False, ax=ax, linewidths=0.5)
    ax.set(xlabel="realised", ylabel="intended", title=title)
    return fig


def plot_control_curve(frame: pd.DataFrame):
    """Accuracy (with its 95% interval) against control strength; ``frame``: strength, accuracy, low, high, series."""
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for name, rows in frame.groupby("series", sort=False):
        _band(ax, rows["strength"], rows, ("accuracy", "low", "high"), alpha=0.15, marker="o", label=name)
    ax.set(xlabel="control value", ylabel="accuracy", ylim=(-0.02, 1.02), title="soft control (no class restriction)")
    ax.legend(frameon=False, fontsize=8)
    return fig


def plot_ood_sweep(frame: pd.DataFrame, reference: float, paper: Mapping[str, float] | None = None):
    """Held-out hit rate against mixture weight alpha; ``frame``: alpha, rate, low, high, class."""
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for name, rows in frame.groupby("class", sort=False):
        colour = _band(ax, rows["alpha"], rows, ("rate", "low", "high"), alpha=0.15, marker="o",
                       label=f"{name} (this build)")
        if paper and name in paper:
            ax.scatter([paper[name][0]], [paper[name][1]], marker="x", s=70, color=colour,
                       label=f"{name} (paper)", zorder=3)
    ax.axhline(reference, color="0.3", ls="--", lw=1, label=f"class-uniform reference ({reference:.1f})")
    ax.set(xlabel=r"mixture weight $\alpha$", ylabel="held-out adjective rate", ylim=(-0.02, 1.02),
           title="out-of-distribution control")
    ax.legend(frameon=False, fontsize=8)
    return fig


def plot_seed_intervals(frame: pd.DataFrame, title: str = "",
                        references: Mapping[str, Mapping[str, float]] | None = None):
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
        ax.scatter(rows["value"], [y[r] + 0.18 for r in rows["row"]], s=12, color=COLOURS["fusion"], alpha=0.7,
                   label="one seed")
        for label, values in (references or {}).items():
            if metric in values and values[metric] is not None and np.isfinite(values[metric]):
                color, ls = styles.get(label, ("0.5", "-."))
                ax.axvline(values[metric], color=color, ls=ls, lw=1, label=label)
        ax.set_yticks(range(len(order)), order)
        ax.invert_yaxis()
        ax.set(xlabel=metric, title=metric)
    axes[0][-1].legend(frameon=False, fontsize=7, loc="best")
    return _tight(fig, title)


def plot_sst2_control(frame: pd.DataFrame):
    """Control accuracy on real text with 95% intervals; ``frame``: request, mode, series, value, low, high.

    One panel per request (pos / neg); bars per decoding mode, one colour per series
    (model and judge, e.g. "fusion, VADER").
    """
    requests = list(dict.fromkeys(frame["request"]))
    fig, axes = plt.subplots(1, len(requests), figsize=(5.6 * len(requests), 3.6), sharey=True, squeeze=False)
    for ax, request in zip(axes[0], requests):
        rows = frame[frame["request"] == request]
        modes = _grouped_bars(ax, rows, "mode", "series", list(dict.fromkeys(rows["series"])), ("value", "low", "high"),
                              lambda j, _: sns.color_palette("Paired")[j % 12], capsize=3)
        ax.set_xticks(np.arange(len(modes)), modes)
        ax.set(ylim=(0, 1.02), xlabel="control", ylabel="share judged as requested",
               title=f"requested polarity: {request}")
    axes[0][-1].legend(frameon=False, fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return _tight(fig)


# --- paper B: idea-gated Transformer (chapters 6 and 7) ----------------------------------------

def plot_gate_curves(alphas: Sequence[float] = (0.25, 0.5, 1.0), beta: float = -2.0, eps: float = 1e-8):
    """The additive gate against the idea probability p, both published variants, for a few alphas."""
    p = np.logspace(-6, 0, 400)
    log_p = np.log(p + eps)
    fig, axes = plt.subplots(1, 2, figsize=(9.6, 3.4), sharey=True)
    for ax, (variant, title) in zip(axes, (("clamp_then_scale", r"v1: $\alpha\,\max(\log(p+\epsilon), \beta)$"),
                                           ("scale_then_clamp", r"v2: $\max(\alpha\log(p+\epsilon), \beta)$"))):
        for alpha in alphas:
            gate = alpha * np.maximum(log_p, beta) if variant == "clamp_then_scale" else np.maximum(alpha * log_p, beta)
            ax.plot(p, gate, lw=2, label=rf"$\alpha$ = {alpha}")
        ax.axhline(beta, color="0.5", ls=":", lw=1)
        ax.set(xscale="log", xlabel="idea probability p", title=title)
    axes[0].set_ylabel("added to the token logit")
    axes[0].legend(frameon=False, fontsize=8)
    return _tight(fig)


def plot_loss_form_curves(curves: pd.DataFrame):
    """Validation perplexity and idea BCE per counted column (when logged) against the iteration, one line per
    model; ``curves``: model, step and the logged columns (chapter 6's two idea-loss forms)."""
    values = ["val_ppl", "idea_bce_per_column"] if "idea_bce_per_column" in curves else ["val_ppl"]
    return sns.relplot(data=curves.melt(id_vars=["model", "step"], value_vars=values).dropna(), x="step", y="value",
                       hue="model", col="variable", kind="line", marker="o", facet_kws={"sharey": False}, height=3.2,
                       aspect=1.3)


def plot_validation_history(runs: Mapping, models: Sequence[str] = ("baseline", "gated")):
    """Validation perplexity against the iteration of each of ``models`` (run records by name)."""
    curve = pd.DataFrame([{"model": n, "step": row["step"], "validation PPL": row["val_ppl"]}
                          for n in models for row in runs[n].history])
    return sns.relplot(data=curve, x="step", y="validation PPL", hue="model", kind="line", marker="o", height=3.2,
                       aspect=1.5)


def plot_domain_retention(frame: pd.DataFrame, metrics: Sequence[str] = ("stickiness", "unique_density", "distinct_2")):
    """Bars with 95% intervals per domain and model; ``frame``: domain, model, metric, mean, ci_low, ci_high."""
    fig, axes = plt.subplots(1, len(metrics), figsize=(4.3 * len(metrics), 3.5), squeeze=False)
    models = list(dict.fromkeys(frame["model"]))
    for ax, metric in zip(axes[0], metrics):
        rows = frame[frame["metric"] == metric]
        domains = _grouped_bars(ax, rows, "domain", "model", models, ("mean", "ci_low", "ci_high"),
                                lambda _, model: COLOURS.get(model), capsize=2)
        ax.set_xticks(np.arange(len(domains)), domains, rotation=30)
        ax.set(title=metric.replace("_", " "), ylabel="")
    axes[0][0].legend(frameon=False, fontsize=8)
    return _tight(fig)


def plot_xray(xrays: Sequence[Mapping], top: int = 8):
    """Change in log-probability (nats) of the tokens the gate boosts (green) and suppresses (red), per prompt."""
    fig, axes = plt.subplots(1, len(xrays), figsize=(3.6 * len(xrays), 3.8), squeeze=False)
    for ax, xr in zip(axes[0], xrays):
        rows = list(xr["boosted"][:top]) + list(reversed(xr["suppressed"][:top]))
        values = [r["delta_logprob"] for r in rows]
        ax.barh(np.arange(len(rows)), values, color=["#2ca02c" if v >= 0 else "#d62728" for v in values])
        ax.set_yticks(np.arange(len(rows)), [repr(r["token"]) for r in rows], fontsize=7)
        ax.invert_yaxis()
        ax.axvline(0, color="0.3", lw=0.8)
        ax.set(xlabel=r"$\Delta \log p$ (gated - ungated)", title=xr["prompt"].strip()[:28] + "...")
        ax.title.set_fontsize(8)
    return _tight(fig)


def plot_sweep(frame: pd.DataFrame, x: str, metrics: Sequence[str], title: str = ""):
    """One panel per metric against the swept parameter; ``frame`` has columns x, <metric>, and optionally
    <metric>_low / <metric>_high for a 95% interval."""
    fig, axes = plt.subplots(1, len(metrics), figsize=(3.4 * len(metrics), 3.0), squeeze=False)
    for ax, metric in zip(axes[0], metrics):
        if f"{metric}_low" in frame:
            _band(ax, frame[x], frame, metric, COLOURS["gated"], marker="o")
        else:
            ax.plot(frame[x], frame[metric], marker="o", color=COLOURS["gated"])
        ax.set(xlabel=x, title=metric.replace("_", " "))
    return _tight(fig, title)


def plot_loops(frame: pd.DataFrame):
    """Repetition rate (mean, 95% interval) under greedy decoding against alpha, with and without the mitigation;
    ``frame``: alpha, decoder, mean, ci_low, ci_high."""
    fig, ax = plt.subplots(figsize=(5.6, 3.4))
    for name, rows in frame.groupby("decoder", sort=False):
        _band(ax, rows["alpha"], rows, ("mean", "ci_low", "ci_high"), alpha=0.15, marker="o", label=name)
    ax.set(xlabel=r"gate strength $\alpha$", ylabel="repeated 4-grams (share)", ylim=(-0.02, 1.02),
           title="greedy decoding: repetition loops")
    ax.legend(frameon=False, fontsize=8)
    return fig


# --- paper B, LoRA on a frozen backbone (chapter 8) ---------------------------------------------

def plot_lora_curves(frame: pd.DataFrame):
    """Validation perplexity against the optimiser step; ``frame``: model, quantization, step, val_ppl.

    Colours follow the idea-gating chapters, line style the quantisation (solid NF4, dashed float32).
    """
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for (model, quantization), rows in frame.groupby(["model", "quantization"], sort=False):
        ax.plot(rows["step"], rows["val_ppl"], marker="o", ms=3, ls="--" if quantization == "none" else "-",
                color=COLOURS.get(model), label=f"{model}, {'NF4' if quantization == 'nf4' else 'float32'}")
    ax.set(xlabel="optimiser step", ylabel="validation perplexity", title="LoRA on the frozen backbone: FineWeb-Edu")
    ax.legend(frameon=False, fontsize=8)
    return fig


# --- paper B, topic drift with a ground truth (chapter 9) ---------------------------------------

def plot_drift_learning_curve(frame: pd.DataFrame):
    """Chapter 9's learning curve: excess drift (switch rate minus the data's rate; the zero line *is* the
    data's rate, below it the model drifts less than the data), within-sentence mixing and validation
    perplexity of the plain and gated models against the training budget, with 95% intervals over seeds.
    ``frame``: :meth:`semlm.idea.topic_report.LearningCurve.frame`."""
    fig, axes = plt.subplots(1, 3, figsize=(11.5, 3.4))
    for kind in ("plain", "gated"):
        rows = frame[frame["model"] == kind]
        for ax, metric in zip(axes, ("excess_drift", "mix_rate", "val_ppl")):
            _band(ax, rows["steps"], rows, metric, COLOURS[kind], marker="o", label=kind)
    axes[0].axhline(0.0, color=COLOURS["data"], ls=":", lw=1.2, label="data's rate")
    low = min(0.0, float(frame["excess_drift_low"].min()))
    axes[0].axhspan(low - 0.05, 0.0, color="0.85", alpha=0.5, lw=0, label="below the data (miscalibrated)")
    axes[0].set(ylabel="switch rate - data's rate", title="excess drift")
    axes[1].set(ylabel="share of topical sentences", title="mixing inside a sentence")
    axes[2].set(ylabel="validation perplexity", title="perplexity")
    for ax in axes:
        ax.set(xlabel="training budget (optimiser steps)")
    axes[0].legend(frameon=False, fontsize=7)
    return _tight(fig)


def plot_topic_decision(decision, miscalibration: float):
    """Chapter 9's deciding comparison as a forest: the excess drift of each arm (gated, plain at matched PPL,
    the sharpening control, the gate off) and the two paired differences, each with its 95% interval over
    seeds; the zero line of the left panel is the data's rate, the band below ``miscalibration`` is drifting
    less than the data. ``decision``: a :class:`~semlm.idea.records.TopicDecision`."""
    arms = [("gated", "gated", COLOURS["gated"]), ("plain_at_matched_ppl", "plain, matched PPL", COLOURS["plain"]),
            ("sharpened_plain", "plain, sharpened", "#9467bd"), ("gate_off", "gated, gate off", "#8c564b")]
    diffs = [("gated_minus_plain", "gated - plain"), ("gated_minus_sharpened", "gated - sharpened")]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 2.9), gridspec_kw={"width_ratios": [1.3, 1]})
    for ax, rows in ((left, arms), (right, [(n, label, "k") for n, label in diffs])):
        for y, (name, label, colour) in enumerate(reversed(rows)):
            value = getattr(decision, name)
            ax.errorbar(value.mean, y, xerr=[[value.mean - value.low], [value.high - value.mean]], fmt="o",
                        color=colour, capsize=3)
            if value.values:
                ax.scatter(value.values, [y + 0.18] * len(value.values), s=8, color=colour, alpha=0.5)
        ax.set_yticks(range(len(rows)), [label for _, label, _ in reversed(rows)])
        ax.axvline(0.0, color=COLOURS["data"], ls=":", lw=1.2)
        ax.xaxis.set_major_locator(plt.MaxNLocator(5))
    low = min(miscalibration, *(getattr(decision, n).low for n, _, _ in arms)) - 0.05
    left.axvspan(low, miscalibration, color="0.85", alpha=0.5, lw=0, label="drifts less than the data")
    left.set(xlabel="excess drift (switch rate - data's rate)", title="arms (dots: seeds)")
    right.set(xlabel="paired by seed", title="the two differences the rule reads")
    left.legend(frameon=False, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.3))
    return _tight(fig)


def plot_alpha_sweep(frame: pd.DataFrame, switch_prob: float, plain_rate: float):
    """The gated models decoded at other gate strengths: switch rate against alpha next to the data's rate
    (below it the gate over-sticks: miscalibration), and validation perplexity against alpha. ``frame`` has
    columns alpha, switch_rate(_low/_high), mix_rate(_low/_high), ppl(_low/_high)."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.6, 3.4))
    colour = COLOURS["gated"]
    _band(left, frame["alpha"], frame, "switch_rate", colour, marker="o", label="switch rate (gated)")
    _band(left, frame["alpha"], frame, "mix_rate", "#ff7f0e", marker="s", label="mix rate (gated)")
    left.axhline(switch_prob, color=COLOURS["data"], ls=":", lw=1.4, label=f"data's rate ({switch_prob:g})")
    left.axhspan(0.0, switch_prob, color="0.85", alpha=0.5, lw=0, label="below the data (miscalibrated)")
    left.axhline(plain_rate, color=COLOURS["plain"], ls="--", lw=1.2, label="plain model's switch rate")
    _band(right, frame["alpha"], frame, "ppl", colour, marker="o", label="gated")
    left.set(xlabel=r"gate strength $\alpha$ at inference", ylabel="rate", title="drift against the data's rate")
    right.set(xlabel=r"gate strength $\alpha$ at inference", ylabel="validation perplexity", title="perplexity")
    left.legend(frameon=False, fontsize=7)
    return _tight(fig)


def plot_intensity_response(frame: pd.DataFrame, reference: float):
    """Written intensity against the requested strength level, one line per variant with its 95% band over
    seeds (``frame``: variant, level, kind, mean, ci_low, ci_high); filled markers at the levels training
    writes (``kind`` trained), hollow ones at the interpolations. ``reference`` is the unconditioned
    baseline's mean written intensity; the diagonal is a model that writes exactly what was requested."""
    fig, ax = plt.subplots(figsize=(5.2, 3.6))
    ax.plot([0.2, 1.0], [0.2, 1.0], color="0.6", lw=0.8, ls="--", label="writes what was requested")
    for variant, part in frame.groupby("variant", sort=False):
        colour = _band(ax, part["level"], part, ("mean", "ci_low", "ci_high"), COLOURS.get(variant, "#ff7f0e"),
                       label=variant)
        trained = part["kind"] == "trained"
        ax.scatter(part["level"][trained], part["mean"][trained], color=colour, zorder=3)
        ax.scatter(part["level"][~trained], part["mean"][~trained], facecolor="white", edgecolor=colour, zorder=3)
    ax.axhline(reference, color=COLOURS["baseline"], ls=":", lw=1.2, label="baseline (no request)")
    ax.set(xlabel="requested strength level (whole str_* triplet; hollow: interpolated)",
           ylabel="written intensity (mean strength)", ylim=(0.1, 1.05),
           title="intensity response (95% bands over seeds)")
    ax.legend(frameon=False, fontsize=8)
    return fig


def plot_intent_control(frame: pd.DataFrame):
    """Features-only control accuracy per variant with 95% intervals over seeds, one panel per metric
    (``frame``: variant, metric, mean, ci_low, ci_high)."""
    metrics = list(dict.fromkeys(frame["metric"]))
    fig, axes = plt.subplots(1, len(metrics), figsize=(4.4 * len(metrics), 3.4), squeeze=False)
    for ax, metric in zip(axes[0], metrics):
        part = frame[frame["metric"] == metric]
        x = np.arange(len(part))
        err = np.vstack([part["mean"] - part["ci_low"], part["ci_high"] - part["mean"]]).clip(min=0)
        ax.bar(x, part["mean"], 0.6, yerr=err, capsize=4,
               color=[COLOURS.get(v, "#ff7f0e") for v in part["variant"]])
        ax.set_xticks(x, part["variant"], rotation=20)
        ax.set(ylim=(0, 1.05), title=metric)
    axes[0][0].set_ylabel("accuracy against the request")
    return _tight(fig)


def plot_cpu_breakdown(frame: pd.DataFrame):
    """Where a build's CPU-seconds went (``frame``: build, part, cpu_seconds): one stacked bar per build."""
    table = frame.pivot_table(index="build", columns="part", values="cpu_seconds", aggfunc="sum", sort=False).fillna(0)
    fig, ax = plt.subplots(figsize=(8, 0.8 + 0.6 * len(table)))
    table.plot.barh(stacked=True, ax=ax, colormap="tab10", width=0.6)
    ax.set(xlabel="CPU-seconds", ylabel="")
    ax.invert_yaxis()
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.35 if len(table) < 3 else -0.2), ncol=2, frameon=False)
    return _tight(fig)
