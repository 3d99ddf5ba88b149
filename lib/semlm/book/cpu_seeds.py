"""One decisive seed of a CPU claim (issue 45): what ``python -m semlm.book decisive`` trains and scores per seed.

The CPU claims fall into *families*: claims decided on the same models. A family's seed trains those models in a
fresh runs folder (no cached run is reused), scores them once, and returns the per-seed values each claim's rule
judges: one number per oriented comparison (``{claim: {comparison: value}}``), named as the rule in
:mod:`semlm.book.claims` names it, plus the raw metrics they came from. No weights leave the runs folder.

* ``fusion-pair``: chapter 4's causal baseline and fusion model (paper A's synthetic corpus) at the seed:
  ``A-T1-fusion-better`` (seen-only PPL, baseline - fusion), ``A-T6-exclaim`` / ``A-T6-question`` (the focus
  token's cross-entropy, baseline - fusion), ``A-T1-mse`` (the fusion model's semantic MSE) and ``A-T4-ood-neg``
  (its held-out adjective rate under negative hard control, 200 sentences, chapter 4's decoder).
* ``lora``: chapter 8's LoRA baseline, LoRA + idea gate and capacity control on the book's frozen 4-bit backbone
  at the seed (``B-lora-ppl``: validation PPL, baseline - gated and capacity control - gated). The backbone is the
  profile's own (pre-trained once per call at the profile's seed, as the chapter does), not a seed's.

The module imports torch and semlm only when a seed runs.
"""

from __future__ import annotations

import datetime as _dt
import json
import time
from dataclasses import dataclass
from pathlib import Path

#: Sentences per request of the held-out adjective rate (chapter 4's N, as in the paper).
OOD_SENTENCES = 200


@dataclass(frozen=True)
class Family:
    """Claims decided on the same models of one seed; ``cpu_seconds``: one seed's planning cost at ``cpu`` on the
    book's 2-core development machine (measured; the registration's affordability adds them up)."""

    name: str
    claims: tuple[str, ...]
    cpu_seconds: float
    needs: tuple[str, ...] = ()  # chapters whose data the family reads (for a clear error before training)


FAMILIES: dict[str, Family] = {f.name: f for f in (
    Family("fusion-pair", ("A-T1-fusion-better", "A-T6-exclaim", "A-T6-question", "A-T1-mse", "A-T4-ood-neg"),
           cpu_seconds=110.0),
    Family("lora", ("B-lora-ppl",), cpu_seconds=60.0, needs=("08_lora_4bit_idea_gating",)),
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


def _lora_prepare(profile: str, runs_dir: Path):
    """The profile's frozen backbone, pre-trained (once, before the seeds) in ``runs_dir``."""
    from semlm.core.runs import RunContext, run_many
    from semlm.idea.lora_experiment import BACKBONE_PRETRAINING, backbone_runs
    from semlm.idea.profiles import lora_profile

    config = lora_profile(profile)
    records = run_many(BACKBONE_PRETRAINING, backbone_runs(config), RunContext(profile, runs_dir, 1, False))
    return records


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


_RUNNERS = {"fusion-pair": (None, _fusion_pair), "lora": (_lora_prepare, _lora)}


def prepare(family: str, profile: str, runs_dir: str | Path):
    """What a family's seeds share, made once before they run (the LoRA backbone), or None."""
    prep = _RUNNERS[family][0]
    return None if prep is None else prep(profile, Path(runs_dir))


def run_seed(family: str, seed: int, profile: str, runs_dir: str | Path, prepared=None) -> dict:
    """Train and score one seed of ``family`` (module docstring) in ``runs_dir``; the seed's result."""
    import resource

    from semlm.book.seeds import code_hash

    started, wall0 = _dt.datetime.now(_dt.timezone.utc), time.perf_counter()
    cpu0 = _cpu_seconds(resource)
    out = _RUNNERS[family][1](seed, profile, Path(runs_dir) / f"seed-{seed}", prepared)
    return {"family": family, "seed": seed, "profile": profile, "claims": list(FAMILIES[family].claims),
            **out, "code_sha256": code_hash(), "started_at": started.isoformat(timespec="seconds"),
            "wall_seconds": round(time.perf_counter() - wall0, 2),
            "cpu_seconds": round(_cpu_seconds(resource) - cpu0, 2)}


def _cpu_seconds(resource) -> float:
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
    out = {}
    for family in sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []:
        files = sorted((root / family).glob("*.json"), key=lambda p: int(p.stem))
        out[family] = [json.loads(p.read_text()) for p in files]
    return out


def per_seed(results: list[dict], claim: str) -> dict[str, list[float]]:
    """``{comparison: [value per seed]}`` of ``claim`` over ``results`` (a value recorded per draw is averaged)."""
    comparisons = results[0]["values"][claim]
    return {c: [_mean(r["values"][claim][c]) for r in results] for c in comparisons}


def _mean(v) -> float:
    return sum(v) / len(v) if isinstance(v, list) else float(v)
