"""Chapter 7's measurements of the idea-gated GPT: X-ray tables, sweeps of alpha (inference), beta and K
(retrained), greedy repetition loops with and without concentration decay (:class:`Loops`, with ``.table()`` and
``.numbers()``), and the chapter's record (:class:`~semlm.idea.records.XrayRecord`)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import pandas as pd

from semlm.core.metrics import proportion, repetition_rate, summarise
from semlm.idea.records import XrayRecord
from semlm.core.runs import RunRecord, RunSpec
from semlm.idea.gate import xray
from semlm.idea.model import ConcentrationDecay
from semlm.idea.profiles import GenerationSettings, IdeaProfile, IdeaSettings
from semlm.idea.generation import Domain, domain_retention, generate_texts, sample_interval, scored_retention
from semlm.idea.wikitext_experiment import idea_run

SWEEP_METRICS = ("stickiness", "distinct_2", "repetition")
BETAS = (-2.0, -1.5, -1.0)
WINDOWS = (10, 20, 50)   # 20: the reference run (the beta = -2 run)
LOOP_ALPHAS = (0.0, 0.5, 1.0, 2.0)
DECAY = "gate + concentration decay"
#: the loops' verdict by (the strongest gate loops more than no gate, concentration decay lowers it), 95% intervals
LOOP_VERDICTS = {
    (True, True): "the strongest gate loops more than no gate, and concentration decay removes a significant part "
                  "of it",
    (True, False): "the strongest gate loops more than no gate, but concentration decay does not reduce it "
                   "significantly",
    (False, False): "in this build a strong gate does not loop significantly more than no gate (intervals overlap), "
                    "so the mitigation cannot be judged here",
    (False, True): "a strong gate does not loop significantly more than no gate, yet concentration decay still "
                   "lowers repetition"}


# --- X-ray ---------------------------------------------------------------------------------------


def domain_xrays(model, tokenizer, domains: dict[str, Domain], stopword_ids: Sequence[int], top: int = 8) -> dict:
    """:func:`~semlm.idea.gate.xray` of each domain's first prompt; its ``ideas`` leave out the stopwords
    masked out of the idea loss (their idea probability was never trained)."""
    stop, xrays = set(stopword_ids), {}
    for d, domain in domains.items():
        x = xray(model, tokenizer, domain.prompts[0], top=top + len(stop))
        xrays[d] = {**x, "boosted": x["boosted"][:top], "suppressed": x["suppressed"][:top],
                    "ideas": [row for row in x["ideas"] if row["id"] not in stop][:top]}
    return xrays


def _tokens(rows) -> str:
    return " ".join(repr(r["token"]) for r in rows)


def xray_table(xrays: dict, top: int = 6) -> pd.DataFrame:
    """Per domain: the prompt, the boosted and suppressed tokens and the top ideas."""
    return pd.DataFrame([{"domain": d, "prompt": x["prompt"].strip(), "boosted": _tokens(x["boosted"][:top]),
                          "suppressed": _tokens(x["suppressed"][:top]), "top ideas (p_idea)": _tokens(x["ideas"][:top])}
                         for d, x in xrays.items()]).set_index("domain")


# --- sweeps --------------------------------------------------------------------------------------


def sweep_generation(profile: IdeaProfile) -> GenerationSettings:
    """The sweeps' sampling: the profile's, with ``sweep_samples_per_prompt`` and one seed."""
    return replace(profile.generation, samples_per_prompt=profile.sweep_samples_per_prompt, seeds=(0,))


def retention_summary(model, tokenizer, domains: dict[str, Domain], generation: GenerationSettings,
                      alpha: float | None = None, record: RunRecord | None = None) -> dict:
    """Stickiness, distinct-2 and repetition over all domains' samples: ``<metric>``, ``<metric>_low``,
    ``<metric>_high`` (mean and 95% interval), one row of a sweep table. With the model's ``record``, the scores
    are computed once per run and setting (:func:`~semlm.idea.generation.scored_retention`; ``model``
    may then be None: it is loaded only if they must be computed)."""
    res = (domain_retention(model, tokenizer, domains, generation, alpha=alpha) if record is None
           else scored_retention(record, tokenizer, domains, generation, model, alpha))
    out = {}
    for metric in SWEEP_METRICS:
        s = sample_interval([r[metric] for scores in res.values() for r in scores.samples])
        out.update({metric: s.mean, f"{metric}_low": s.low, f"{metric}_high": s.high})
    return out


def gate_sweep_runs(profile: IdeaProfile, settings: IdeaSettings) -> list[RunSpec]:
    """Chapter 7's retrained runs at the sweep budget: a plain GPT, the gated GPT (``settings``: chapter 6's
    chosen loss form) at each beta of :data:`BETAS` and at the windows K of :data:`WINDOWS` but the reference 20."""
    budget = dict(train_tokens=profile.sweep_train_tokens, steps=profile.sweep_steps)
    specs = [idea_run(profile, "sweep-baseline", False, **budget)]
    specs += [idea_run(profile, f"sweep-beta{beta}", True, replace(settings, beta=beta), **budget) for beta in BETAS]
    specs += [idea_run(profile, f"sweep-k{k}", True, replace(settings, window=k), **budget)
              for k in WINDOWS if k != 20]
    return specs


def sweep_tables(sweep_runs: dict[str, RunRecord], tokenizer, domains: dict[str, Domain],
                 generation: GenerationSettings) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """The beta and K sweep tables (validation perplexity, gated and gate off, and :func:`retention_summary`)
    and the row of the plain GPT at the same budget. The reference point (beta = -2, K = 20) is one run."""

    def row(run: RunRecord) -> dict:
        return {"val_ppl": run.metrics.val_ppl, "val_ppl_ungated": run.metrics.val_ppl_ungated,
                **retention_summary(None, tokenizer, domains, generation, record=run)}

    reference = row(sweep_runs["sweep-beta-2.0"])
    beta = pd.DataFrame([{"beta": b, **(reference if b == -2.0 else row(sweep_runs[f"sweep-beta{b}"]))}
                         for b in BETAS])
    k = pd.DataFrame([{"K": k, **(reference if k == 20 else row(sweep_runs[f"sweep-k{k}"]))} for k in WINDOWS])
    return beta, k, row(sweep_runs["sweep-baseline"])


# --- repetition loops ----------------------------------------------------------------------------


def greedy_repetition(model, tokenizer, prompts: Sequence[str], new_tokens: int, **kwargs) -> tuple[list, list[float]]:
    """Greedy continuations (no repetition penalty) and each one's share of repeated token 4-grams."""
    out = generate_texts(model, tokenizer, prompts, 1, new_tokens, seed=0, do_sample=False, repetition_penalty=None,
                         **kwargs)
    return out, [repetition_rate(s["ids"], 4) for s in out]


