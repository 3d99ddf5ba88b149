"""What chapters 6 and 8 show of paper B's WikiText GPTs and LoRA runs: tables, the numbers their prose cites,
and the chapter records. Everything here arranges numbers the chapters computed, except :meth:`Perplexity.measure`
and :func:`lora_capacity`, which also count the bigram reference."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Sequence

import pandas as pd
import torch

from semlm.core.metrics import perplexity
from semlm.core.records import Interval
from semlm.idea.records import IdeaGatingRecord, IdeaOverSeeds, LoraCapacityControl, LoraRecord, SeedPaired
from semlm.core.runs import RunRecord
from semlm.idea.profiles import IdeaProfile, profile_differences
from semlm.idea.competence import competence, ngram_reference
from semlm.idea.data import IdeaData
from semlm.idea.generation import DomainScores
from semlm.idea.wikitext_experiment import profile_form_run
from semlm.reference import PAPER_B_EVAL_DOMAINS, PAPER_B_STICKINESS, PAPER_B_TABLE1, PAPER_B_VAL_PPL

MODELS = ("baseline", "gated")
BOOK_METRICS = ("stickiness", "unique_density", "distinct_2", "repetition")


# --- shared by the paper-B chapters ---------------------------------------------------------------


def differences_frame(profile, reference=None) -> pd.DataFrame:
    """:func:`profile_differences` as a table indexed by setting, or one row saying there is none."""
    differences = pd.DataFrame(profile_differences(profile, reference), columns=["setting", "this run", "authors' run"])
    if len(differences):
        return differences.set_index("setting")
    return pd.DataFrame({"": ["no differences from the authors' run"]})


# --- chapter 6 ----------------------------------------------------------------------------------


def data_summary(data: IdeaData) -> pd.DataFrame:
    """The corpus, tokeniser, split sizes and the stopwords masked out of the idea loss."""
    tokenizer = data.tokenizer
    not_single = "authors' stopwords that are not one token here (not masked)"
    return pd.Series({
        "dataset used": data.splits_dataset, "dataset requested": data.requested_dataset,
        "tokeniser": data.tokenizer_name, "note": data.note or "-", "vocabulary": len(tokenizer),
        **{f"{split} tokens": len(ids) for split, ids in data.streams.items()},
        "stopword tokens (masked out of the idea loss)": " ".join(repr(tokenizer.decode([i]))
                                                                  for i in data.stopword_ids),
        not_single: ", ".join(map(repr, data.stopwords_not_single_tokens)) or "none",
    }, name="value").to_frame()


def size_table(config, sizes: dict[str, int]) -> pd.DataFrame:
    """Parameters per model and the GPT's shape."""
    s = config.size
    return pd.DataFrame({"parameters": sizes, "layers": s.n_layer, "heads": s.n_head, "d": s.n_embd,
                         "block": s.block_size})


@dataclass(frozen=True)
class Training:
    """Chapter 6's models at the profile's seed (``trained``; ``runs``: the plain and chosen gated), and over seeds."""

    trained: dict[str, RunRecord]
    runs: dict[str, RunRecord]
    records: Sequence[RunRecord]
    config: IdeaProfile

    @property
    def per_step(self) -> int:
        """Training tokens per iteration."""
        return self.config.train.batch_size * self.config.size.block_size

    def table(self):
        """Status, iterations, minutes, speed and validation perplexity of every trained model (styled)."""
        table = pd.DataFrame([{"model": n, "status": r.status, "iterations": r.steps,
                               "train minutes": r.train_seconds / 60, "seconds per iteration": r.seconds_per_step,
                               "training tokens / s": self.per_step / r.seconds_per_step,
                               "validation PPL": r.metrics.val_ppl}
                              for n, r in self.trained.items()]).set_index("model")
        return table.style.format("{:.3g}", subset=table.columns[2:])

    def numbers(self) -> TrainingNumbers:
        """Step-time ratio, CPU-minutes, tokens, tokens per second, and all models over seeds with their minutes."""
        per_step, runs = self.per_step, self.runs
        return TrainingNumbers(
            step_time_ratio=runs["gated"].seconds_per_step / runs["baseline"].seconds_per_step,
            budget_minutes=sum(r.train_seconds for r in self.trained.values()) / 60,
            train_tokens=f"{self.config.train.max_steps * per_step:,}",
            tokens_per_second=per_step / runs["baseline"].seconds_per_step,
            tokens_per_second_gated=per_step / runs["gated"].seconds_per_step,
            all_models=len(self.records), all_minutes=sum(r.train_seconds for r in self.records) / 60)


