"""One decisive seed of a CPU claim (issue 45): what ``python -m semlm.book decisive`` trains and scores per seed.

The CPU claims fall into *families*: claims decided on the same models. A family's seed trains those models in a
fresh runs folder (no cached run is reused), scores them once, and returns the per-seed values each claim's rule
judges: one number per oriented comparison (``{claim: {comparison: value}}``), named as the rule in
:mod:`semlm.book.claims` names it, plus the raw metrics they came from. No weights leave the runs folder.

* ``fusion-pair``: chapter 4's causal baseline and fusion model (paper A's synthetic corpus) at the seed:
  ``A-T1-fusion-better`` (seen-only PPL, baseline - fusion), ``A-T6-exclaim`` / ``A-T6-question`` (the focus
  token's cross-entropy, baseline - fusion), ``A-T1-mse`` (the fusion model's semantic MSE) and ``A-T4-ood-neg``
  (its held-out adjective rate under negative hard control, 200 sentences, chapter 4's decoder).
* ``feature-steering``: a causal fusion model (chapter 4's) at the seed, decoded through its features only under
  the mirror-image requests (``A-feature-steering``: polarity accuracy, requested - opposite request), 200 sentences
  per request, in two generation draws (each shared by both requests).
* ``soft-control``: chapter 10's intent and shuffled models at the seed (``A-soft-control``: features-only polarity
  accuracy, intent - shuffled), in two generation draws of :data:`SOFT_CONTROL_SAMPLES` sentences per request, each
  shared by both models (the chapter's own reading, at its 100, is kept for reference).
* ``topic-drift``: chapter 9's plain and gated GPT at the seed, each seed in its own topic world (world seed =
  training seed: its own words and documents, the same laws), the data's switch rate measured on at least 20,000
  held-out transitions of that world (``B-topic-drift``: switch rate, plain at matched PPL - gated and sharpened
  plain - gated, with the gated model's excess drift for the rule's guard), in two generation draws (each shared
  by every arm). A seed whose plain checkpoints do not bracket the gated model's PPL is not comparable: its file
  says so, and it counts against power.
* ``lora``: chapter 8's LoRA baseline, LoRA + idea gate and capacity control on the book's frozen 4-bit backbone
  at the seed (``B-lora-ppl``: validation PPL, baseline - gated and capacity control - gated). The backbone is the
  profile's own (pre-trained once per call at the profile's seed, as the chapter does), not a seed's.

The module imports torch and semlm's experiments only when a seed runs.
"""

from __future__ import annotations

import json
import resource
import time
from dataclasses import dataclass, replace
from pathlib import Path

from semlm.book.seeds import code_hash, seed_files, two_draw_split, utc_now

#: Sentences per request of the held-out adjective rate and of feature steering (chapter 4's N, as in the paper).
OOD_SENTENCES = 200
#: Sentences per (polarity, punctuation) request of A-soft-control in each draw: the cpu pilot's variance split at the
#: chapter's 100 put the sampling part of a seed's mean of two draws above a quarter of the variance between seeds
#: (book/recorded/cpu-pilot-39b0955); 200 halves it below.
SOFT_CONTROL_SAMPLES = 200
#: The generation draws of the claims judged on generated text: draw ``d`` samples with the chapter's sampling seed
#: plus ``d * DRAW_OFFSET`` (draw 0 is the chapter's own protocol); both arms of a comparison share a draw's seed.
DRAWS = (0, 1)
DRAW_OFFSET = 100_003


def protocol() -> dict:
    """The per-seed protocol a registration freezes (:mod:`semlm.book.registration_cpu`): what the families sample,
    how many draws, and how each seed's topic world is drawn."""
    from semlm.idea.topic_experiment import WORLD_RATE_TRANSITIONS

    return {"ood_and_steering_sentences_per_request": OOD_SENTENCES,
            "soft_control_sentences_per_request": SOFT_CONTROL_SAMPLES, "draws": list(DRAWS),
            "draw_offset": DRAW_OFFSET, "topic_world": "world seed = training seed (lexicon_seed and data.seed)",
            "world_rate_transitions": WORLD_RATE_TRANSITIONS}


@dataclass(frozen=True)
class Family:
    """Claims decided on the same models of one seed; ``cpu_seconds``: one seed's planning cost at ``cpu`` on the
    book's 2-core development machine (measured in book/recorded/cpu-pilot-39b0955; soft-control's with the doubled
    samples estimated; the registration's affordability adds them up)."""

    name: str
    claims: tuple[str, ...]
    cpu_seconds: float
    needs: tuple[str, ...] = ()  # chapters whose data the family reads (for a clear error before training)