@dataclass(frozen=True)
class LoopsNumbers:
    """What chapter 7's loops paragraph cites (:meth:`Loops.numbers`): mean repeated-4-gram shares and the verdict."""

    loop_off: float
    loop_strong: float
    loop_mitigated: float
    loop_alpha: float
    loop_baseline: float
    loop_verdict: str


@dataclass(frozen=True)
class Loops:
    """Repetition under greedy decoding, the gated model's gate at each alpha with and without
    :class:`ConcentrationDecay`, with the ``samples`` and the plain GPT's repetition (``baseline``)."""

    frame: pd.DataFrame
    samples: dict
    baseline: dict

    @classmethod
    def measure(cls, gated, baseline, tokenizer, prompts: Sequence[str], new_tokens: int,
                alphas: Sequence[float] = LOOP_ALPHAS) -> "Loops":
        rows, samples = [], {}
        for alpha in alphas:
            for decoder, decay in (("gate", None), (DECAY, ConcentrationDecay())):
                if alpha == 0.0 and decay is not None:
                    continue
                gate = replace(gated.gate, alpha=alpha, decay=decay)
                out, rates = greedy_repetition(gated, tokenizer, prompts, new_tokens, gate=gate)
                loops = proportion(sum(r > 0.5 for r in rates), len(rates))
                samples[(alpha, decoder)] = out
                rows.append({"alpha": alpha, "decoder": decoder, **summarise(rates), "loop_share": loops["value"],
                             "loop_low": loops["ci_low"], "loop_high": loops["ci_high"]})
        _, baseline_rates = greedy_repetition(baseline, tokenizer, prompts, new_tokens)
        return cls(pd.DataFrame(rows), samples, summarise(baseline_rates))

    def table(self) -> pd.DataFrame:
        return self.frame.round(3)

    def plot_frame(self) -> pd.DataFrame:
        """The table with the gate-off row repeated for the decay decoder (both lines start at alpha 0)."""
        both = pd.concat([self.frame, self.frame[self.frame.alpha == 0.0].assign(decoder=DECAY)])
        return both.sort_values(["decoder", "alpha"])

    def numbers(self) -> LoopsNumbers:
        """Repetition with the gate off, at the strongest alpha with and without decay, the plain GPT's, and the
        verdict read from the 95% intervals."""
        loops = self.frame
        strong = loops[loops.alpha == loops.alpha.max()].set_index("decoder")
        off = loops[loops.alpha == 0.0].iloc[0]
        plain, mitigated = strong.loc["gate"], strong.loc[DECAY]
        verdict = LOOP_VERDICTS[plain["ci_low"] > off["ci_high"], mitigated["ci_high"] < plain["ci_low"]]
        return LoopsNumbers(loop_off=off["mean"], loop_strong=plain["mean"], loop_mitigated=mitigated["mean"],
                            loop_alpha=float(loops.alpha.max()), loop_baseline=self.baseline["mean"],
                            loop_verdict=verdict)

    def examples(self, chars: int = 300) -> pd.DataFrame:
        """One continuation per decoder and strength, for reading."""
        return pd.DataFrame([{"decoder": f"{d} (alpha {a})", "continuation": s[0]["text"].strip()[:chars]}
                             for (a, d), s in self.samples.items()]).set_index("decoder")


def xray_record(*, dataset: str, profile: IdeaProfile, xrays: dict, alpha: pd.DataFrame, beta: pd.DataFrame,
                k: pd.DataFrame, small_baseline: dict, loops: Loops) -> XrayRecord:
    """Chapter 7's record: the X-ray tokens and their change in log-probability per prompt, the three sweep tables
    (``alpha``, ``beta``, ``k``) and the loops."""
    records = {name: frame.to_dict(orient="records") for name, frame in (("alpha", alpha), ("beta", beta), ("k", k))}
    return XrayRecord(extra={
        "dataset": dataset,
        "xray": {x["prompt"].strip(): {k: [r["token"] for r in x[k]] for k in ("boosted", "suppressed", "ideas")}
                 | {f"{k}_delta": [r["delta_logprob"] for r in x[k]] for k in ("boosted", "suppressed")}
                 for x in xrays.values()},
        "sweeps": {**records, "small_baseline": small_baseline,
                   "alpha_note": "inference only; model trained with alpha -> 0.5",
                   "train_tokens": profile.sweep_train_tokens, "steps": profile.sweep_steps},
        "loops": {"rows": loops.frame.to_dict(orient="records"), "baseline_greedy": loops.baseline,
                  "verdict": loops.numbers().loop_verdict,
                  "new_tokens": profile.loop_new_tokens,
                  "mitigation": "concentration decay (top-20 ideas, last 32 tokens)"},
    })