@dataclass(frozen=True)
class TrainingNumbers:
    step_time_ratio: float
    budget_minutes: float
    train_tokens: str
    tokens_per_second: float
    tokens_per_second_gated: float
    all_models: int
    all_minutes: float


@dataclass(frozen=True)
class LossForms:
    """The gated GPT trained with each idea-loss form beside the plain GPT, and the form chosen (``chosen``)."""

    runs: dict[str, RunRecord]
    chosen: str

    @property
    def forms(self) -> dict[str, RunRecord]:
        return {n: r for n, r in self.runs.items() if n.startswith("gated")}

    def curves(self) -> pd.DataFrame:
        """Validation history of the baseline and every form, one row per model and evaluation."""
        return pd.DataFrame([{"model": n, **row} for n in ["baseline", *self.forms] for row in self.runs[n].history])

    def table(self) -> pd.DataFrame:
        return pd.DataFrame({n: {"validation PPL (gated logits)": r.metrics.val_ppl,
                                 "validation PPL (gate off)": r.metrics.val_ppl_ungated,
                                 "idea BCE per column, last interval": r.history[-1].get("idea_bce_per_column"),
                                 "token CE, last interval": r.history[-1]["token_ce"]}
                             for n, r in self.forms.items()}).T

    def numbers(self) -> LossFormsNumbers:
        """The chosen and the other form's perplexity and idea BCE (the chosen one twice if only one trained)."""
        chosen, runs = self.chosen, self.runs
        other = next((n for n in self.forms if n != chosen), chosen)
        note = "" if other != chosen else " (only the authors' v1 form is trained at this profile)"
        return LossFormsNumbers(
            form_chosen=chosen + note, form_other=other + note, form_ppl_baseline=runs["baseline"].metrics.val_ppl,
            form_ppl_chosen=runs[chosen].metrics.val_ppl,
            form_bce_chosen=runs[chosen].history[-1]["idea_bce_per_column"], form_ppl_other=runs[other].metrics.val_ppl,
            form_bce_other=runs[other].history[-1]["idea_bce_per_column"])

    def summary(self) -> dict:
        """Per form, for the record: perplexities, the loss settings and the validation history."""
        settings = ("idea_loss_reduction", "idea_weight", "pos_weight")
        return {n: {"val_ppl": r.metrics.val_ppl, "val_ppl_ungated": r.metrics.val_ppl_ungated,
                    "settings": {k: r.config["idea"][k] for k in settings}, "history": r.history}
                for n, r in self.forms.items()}


@dataclass(frozen=True)
class LossFormsNumbers:
    form_chosen: str
    form_other: str
    form_ppl_baseline: float
    form_ppl_chosen: float
    form_bce_chosen: float
    form_ppl_other: float
    form_bce_other: float