FAMILIES: dict[str, Family] = {f.name: f for f in (
    Family("fusion-pair", ("A-T1-fusion-better", "A-T6-exclaim", "A-T6-question", "A-T1-mse", "A-T4-ood-neg"),
           cpu_seconds=122.0),
    Family("feature-steering", ("A-feature-steering",), cpu_seconds=61.0),
    Family("soft-control", ("A-soft-control",), cpu_seconds=150.0),
    Family("topic-drift", ("B-topic-drift",), cpu_seconds=26.0),
    Family("lora", ("B-lora-ppl",), cpu_seconds=77.0, needs=("08_lora_4bit_idea_gating",)),
)}
#: claim -> its family
FAMILY_OF: dict[str, str] = {claim: f.name for f in FAMILIES.values() for claim in f.claims}


def family_of(claim: str) -> Family:
    """The family that decides ``claim``; a ValueError names the claims there are."""
    try:
        return FAMILIES[FAMILY_OF[claim]]
    except KeyError:
        raise ValueError(f"unknown decisive claim {claim!r}; the CPU claims with a decisive family are "
                         f"{', '.join(sorted(FAMILY_OF))}") from None


# -- the families ----------------------------------------------------------------------------------------------


def _fusion_pair(seed: int, profile: str, runs_dir: Path, prepared) -> dict:
    from semlm.fusion.audit import control_report
    from semlm.fusion.decoding import ClauseGrammar
    from semlm.fusion.profiles import synthetic_profile
    from semlm.fusion.synthetic_experiment import prepare_data, train_causal_models

    config = synthetic_profile(profile, seed)
    records = train_causal_models(config, runs_dir, workers=1)
    base, fusion = records["baseline"].metrics, records["fusion"].metrics
    data = prepare_data(config.corpus, "causal")
    report = control_report(records["fusion"].load(), data.featurizer, ClauseGrammar(data.vocab),
                            data.corpus.split, OOD_SENTENCES, seed, "causal")
    values = {
        "A-T1-fusion-better": {"baseline - fusion": base.ppl_seen_only - fusion.ppl_seen_only},
        "A-T6-exclaim": {"baseline - fusion": base.focus_ce["!"] - fusion.focus_ce["!"]},
        "A-T6-question": {"baseline - fusion": base.focus_ce["?"] - fusion.focus_ce["?"]},
        "A-T1-mse": {"fusion semantic MSE": fusion.sem_mse},
        "A-T4-ood-neg": {"held-out adjective rate": _value(report["ood_hit"]["neg"])},
    }
    raw = {name: {k: getattr(m, k) for k in ("ppl", "ppl_seen_only", "focus_ce", "sem_mse")}
           for name, m in (("baseline", base), ("fusion", fusion))}
    raw["fusion"]["ood_hit"] = {cls: _value(v) for cls, v in report["ood_hit"].items()}
    return {"values": values, "metrics": raw}


def _value(v):
    return v["value"] if isinstance(v, dict) else v


def _feature_steering(seed: int, profile: str, runs_dir: Path, prepared) -> dict:
    from semlm.core import runs
    from semlm.fusion.audit import features_only_decodes, judged_polarity, steering_accuracies
    from semlm.fusion.decoding import ClauseGrammar
    from semlm.fusion.profiles import synthetic_profile
    from semlm.fusion.synthetic_experiment import SYNTHETIC, prepare_data, spec_for

    config = synthetic_profile(profile, seed)
    model = runs.run_one(SYNTHETIC, spec_for(config, "fusion", "causal"), runs_dir).load()
    data = prepare_data(config.corpus, "causal")
    grammar = ClauseGrammar(data.vocab)
    draws = [steering_accuracies(judged_polarity(features_only_decodes(
        model, data.featurizer, grammar, OOD_SENTENCES, seed + d * DRAW_OFFSET))) for d in DRAWS]
    return {"values": {"A-feature-steering": {"requested - opposite": [r - o for r, o in draws]}},
            "metrics": {"requested": [r for r, _ in draws], "opposite": [o for _, o in draws],
                        "n_per_request": OOD_SENTENCES}}


