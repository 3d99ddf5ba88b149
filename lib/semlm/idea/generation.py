"""Paper B's generation and its domain protocols: sampling, the book's stickiness protocol, the authors'.

:func:`generate_texts` continues prompts with ``generate()``; :func:`domain_retention` (the book's protocol) and
:func:`authors_protocol` (the authors' ``evaluate.py``) score continuations per domain; both are cached per run
(:func:`scored_retention`, :func:`scored_authors`), and :func:`protocols_over_seeds` runs them with the
sharpening control.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Sequence

import torch

from semlm.core import runs
from semlm.core.metrics import distinct_n, repetition_rate, stickiness, summarise, unique_domain_density, words_of
from semlm.core.records import Interval
from semlm.core.runs import RunRecord
from semlm.idea.model import IdeaGPTForCausalLM, IdeaGate, quiet_transformers
from semlm.idea.profiles import GenerationSettings


DOMAINS_DIR = Path(__file__).parents[1] / "data" / "domains"  # package data (semlm/data/domains)


@dataclass
class Domain:
    name: str
    prompts: list[str]
    terms: list[str] = field(default_factory=list)


def load_domains(folder: str | Path = DOMAINS_DIR) -> dict[str, Domain]:
    """``<name>.txt`` files with ``[prompts]`` and ``[terms]`` sections (see semlm/data/domains/README.md)."""
    folder = Path(folder)
    files = sorted(folder.glob("*.txt"))
    if not files:
        raise FileNotFoundError(f"no domain files (*.txt) in {folder}; see semlm/data/domains/README.md")
    domains = {}
    for path in files:
        sections, section = {"[prompts]": [], "[terms]": []}, None
        for line in (raw.strip() for raw in path.read_text().splitlines()):
            if line in sections:
                section = line
            elif line and not line.startswith("#"):
                if section is None:
                    raise ValueError(f"{path}: text before a [prompts] or [terms] header: {line!r}")
                sections[section].append(line)
        prompts = [" " + line for line in sections["[prompts]"]]
        terms = [word for line in sections["[terms]"] for word in line.lower().split()]
        if not prompts or not terms:
            raise ValueError(f"{path} needs both a [prompts] and a [terms] section")
        domains[path.stem] = Domain(path.stem, prompts, terms)
    return domains


@torch.no_grad()
def generate_texts(model, tokenizer, prompts: Sequence[str], samples_per_prompt: int, max_new_tokens: int,
                   seed: int, alpha: float | None = None, do_sample: bool = True, temperature: float = 0.6,
                   repetition_penalty: float | None = 1.2, logits_processor=None,
                   penalty_form: str = "authors", gate: IdeaGate | None = None) -> list[dict]:
    """Continuations of every prompt (one left-padded batch) by ``generate()``, each with ``text`` (the
    continuation) and ``full_text``; ``gate`` (an :class:`~semlm.idea.model.IdeaGate`) or ``alpha`` replace the
    model's own gate. ``penalty_form="authors"``: the repetition penalty compounds per occurrence
    (:class:`~semlm.idea.compounding_penalty.CompoundingRepetitionPenalty`); ``"transformers"``: once per token.
    """
    from transformers import LogitsProcessorList

    from semlm.idea.compounding_penalty import CompoundingRepetitionPenalty

    if penalty_form not in ("authors", "transformers"):
        raise ValueError(f"penalty_form must be 'authors' or 'transformers', got {penalty_form!r}")

    tokenizer.padding_side = "left"
    batch = tokenizer([p for p in prompts for _ in range(samples_per_prompt)], return_tensors="pt", padding=True)
    torch.manual_seed(seed)
    kwargs = dict(max_new_tokens=max_new_tokens, do_sample=do_sample, pad_token_id=tokenizer.pad_token_id,
                  eos_token_id=None,
                  # our GPT keeps a KV cache (identical tokens, linear instead of quadratic time); the
                  # LoRA wrapper of chapter 8 re-reads its context every step
                  use_cache=isinstance(model, IdeaGPTForCausalLM))
    if do_sample:
        kwargs.update(temperature=temperature, top_k=0, top_p=1.0)
    processors = list(logits_processor or [])
    if repetition_penalty and penalty_form == "transformers":
        kwargs["repetition_penalty"] = repetition_penalty
    elif repetition_penalty:
        processors.insert(0, CompoundingRepetitionPenalty(repetition_penalty, window=model.config.n_positions))
    if processors:
        kwargs["logits_processor"] = LogitsProcessorList(processors)
    if alpha is not None:
        kwargs["alpha"] = alpha
    if gate is not None:
        kwargs["gate"] = gate
    with quiet_transformers():
        out = model.generate(batch.input_ids.to(model.device), attention_mask=batch.attention_mask.to(model.device),
                             **kwargs)
    new = out[:, batch.input_ids.shape[1]:].cpu()
    return [{"prompt": prompts[i // samples_per_prompt], "seed": seed, "ids": new[i].tolist(),
             "text": tokenizer.decode(new[i], skip_special_tokens=True),
             "full_text": tokenizer.decode(out[i].cpu(), skip_special_tokens=True)} for i in range(len(new))]


METRIC_NAMES = ("stickiness", "unique_density", "distinct_1", "distinct_2", "repetition", "token_repetition")


@dataclass
class DomainScores:
    """One model's continuations of one domain's prompts: each metric's mean with its 95% interval over the
    samples (``summary``, all seeds pooled) and every scored sample."""

    summary: dict[str, Interval]
    samples: list[dict]


def sample_interval(values: Sequence[float]) -> Interval:
    """Mean and 95% interval of ``values`` over samples (NaNs dropped; :func:`semlm.core.metrics.summarise`)."""
    return Interval.from_dict(summarise(values))


def stop_words() -> frozenset[str]:
    """The stopwords of the book's stickiness: spaCy's English list, or the same list as a JSON array of words at
    ``$SEMLM_STOP_WORDS`` where spaCy is not installed (a bare GPU machine: ``.ci/run-gpu --prepare`` writes it)."""
    path = os.environ.get("SEMLM_STOP_WORDS")
    if path:
        try:
            words = json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            raise ValueError(f"SEMLM_STOP_WORDS={path} is not a readable JSON list of words ({exc}); write it with "
                             f"`.ci/run-gpu --prepare` or unset it to use spaCy's list") from None
        if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
            raise ValueError(f"SEMLM_STOP_WORDS={path} is not a JSON list of words; write it with "
                             f"`.ci/run-gpu --prepare`")
        return frozenset(words)
    try:
        from spacy.lang.en.stop_words import STOP_WORDS
    except ImportError:
        raise RuntimeError("the book's stickiness needs spaCy's English stop list: install spacy, or set "
                           "SEMLM_STOP_WORDS to that list as JSON (`.ci/run-gpu --prepare` writes one)") from None
    return frozenset(STOP_WORDS)


def domain_retention(model, tokenizer, domains: dict[str, Domain], generation: GenerationSettings,
                     alpha: float | None = None) -> dict[str, DomainScores]:
    """Per domain: every sample's scores and their means with 95% intervals over samples (all seeds pooled).
    All domains' prompts decode in one batch per seed."""
    stop, n = stop_words(), generation.samples_per_prompt
    prompts = [(name, p) for name, domain in domains.items() for p in domain.prompts]
    rows = {name: [] for name in domains}
    for seed in generation.seeds:
        samples = generate_texts(model, tokenizer, [p for _, p in prompts], n, generation.max_new_tokens, seed, alpha,
                                 temperature=generation.temperature, repetition_penalty=generation.repetition_penalty,
                                 penalty_form=generation.penalty_form)
        for i, sample in enumerate(samples):
            name, words = prompts[i // n][0], words_of(sample["text"])
            rows[name].append({**sample, "domain": name, "stickiness": stickiness(words, domains[name].terms, stop),
                               "unique_density": unique_domain_density(words, domains[name].terms),
                               "distinct_1": distinct_n(words, 1), "distinct_2": distinct_n(words, 2),
                               "repetition": repetition_rate(words, 4),
                               "token_repetition": repetition_rate(sample["ids"], 4)})
    return {name: DomainScores({m: sample_interval([r[m] for r in domain_rows]) for m in METRIC_NAMES}, domain_rows)
            for name, domain_rows in rows.items()}


#: The 15 words the authors' ``evaluate.py`` removes before computing stickiness.
AUTHORS_EVAL_STOPWORDS = frozenset({"the", "a", "an", "and", "or", "but", "in", "on", "at", "to", "for", "of", "with",
                                    "is", "was"})


def authors_stickiness(text: str, terms) -> float:
    """The authors' ``calculate_stickiness_ratio``: lower-case, drop "." and ",", split on whitespace, remove
    their 15 stopwords; domain hits / remaining words (0.0 if none remain). The authors apply it to prompt +
    continuation (``authors_stickiness``); the book also applies it to the continuation alone (``stickiness``),
    so that the prompt's own domain words, the same for both models, do not count."""
    words = text.lower().replace(".", "").replace(",", "").split()
    content = [w for w in words if w not in AUTHORS_EVAL_STOPWORDS]
    if not content:
        return 0.0
    vocabulary = set(terms)
    return sum(w in vocabulary for w in content) / len(content)


AUTHORS_METRICS = ("authors_stickiness", "stickiness", "unique_density", "distinct_2")


def authors_protocol(model, tokenizer, domains: dict, generation: GenerationSettings) -> dict[str, DomainScores]:
    """The authors' evaluation: per domain of ``domains`` (:data:`semlm.reference.PAPER_B_EVAL_DOMAINS`) one
    prompt, ``authors_samples`` continuations with the compounding penalty, scored by :func:`authors_stickiness`
    on prompt + continuation, and on the continuation alone (``stickiness``), density and distinct-2.
    """
    out, samples = {}, generation.authors_samples
    per_seed = max(1, math.ceil(samples / len(generation.seeds)))
    for name, domain in domains.items():
        rows = []
        for seed in generation.seeds:
            for sample in generate_texts(model, tokenizer, [domain["prompt"]], per_seed, generation.authors_new_tokens,
                                         seed, temperature=generation.temperature,
                                         repetition_penalty=generation.repetition_penalty, penalty_form="authors"):
                words = words_of(sample["text"])
                rows.append({**sample, "domain": name,
                             "authors_stickiness": authors_stickiness(sample["full_text"], domain["terms"]),
                             "stickiness": authors_stickiness(sample["text"], domain["terms"]),
                             "unique_density": unique_domain_density(words, domain["terms"]),
                             "distinct_2": distinct_n(words, 2)})
        rows = rows[:samples]
        out[name] = DomainScores({m: sample_interval([r[m] for r in rows]) for m in AUTHORS_METRICS}, rows)
    return out


def _encode_scores(scores: dict[str, DomainScores]) -> dict:
    return {name: {"summary": {m: v.to_dict() for m, v in s.summary.items()}, "samples": s.samples}
            for name, s in scores.items()}


def _decode_scores(data: dict) -> dict[str, DomainScores]:
    return {name: DomainScores({m: Interval.from_dict(v) for m, v in s["summary"].items()}, s["samples"])
            for name, s in data.items()}


def scored_authors(record: RunRecord, tokenizer, domains: dict, generation: GenerationSettings,
                   model=None) -> dict[str, DomainScores]:
    """:func:`authors_protocol` of ``record``'s model (``model``, or loaded from the run when it must be computed),
    computed once per run, code and setting and kept with the run (:func:`~semlm.core.runs.cached_evaluation`)."""
    return runs.cached_evaluation(
        record, authors_protocol, (domains, generation),
        lambda: authors_protocol(model if model is not None else record.load(), tokenizer, domains, generation),
        _encode_scores, _decode_scores)


def scored_retention(record: RunRecord, tokenizer, domains: dict[str, Domain], generation: GenerationSettings,
                     model=None, alpha: float | None = None) -> dict[str, DomainScores]:
    """:func:`domain_retention` of ``record``'s model, computed once per run, code and setting, as
    :func:`scored_authors` (the stopword list is part of the setting)."""
    settings = (domains, generation, alpha, sorted(stop_words()))
    return runs.cached_evaluation(
        record, domain_retention, settings,
        lambda: domain_retention(model if model is not None else record.load(), tokenizer, domains, generation,
                                 alpha=alpha),
        _encode_scores, _decode_scores)


#: validation blocks whose teacher-forced entropy sets the sharpening control's temperature
SHARPENING_BLOCKS = 64


def protocols_over_seeds(by_seed: dict[int, dict[str, RunRecord]], tokenizer, authors_domains: dict,
                         domains: dict[str, Domain], generation: GenerationSettings, val_blocks):
    """Every seed's plain and gated GPT scored with the authors' protocol and the book's, with the sharpening
    control as the model ``"sharpened"``: the plain GPT at the temperature that gives it the gated GPT's mean
    next-token entropy on ``val_blocks`` (:func:`~semlm.idea.sharpening.sharpening_temperature`). Returns
    ``{seed: {model: {domain: scores}}}`` of each protocol and ``{seed: temperature}``. Each score is computed
    once per run and setting (:func:`scored_authors`, :func:`scored_retention`): what the chapter scored already
    for its first seed's pair is read back."""
    from semlm.idea.sharpening import sharpening_temperature

    authors, book, temperatures = {}, {}, {}
    for seed, pair in by_seed.items():
        models = {name: record.load() for name, record in pair.items()}
        temperatures[seed], _ = sharpening_temperature(models["baseline"], models["gated"], val_blocks,
                                                       generation.temperature, SHARPENING_BLOCKS)
        arms = {**pair, "sharpened": pair["baseline"]}  # the sharpening control: the plain GPT, cooler
        models["sharpened"] = models["baseline"]
        settings = {**dict.fromkeys(pair, generation), "sharpened": replace(generation, temperature=temperatures[seed])}
        authors[seed] = {name: scored_authors(arms[name], tokenizer, authors_domains, settings[name], model)
                         for name, model in models.items()}
        book[seed] = {name: scored_retention(arms[name], tokenizer, domains, settings[name], model)
                      for name, model in models.items()}
    return authors, book, temperatures