@dataclass(frozen=True)
class Perplexity:
    """Perplexities of both models with the count-model references (``frame``), and :func:`competence` (``check``)."""

    frame: pd.DataFrame
    check: dict

    @classmethod
    def measure(cls, models: dict, runs: dict[str, RunRecord], data: IdeaData, config, test,
                by_seed: dict[int, dict[str, RunRecord]] | None = None) -> "Perplexity":
        """Scores the models on ``test`` and checks them, and every model of ``by_seed``, against the bigram."""
        gated = runs["gated"].metrics
        ppl = pd.DataFrame({
            "validation": {"baseline": runs["baseline"].metrics.val_ppl, "gated": gated.val_ppl,
                           "gated (ungated logits)": gated.val_ppl_ungated},
            "test": {"baseline": perplexity(models["baseline"], test), "gated": perplexity(models["gated"], test),
                     "gated (ungated logits)": perplexity(models["gated"], test, alpha=0.0)}})
        valid_tokens = data.blocks("valid", config).input_ids[:, 1: config.size.block_size + 1].flatten()
        reference = ngram_reference(data.streams["train"][: config.train_tokens], valid_tokens[valid_tokens >= 0],
                                    len(data.tokenizer))
        seeded = {f"{name} (seed {seed})": record.metrics.val_ppl
                  for seed, pair in (by_seed or {}).items() for name, record in pair.items()}
        check = competence({**{name: runs[name].metrics.val_ppl for name in MODELS}, **seeded}, reference)
        ppl.loc["unigram counts (reference)", "validation"] = reference["unigram_val_ppl"]
        ppl.loc["interpolated bigram counts (reference)", "validation"] = reference["bigram_val_ppl"]
        return cls(ppl, check)

    def table(self):
        return self.frame.style.format("{:.2f}", na_rep="-")

    def numbers(self) -> PerplexityNumbers:
        """The validation perplexities (``val_<first word of the row>[_ungated]``), the competence ratio, the
        bigram's perplexity, the worst ratio, the verdict."""
        numbers = {f"val_{name.split()[0]}{'_ungated' if 'ungated' in name else ''}": self.frame.loc[name, "validation"]
                   for name in self.frame.index}
        verdict = ("pass: the generation claims are judged on these models" if self.check["passes"] else
                   "fail: the claims table marks paper B's perplexity, stickiness and diversity claims "
                   "'not testable at this scale' for this build")
        return PerplexityNumbers(**numbers, competence_ratio=self.check["threshold_ratio"],
                                 bigram_ppl=self.check["bigram_val_ppl"], worst_ratio=self.check["worst_ratio"],
                                 competence_verdict=verdict)


@dataclass(frozen=True)
class PerplexityNumbers:
    val_baseline: float
    val_gated: float
    val_gated_ungated: float
    val_unigram: float
    val_interpolated: float
    competence_ratio: float
    bigram_ppl: float
    worst_ratio: float
    competence_verdict: str


@dataclass(frozen=True)
class DomainComparison:
    """Each model's scores on some domains, ``scores[model][domain]``, and the gated - baseline difference of
    ``compared``; the table shows the ``shown`` metrics (None: all) beside the paper's stickiness (``paper``)."""

    scores: dict[str, dict[str, DomainScores]]
    compared: ClassVar[str] = "stickiness"
    shown: ClassVar[Sequence[str] | None] = BOOK_METRICS
    paper: ClassVar[dict] = {}

    @property
    def differences(self) -> dict[str, Interval]:
        """Gated - baseline ``compared`` per domain (Welch 95% interval over the two models' samples)."""
        return {d: Interval.welch(*[[r[self.compared] for r in self.scores[m][d].samples]
                                    for m in ("gated", "baseline")]) for d in self.scores["gated"]}

    def table(self) -> pd.DataFrame:
        """Mean [interval] per domain and model (and the paper's stickiness), with the gated - baseline difference."""
        diffs = self.differences
        return pd.DataFrame([{"domain": d, "model": m, **{k: str(v) for k, v in self.scores[m][d].summary.items()
                                                         if self.shown is None or k in self.shown},
                              **({"paper (stickiness)": self.paper.get(d, {}).get(m)} if self.paper else {}),
                              "gated - baseline stickiness": str(diffs[d]) if m == "gated" else ""}
                             for d in diffs for m in MODELS]).set_index(["domain", "model"])

    def summary(self, metrics: Sequence[str] | None = None, intervals: Sequence[str] = (),
                difference: bool = True) -> dict:
        """Per domain and model: the summary (of ``metrics``, by default ``shown``: the mean of each, and the
        ``[low, high]`` of each of ``intervals``), and with ``difference`` the gated - baseline ``compared``."""
        metrics = metrics or self.shown

        def entry(summary: dict[str, Interval]) -> dict:
            if metrics is None:
                return dict(summary)
            return {k: summary[k].mean for k in metrics} | {f"{k}_ci": [summary[k].low, summary[k].high]
                                                            for k in intervals}

        return {d: {m: entry(self.scores[m][d].summary) for m in self.scores}
                | ({"difference": {self.compared: v}} if difference else {}) for d, v in self.differences.items()}