def _soft_control(seed: int, profile: str, runs_dir: Path, prepared) -> dict:
    from semlm.core import runs
    from semlm.fusion.intent_experiment import (EXPERIMENT, IntentRun, control_requests, judge, prepare_intent_data,
                                                sample_sentences)
    from semlm.fusion.profiles import intent_profile

    config = intent_profile(profile, seed)
    synthetic = config.synthetic
    accuracy, chapter = {}, {}
    requests = control_requests(SOFT_CONTROL_SAMPLES)
    for variant in ("intent", "shuffled"):
        run = IntentRun(synthetic, variant, config.samples_per_request, tuple(config.strength_levels))
        record = runs.run_one(EXPERIMENT, runs.RunSpec(variant, seed, run), runs_dir)
        chapter[variant] = record.metrics.readings[variant].polarity_acc  # the chapter's reading, for reference
        data, model = prepare_intent_data(synthetic.corpus, variant), record.load()
        accuracy[variant] = [judge(sample_sentences(model, data, requests, 1000 * seed + d * DRAW_OFFSET), requests,
                                   data.base.corpus.split.held_out)["polarity_acc"] for d in DRAWS]
    return {"values": {"A-soft-control": {"intent - shuffled": [i - s for i, s in zip(accuracy["intent"],
                                                                                       accuracy["shuffled"])]}},
            "metrics": {"polarity_acc": accuracy, "samples_per_request": SOFT_CONTROL_SAMPLES,
                        "chapter_reading": chapter}}


def _topic_drift(seed: int, profile: str, runs_dir: Path, prepared) -> dict:
    from semlm.core import runs
    from semlm.idea.profiles import topic_drift_profile
    from semlm.idea.topic_experiment import (TOPIC_DRIFT, Measurements, prepare_topic_data, seed_arms, topic_run,
                                             world_data_rate, world_of_seed)

    config = world_of_seed(topic_drift_profile(profile), seed)
    records = {kind: {seed: runs.run_one(TOPIC_DRIFT, topic_run(config, kind == "gated", seed), runs_dir)}
               for kind in ("plain", "gated")}
    data, rate = prepare_topic_data(config.data), world_data_rate(config.data)
    metrics = {"world": {"seed": config.data.seed, "lexicon_seed": config.data.lexicon_seed},
               "data_rate": rate.mean, "data_rate_interval": [rate.low, rate.high], "data_transitions": rate.n}
    draws = []
    for d in DRAWS:
        drawn = replace(config, generation_seed=config.generation_seed + d * DRAW_OFFSET)
        arms, detail = seed_arms(Measurements(records, data, drawn), seed)
        if arms.arms is None or not arms.comparable:
            return {"values": {"B-topic-drift": None}, "comparable": False, "metrics": {**metrics, "detail": detail}}
        draws.append(arms.arms)
    switch = [{arm: a[arm].rates()[0] for arm in ("gated", "plain", "sharpened", "gate_off")} for a in draws]
    values = {"plain - gated": [r["plain"] - r["gated"] for r in switch],
              "sharpened plain - gated": [r["sharpened"] - r["gated"] for r in switch],
              "gated excess drift": [r["gated"] - rate.mean for r in switch],
              "plain - gated interpolation error": [a["plain"].interpolation_error for a in draws],
              "sharpened plain - gated interpolation error": [a["sharpened"].interpolation_error for a in draws],
              "mixed share gated": [a["gated"].rates()[1] for a in draws],
              "mixed share plain": [a["plain"].rates()[1] for a in draws]}
    return {"values": {"B-topic-drift": values}, "comparable": True,
            "metrics": {**metrics, "switch_rate": switch, "detail": detail}}


def _lora_prepare(profile: str, runs_dir: Path):
    """The profile's frozen backbone, pre-trained (once, before the seeds) in ``runs_dir``."""
    from semlm.core.runs import RunContext, run_many
    from semlm.idea.lora_experiment import BACKBONE_PRETRAINING, backbone_runs
    from semlm.idea.profiles import lora_profile

    config = lora_profile(profile)
    return run_many(BACKBONE_PRETRAINING, backbone_runs(config), RunContext(profile, runs_dir, 1, False))


