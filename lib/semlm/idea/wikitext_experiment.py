"""Paper B's WikiText experiment: what one GPT run is (:class:`IdeaRun`, :class:`IdeaExperiment`), chapter 6's runs.

Profiles: :func:`~semlm.idea.profiles.idea_profile` (``paper``'s WikiText-103 and GPT-2 tokeniser need
``--allow-downloads``, else WikiText-2 and a book-trained BPE of GPT-2's size replace them).

Training is the authors' loop (their ``get_batch`` and ``get_lr``) as a ``TrainConfig`` of the book's one
trainer; this module says only *what* a run is, :mod:`semlm.core.runs` trains or reloads it. The rest of paper B's
pipeline lives by concept: :mod:`semlm.idea.data` (corpus, tokeniser, streams and blocks), :mod:`semlm.idea.loss`
(the objective), :mod:`semlm.idea.generation` (sampling and the domain protocols) and
:mod:`semlm.idea.competence` (the bigram reference).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Sequence

from semlm.core import runs
from semlm.core.metrics import perplexity
from semlm.core.runs import RunRecord, RunSpec
from semlm.core.train_config import TrainConfig
from semlm.idea.data import IdeaData, TokenStream, prepare_data
from semlm.idea.generation import load_domains  # noqa: F401 - the registered semlm.idea.rule_prompts imports it here
from semlm.idea.loss import idea_loss_fn
from semlm.idea.model import IdeaGPTConfig, IdeaGPTForCausalLM
from semlm.idea.profiles import LOSS_FORMS, GPTSize, IdeaProfile, IdeaSettings, with_max_steps
from semlm.idea.records import IdeaRunMetrics


def model_config(profile: IdeaProfile, vocab_size: int, idea: bool, settings: IdeaSettings | None = None,
                 eos_id: int = 0) -> IdeaGPTConfig:
    """The GPT of ``profile`` (an :class:`IdeaProfile` or :class:`IdeaRun`: its ``size`` and ``idea``)."""
    s, size = settings or profile.idea, profile.size
    return IdeaGPTConfig(vocab_size=vocab_size, n_positions=size.block_size, n_embd=size.n_embd, n_layer=size.n_layer,
                         n_head=size.n_head, dropout=size.dropout, idea_head=idea, gate_variant=s.gate_variant,
                         alpha=s.alpha if idea else 0.0, beta=s.beta, eps=s.eps, init=size.init,
                         dropout_scope=size.dropout_scope, bos_token_id=eos_id, eos_token_id=eos_id,
                         pad_token_id=eos_id)


@dataclass(frozen=True)
class IdeaRun:
    """What one paper-B GPT run is: everything its weights depend on and nothing else (the corpus fields and
    ``name`` are the profile's; ``run_tokens``: its training tokens, -1 for ``train_tokens``)."""

    name: str
    dataset: str
    tokenizer: str
    vocab_size: int
    bpe_lines: int | None
    train_tokens: int | None
    eval_tokens: int | None
    size: GPTSize
    train: TrainConfig
    idea: IdeaSettings
    gated: bool
    run_tokens: int | None = -1
    #: training processes the profile allows side by side: how runs are scheduled, not what they compute, so in no
    #: key (:func:`semlm.core.train_config.execution_fields`); the profile's, set by :func:`idea_run`
    max_workers: int | None = field(default=None, metadata={"execution": True})


def idea_run(profile: IdeaProfile, name: str, gated: bool, settings: IdeaSettings | None = None,
             train_tokens: int | None = -1, steps: int | None = None) -> RunSpec:
    """The run ``name`` of ``profile``, plain or gated; ``settings``, ``train_tokens`` (-1: the profile's; None:
    all) and ``steps`` (schedules keep their share, :func:`with_max_steps`) replace the profile's."""
    capped = with_max_steps(profile, steps)
    idea = settings or capped.idea
    if steps is not None and settings is not None:  # keep the ramp's share of the shorter run
        idea = replace(idea, alpha_ramp_steps=capped.idea.alpha_ramp_steps)
    run = IdeaRun(profile.name, profile.dataset, profile.tokenizer, profile.vocab_size, profile.bpe_lines,
                  profile.train_tokens, profile.eval_tokens, profile.size, capped.train, idea, gated, train_tokens,
                  profile.max_workers)
    return RunSpec(name, profile.seed, run, group=profile.dataset)


class IdeaExperiment(runs.Experiment):
    """Paper B's plain and idea-gated GPT on WikiText for :mod:`semlm.core.runs` (chapters 6, 7)."""

    name = "idea"
    metrics_type = IdeaRunMetrics
    packages = (*runs.KEYED_PACKAGES, "datasets")  # WikiText-103 comes through datasets at the paper profile

    def hub_sources(self, spec: RunSpec) -> tuple[str, ...]:
        """GPT-2's tokeniser and WikiText-103, read from the Hub cache by the ``paper`` profile's runs."""
        run = spec.config
        return (("models/gpt2",) if run.tokenizer == "gpt2" else ()) + (
            ("datasets/Salesforce/wikitext", "datasets/wikitext") if run.dataset == "wikitext-103" else ())

    def data_key(self, spec: RunSpec):
        r = spec.config
        return (r.name, r.dataset, r.tokenizer, r.vocab_size, r.bpe_lines, r.train_tokens, r.eval_tokens,
                r.idea.stopword_list, r.idea.stopwords_top_n)

    def prepare(self, spec: RunSpec) -> IdeaData:
        return prepare_data(spec.config)

    def build(self, spec: RunSpec, data: IdeaData) -> IdeaGPTForCausalLM:
        run = spec.config
        tokenizer = data.tokenizer
        return IdeaGPTForCausalLM(model_config(run, len(tokenizer), run.gated, run.idea, tokenizer.eos_token_id))

    @staticmethod
    def stream(run: IdeaRun, data: IdeaData) -> TokenStream:
        tokens = run.train_tokens if run.run_tokens == -1 else run.run_tokens
        return TokenStream(data.streams["train"], run.size.block_size, run.idea.window, tokens)

    def fit(self, spec: RunSpec, data: IdeaData) -> runs.Fit:
        run = spec.config
        return runs.Fit(self.stream(run, data), data.blocks("valid", run), run.train,
                        loss_fn=idea_loss_fn(run.idea, data.stopword_ids, run.gated,
                                             compile_on_cuda=run.train.compile_on_cuda))

    def evaluate(self, spec: RunSpec, data: IdeaData, model, result) -> IdeaRunMetrics:
        run, val = spec.config, data.blocks("valid", spec.config)
        return IdeaRunMetrics(val_ppl=perplexity(model, val),
                              val_ppl_ungated=perplexity(model, val, alpha=0.0) if run.gated else None,
                              train_tokens=self.stream(run, data).n_tokens)

    def total_steps(self, spec: RunSpec) -> int:
        return spec.config.train.max_steps

    def max_workers(self, specs: Sequence[RunSpec]) -> int | None:
        """The runs' ``max_workers`` (the profile's: 1 at ``smoke`` and ``paper``, one run after another)."""
        return min((s.config.max_workers for s in specs if s.config.max_workers is not None), default=None)


IDEA = IdeaExperiment()


def idea_gating_runs(profile: IdeaProfile, n_seeds: int | None = 1) -> list[RunSpec]:
    """Chapter 6's models: the plain GPT and the gated GPT (in both loss forms, ``gated-sum`` and ``gated-mean``,
    when ``profile.compare_loss_forms``), and for each further seed of ``n_seeds`` (None: the profile's) the plain
    GPT and the gated one in the profile's loss form (:func:`profile_form_run`)."""
    specs = [idea_run(profile, "baseline", False)]
    if profile.compare_loss_forms:
        specs += [idea_run(profile, f"gated-{form}", True, replace(profile.idea, **kw))
                  for form, kw in LOSS_FORMS.items()]
    else:
        specs.append(idea_run(profile, "gated", True))
    for seed in training_seeds(profile, n_seeds)[1:]:
        seeded = replace(profile, seed=seed)
        specs += [idea_run(seeded, "baseline", False), idea_run(seeded, profile_form_run(profile), True)]
    return specs


def profile_form_run(profile: IdeaProfile) -> str:
    """The name of the gated run in the profile's own idea-loss form (``gated-mean``, ``gated-sum`` or ``gated``)."""
    if not profile.compare_loss_forms:
        return "gated"
    return next(f"gated-{form}" for form, kw in LOSS_FORMS.items() if replace(profile.idea, **kw) == profile.idea)


def training_seeds(profile, n_seeds: int | None = None) -> list[int]:
    """``seed, seed + 1, ...``: the training seeds of a comparison over ``n_seeds`` (default: the profile's)."""
    n = profile.n_seeds if n_seeds is None else n_seeds
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n_seeds must be an int >= 1 or None (the profile's {profile.n_seeds}), got {n!r}")
    return [profile.seed + i for i in range(n)]


def with_chosen_gated(runs: dict[str, RunRecord]) -> tuple[dict[str, RunRecord], str]:
    """``runs`` with ``"gated"`` naming the gated model the chapters use, and its run name: with both loss forms
    trained, the one with the lower validation perplexity."""
    if "gated" in runs:
        return dict(runs), "gated"
    chosen = min((f"gated-{form}" for form in LOSS_FORMS), key=lambda name: runs[name].metrics.val_ppl)
    return {**runs, "gated": runs[chosen]}, chosen


def idea_data(profile: IdeaProfile) -> IdeaData:
    """The data of ``profile``'s runs, prepared once per process by :data:`IDEA` (the copy its runs use)."""
    return IDEA.data(idea_run(profile, "baseline", False))