class AuthorsProtocol(DomainComparison):
    """Both models scored with the authors' protocol (:func:`authors_protocol`) on the paper's domains."""

    compared, shown, paper = "authors_stickiness", None, PAPER_B_STICKINESS

    def examples(self) -> pd.DataFrame:
        """The first continuation of each of the authors' prompts, from each model."""
        return pd.DataFrame([{"domain": d, "prompt": PAPER_B_EVAL_DOMAINS[d]["prompt"],
                              **{m: self.scores[m][d].samples[0]["text"].strip() for m in self.scores}}
                             for d in PAPER_B_EVAL_DOMAINS]).set_index("domain")


class Retention(DomainComparison):
    """Each model's :func:`domain_retention` on the book's domains."""

    def frame(self) -> pd.DataFrame:
        """Long table (domain, model, metric, mean, ci_low, ci_high, n) of every metric."""
        return pd.DataFrame([{"domain": d, "model": m, "metric": k, **v.to_dict()}
                             for m, by_domain in self.scores.items() for d, scores in by_domain.items()
                             for k, v in scores.summary.items()])

    def numbers(self) -> RetentionNumbers:
        """The domains where the gated model's stickiness lies above the baseline's (95% interval) and below it."""
        diffs = self.differences
        return RetentionNumbers(book_n=len(diffs),
                                book_above=", ".join(d for d, v in diffs.items() if v.low > 0) or "none",
                                book_below=", ".join(d for d, v in diffs.items() if v.high < 0) or "none")


@dataclass(frozen=True)
class RetentionNumbers:
    book_n: int
    book_above: str
    book_below: str


def runs_by_seed(records: Sequence[RunRecord], profile: IdeaProfile) -> dict[int, dict[str, RunRecord]]:
    """``{seed: {"baseline": record, "gated": record}}`` of the seed comparison, from :func:`idea_gating_runs`."""
    names = {"baseline": "baseline", profile_form_run(profile): "gated"}
    return {seed: {names[r.name]: r for r in records if r.seed == seed and r.name in names}
            for seed in sorted({r.seed for r in records if r.name in names})}


#: The authors' protocol's metrics the seed comparison reads (``stickiness``: continuation only).
SEED_METRICS = ("stickiness", "authors_stickiness", "distinct_2")


def seed_comparison(by_seed: dict[int, dict[str, RunRecord]],
                    scores: dict[int, dict[str, dict[str, DomainScores]]], config,
                    temperatures: dict[int, float] | None = None,
                    book: dict[int, dict[str, dict[str, DomainScores]]] | None = None) -> IdeaOverSeeds:
    """Chapter 6 over seeds: validation PPL and each seed's mean per metric and domain, paired by seed (the sharpening
    control, where scored, as ``control``); ``book``: the book's domains, as ``book_stickiness``."""
    seeds = list(by_seed)

    def paired(source, metric: str) -> dict[str, SeedPaired]:
        domains = list(source[seeds[0]]["baseline"])
        models = [*MODELS, "sharpened"] if all("sharpened" in source[s] for s in seeds) else MODELS
        return {label: SeedPaired.of(*[[sum(source[s][m][d].summary[metric].mean for d in names) / len(names)
                                        for s in seeds] for m in models])
                for label, names in [*((d, [d]) for d in domains), ("all", domains)]}

    table = {"book_stickiness": paired(book, "stickiness")} if book is not None else {}
    table.update({metric: paired(scores, metric) for metric in SEED_METRICS})
    sharpened = temperatures and all("sharpened" in scores[s] for s in seeds)
    return IdeaOverSeeds(seeds=seeds, gated_run=profile_form_run(config), domains=table,
                         val_ppl=SeedPaired.of(*[[by_seed[s][m].metrics.val_ppl for s in seeds] for m in MODELS]),
                         sharpening_temperature=Interval.of_mean([temperatures[s] for s in seeds])
                         if sharpened else None)