def _lora(seed: int, profile: str, runs_dir: Path, prepared) -> dict:
    from semlm.core import runs
    from semlm.idea.lora_experiment import LORA, lora_run, resolve_backbone
    from semlm.idea.profiles import lora_profile

    config = lora_profile(profile, seed)
    backbone = resolve_backbone(config, prepared)
    q = config.quantizations[0]
    specs = {"baseline": lora_run(config, backbone, q, False), "gated": lora_run(config, backbone, q, True),
             "capacity control": lora_run(config, backbone, q, False, control=True)}
    ppl = {name: runs.run_one(LORA, spec, runs_dir).metrics.val_ppl for name, spec in specs.items()}
    return {"values": {"B-lora-ppl": {"baseline - gated": ppl["baseline"] - ppl["gated"],
                                      "capacity control - gated": ppl["capacity control"] - ppl["gated"]}},
            "metrics": {"val_ppl": ppl, "quantization": q}}


_RUNNERS = {"fusion-pair": (None, _fusion_pair), "feature-steering": (None, _feature_steering),
            "soft-control": (None, _soft_control), "topic-drift": (None, _topic_drift),
            "lora": (_lora_prepare, _lora)}


def prepare(family: str, profile: str, runs_dir: str | Path):
    """What a family's seeds share, made once before they run (the LoRA backbone), or None."""
    prep = _RUNNERS[family][0]
    return None if prep is None else prep(profile, Path(runs_dir))


def run_seed(family: str, seed: int, profile: str, runs_dir: str | Path, prepared=None) -> dict:
    """Train and score one seed of ``family`` (module docstring) in ``runs_dir``; the seed's result."""
    started, wall0 = utc_now(), time.perf_counter()
    cpu0 = _cpu_seconds()
    out = _RUNNERS[family][1](seed, profile, Path(runs_dir) / family / f"seed-{seed}", prepared)
    return {"family": family, "seed": seed, "profile": profile, "claims": list(FAMILIES[family].claims),
            "protocol": protocol(), **out, "code_sha256": code_hash(),
            "started_at": started, "wall_seconds": round(time.perf_counter() - wall0, 2),
            "cpu_seconds": round(_cpu_seconds() - cpu0, 2)}


def _cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def one(family: str, seed: int, profile: str, runs_dir: str, out: str, prepared=None) -> int:
    """Worker: one seed on one thread, its file written only once it has finished (a killed seed leaves none)."""
    import torch

    from semlm.core.processes import die_with_parent
    from semlm.core.runs import write_atomic

    die_with_parent()
    torch.set_num_threads(1)
    result = run_seed(family, seed, profile, runs_dir, prepared)
    write_atomic(Path(out) / f"{seed}.json", json.dumps(result, indent=1, sort_keys=True, default=float) + "\n")
    return seed


def read_results(folder: str | Path) -> dict[str, list[dict]]:
    """``{family: [seed results, by seed]}`` of a recording's ``seeds/<family>/<seed>.json`` files."""
    root = Path(folder) / "seeds"
    families = sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    return {family: seed_files(root / family) for family in families}


def per_seed(results: list[dict], claim: str) -> dict[str, list[float]]:
    """``{comparison: [value per seed]}`` of ``claim`` over the ``results`` that hold a value for it (a seed whose
    models are not comparable holds None and is left out); a value recorded per draw is averaged."""
    usable = [r for r in results if r["values"][claim] is not None]
    if not usable:
        return {}
    return {c: [_mean(r["values"][claim][c]) for r in usable] for c in usable[0]["values"][claim]}


def _mean(v) -> float:
    return sum(v) / len(v) if isinstance(v, list) else float(v)


def variance_split(results: list[dict], claim: str, names=None) -> dict[str, dict] | None:
    """Per comparison of ``claim`` recorded per generation draw (two draws per seed), the split of the per-seed value
    ``d`` into sampling noise within a seed (``mean (d1 - d2)^2 / 2``: one draw's variance) and the variance between
    seeds (``Var(d bar) - within / 2``), for the comparisons ``names`` (default all); None if the claim is not
    recorded per draw."""
    results = [r for r in results if r["values"][claim] is not None]
    comparisons = results[0]["values"][claim] if results else {}
    comparisons = {k: v for k, v in comparisons.items() if names is None or k in names}
    if not comparisons or not all(isinstance(v, list) and len(v) == 2 for v in comparisons.values()):
        return None
    splits = {name: two_draw_split([r["values"][claim][name] for r in results]) for name in comparisons}
    return {name: {k: split[k] for k in ("seeds", "mean", "within", "between", "var_of_seed_means")}
            for name, split in splits.items()}