def paper_table1() -> pd.DataFrame:
    """The paper's Table 1 (WikiText-103 GPTs)."""
    return pd.DataFrame([{"domain": d, "model": m, **v} for d, e in PAPER_B_TABLE1.items()
                         for m, v in e.items()]).set_index(["domain", "model"])


def idea_gating_record(*, training: Training, forms: LossForms, data: IdeaData, sizes: dict[str, int],
                       ppl: Perplexity, authors: AuthorsProtocol, retention: Retention,
                       over_seeds: IdeaOverSeeds | None = None) -> IdeaGatingRecord:
    """Chapter 6's record: both models' perplexities, the competence check, the authors' protocol, and in
    ``extra`` the data, loss forms, training speed, book domains, stopwords, generation and paper values."""
    config, trained, g, numbers = training.config, training.trained, training.config.generation, training.numbers()
    extra = {
        "dataset_requested": data.requested_dataset, "dataset_note": data.note, "tokenizer": data.tokenizer_name,
        "vocab_size": len(data.tokenizer), "max_steps": config.train.max_steps, "capped_from": config.capped_from,
        "differences_from_authors": [{k: str(v) for k, v in row.items()} for row in profile_differences(config)],
        "loss_forms": forms.summary(),
        "training": {"tokens_per_iteration": training.per_step, "budget_minutes": numbers.budget_minutes,
                     "tokens_per_second": {n: training.per_step / r.seconds_per_step for n, r in trained.items()}},
        "domains": retention.summary(intervals=("stickiness", "distinct_2")),
        "step_time_ratio": numbers.step_time_ratio,
        "stopwords": {"masked_ids": data.stopword_ids, "not_single_tokens": data.stopwords_not_single_tokens},
        "generation": {"authors_samples_per_domain": g.authors_samples, "authors_new_tokens": g.authors_new_tokens,
                       "book_samples_per_domain": len(next(iter(retention.scores["gated"].values())).samples),
                       "max_new_tokens": g.max_new_tokens, "temperature": g.temperature,
                       "repetition_penalty": g.repetition_penalty, "penalty_form": g.penalty_form},
        "paper": {"val_ppl_mistral_fineweb": PAPER_B_VAL_PPL, "stickiness_wikitext103": PAPER_B_STICKINESS,
                  "table1_wikitext103": PAPER_B_TABLE1},
    }
    runs = training.runs
    models = {m: {"val_ppl": runs[m].metrics.val_ppl, "test_ppl": ppl.frame.loc[m, "test"], "history": runs[m].history,
                  "train_seconds": runs[m].train_seconds, "parameters": sizes[m]} for m in MODELS}
    models["gated"] |= {"run": forms.chosen, "val_ppl_ungated": runs["gated"].metrics.val_ppl_ungated,
                        "test_ppl_ungated": ppl.frame.loc["gated (ungated logits)", "test"]}
    return IdeaGatingRecord(dataset=data.splits_dataset, **models, competence=ppl.check,
                            authors_protocol=authors.summary(), over_seeds=over_seeds, extra=extra)


# --- chapter 8 ----------------------------------------------------------------------------------


#: How the tables name each quantisation of the LoRA backbone.
QUANT_LABELS = {"nf4": "NF4 (4-bit)", "none": "float32"}


def backbone_summary(backbone) -> pd.DataFrame:
    """The frozen backbone: name, shape, parameters, its WikiText-2 perplexity and pre-training."""
    c = backbone.config
    return pd.Series({"backbone": backbone.name, "layers": c.get("num_hidden_layers"),
                      "hidden size": c.get("hidden_size"),
                      "vocabulary": c.get("vocab_size"), "parameters": backbone.n_parameters,
                      "WikiText-2 validation PPL": backbone.wikitext_val_ppl,
                      "pre-training (s)": backbone.train_seconds, "status": backbone.status}, name="value").to_frame()


@dataclass(frozen=True)
class LoraRuns:
    """The baseline and gated LoRA runs of one seed by ``(quantization, gated)`` (no capacity control)."""

    runs: dict[tuple[str, bool], RunRecord]

    @classmethod
    def of(cls, records: Sequence[RunRecord], seed: int) -> "LoraRuns":
        return cls({(r.spec.config.quantization, r.spec.config.gated): r for r in records
                    if r.seed == seed and not r.spec.config.output_adapter})

    def __getitem__(self, key: tuple[str, bool]) -> RunRecord:
        return self.runs[key]

    def curves(self) -> pd.DataFrame:
        """Validation history of every run."""
        return pd.DataFrame([{"model": "gated" if idea else "baseline", "quantization": q, **row}
                             for (q, idea), run in self.runs.items() for row in run.history])

    def table(self):
        """Perplexities, trainable parameters, steps and speed of every run (styled)."""
        table = pd.DataFrame([{
            "quantization": QUANT_LABELS[q], "model": "LoRA + idea gate" if idea else "LoRA baseline",
            "val PPL": run.metrics.val_ppl, "val PPL, gate off": run.metrics.val_ppl_ungated,
            "trainable params": run.metrics.trainable_params, "LoRA params": run.metrics.trainable["lora"],
            "idea-head params": run.metrics.trainable["idea_head"], "steps": run.steps, "best step": run.best_step,
            "stopped early": run.stopped_early, "s / step": run.seconds_per_step, "status": run.status,
        } for (q, idea), run in self.runs.items()])
        return table.style.format({"val PPL": "{:.2f}", "val PPL, gate off": "{:.2f}", "s / step": "{:.3f}"},
                                  na_rep="–")

    def numbers(self, quantization: str, backbone) -> LoraRunsNumbers:
        """What the LoRA paragraph cites for ``quantization`` (``paper_*``: the paper's reported values for its
        Mistral-7B LoRA run on FineWeb-Edu, not results of this build)."""
        base, g = self.runs[(quantization, False)].metrics, self.runs[(quantization, True)].metrics
        return LoraRunsNumbers(base_ppl=base.val_ppl, gated_ppl=g.val_ppl, gated_ppl_off=g.val_ppl_ungated,
                               lora_params=base.trainable_params, gated_params=g.trainable_params,
                               idea_share=g.trainable["idea_head"] / g.trainable_params,
                               backbone_params=backbone.n_parameters or 0, paper_base_ppl=PAPER_B_VAL_PPL["baseline"],
                               paper_gated_ppl=PAPER_B_VAL_PPL["gated"])

    def quantization_deltas(self, quantizations: Sequence[str]) -> dict:
        """Gated - baseline validation perplexity per quantisation (``delta_nf4``, ``delta_fp32``) and, with
        both precisions, what NF4 costs the baseline and the gated model's step-time ratio."""
        ppl = {key: run.metrics.val_ppl for key, run in self.runs.items()}
        out = {"delta_nf4": ppl[("nf4", True)] - ppl[("nf4", False)]}
        if "none" in quantizations:
            out.update({"delta_fp32": ppl[("none", True)] - ppl[("none", False)],
                        "nf4_cost_base": ppl[("nf4", False)] - ppl[("none", False)],
                        "step_ratio": self.runs[("nf4", True)].seconds_per_step
                        / self.runs[("none", True)].seconds_per_step})
        return out


@dataclass(frozen=True)
class LoraRunsNumbers:
    base_ppl: float
    gated_ppl: float
    gated_ppl_off: float
    lora_params: int
    gated_params: int
    idea_share: float
    backbone_params: int
    paper_base_ppl: float
    paper_gated_ppl: float


CONTROL_MODELS = ("baseline", "gated", "control")


def lora_capacity(records: Sequence[RunRecord], quantization: str, data, vocab_size: int) -> LoraCapacityControl:
    """Baseline, gated model and capacity control over seeds in ``quantization``, their trainable parameters, and
    every model against the bigram of ``data``'s training blocks (:func:`competence`) on the same tokens."""
    L, rows = data.train.block_size, data.validation.input_ids
    valid = torch.cat([rows[:, :L].flatten(), rows[-1, L:L + 1]])
    reference = ngram_reference(data.train.input_ids[:, :L].flatten(), valid, vocab_size)
    chosen = {m: [r for r in records if r.spec.config.quantization == quantization and r.name.split("-")[0] == m]
              for m in CONTROL_MODELS}  # run names: baseline-nf4, gated-nf4, control-nf4
    ppl = {m: {r.seed: r.metrics.val_ppl for r in runs} for m, runs in chosen.items()}
    seeds = sorted(ppl["baseline"])
    if any(sorted(ppl[m]) != seeds for m in CONTROL_MODELS):
        found = {m: sorted(v) for m, v in ppl.items()}
        raise ValueError(f"the capacity control needs every model at every seed, got {found}")
    counts = {m: runs[0].metrics.trainable for m, runs in chosen.items()}
    check = competence({f"{m} (seed {s})": v for m in CONTROL_MODELS for s, v in ppl[m].items()}, reference)
    return LoraCapacityControl(seeds=seeds, quantization=quantization,
                               val_ppl=SeedPaired.of(*[[ppl[m][s] for s in seeds] for m in CONTROL_MODELS]),
                               trainable_params=counts, competence=check)


def memory_table(memory: dict[str, dict]) -> pd.DataFrame:
    """Peak memory, backbone weights and step time per quantisation (:func:`measure_memory`)."""
    return pd.DataFrame({QUANT_LABELS[q]: {"peak memory (MiB)": m["peak_memory_mb"],
                                          "backbone weights (MiB)": m["weights_mb"],
                                          "s / training step": m["seconds_per_step"]} for q, m in memory.items()}).T


def lora_record(*, config, backbone, data_summary: dict, runs: LoraRuns, paper_counts: dict,
                memory: dict[str, dict], nf4_kernel: str, retention: Retention,
                ray: dict, capacity_control: LoraCapacityControl | None = None) -> LoraRecord:
    """Chapter 8's record: the main quantisation's baseline and gated perplexity, and in ``extra`` the data,
    backbone, LoRA settings, parameter counts, both precisions, memory, domains and the X-ray."""
    main_q = config.quantizations[0]
    base, gated = runs[(main_q, False)], runs[(main_q, True)]
    shape = ("num_hidden_layers", "hidden_size", "vocab_size", "num_attention_heads", "num_key_value_heads")
    extra = {
        "data": data_summary, "backbone_config": {k: backbone.config.get(k) for k in shape},
        "backbone_wikitext_val_ppl": backbone.wikitext_val_ppl, "quantization": main_q,
        "lora": {"r": config.lora.r, "lora_alpha": config.lora.lora_alpha, "dropout": config.lora.lora_dropout,
                 "target_modules": list(config.lora.target_modules)},
        "trainable_params": {"baseline": base.metrics.trainable_params, "gated": gated.metrics.trainable_params,
                             "gated_by_group": gated.metrics.trainable, "frozen": backbone.n_parameters,
                             "mistral_7b_architecture": paper_counts},
        "by_quantization": {q: {"gated" if idea else "baseline": {
            "val_ppl": run.metrics.val_ppl, **({"val_ppl_ungated": run.metrics.val_ppl_ungated} if idea else {}),
            "seconds_per_step": run.seconds_per_step} for idea in (False, True) for run in [runs[q, idea]]}
            for q in config.quantizations},
        **{key: {"fp32": memory["none"][key], "nf4": memory["nf4"][key]} for key in ("peak_memory_mb", "weights_mb")},
        "memory_method": memory["nf4"]["method"], "nf4_kernel": nf4_kernel,
        "domains": retention.summary(("stickiness", "unique_density", "distinct_2"), difference=False),
        "xray": {ray["prompt"]: {k: [r["token"] for r in ray[k]] for k in ("boosted", "suppressed")}},
        "paper_reference_ppl": PAPER_B_VAL_PPL,
    }
    return LoraRecord(dataset=data_summary["dataset"], backbone=backbone.name,
                      baseline={"val_ppl": base.metrics.val_ppl, "steps": base.steps, "history": base.history},
                      gated={"val_ppl": gated.metrics.val_ppl, "val_ppl_ungated": gated.metrics.val_ppl_ungated,
                             "steps": gated.steps, "history": gated.history},
                      capacity_control=capacity_control, extra=extra)
