"""The registration of the CPU claims' decisive seeds (issue 45): what is fixed, with no results, before the runs that
decide them.

``CPU_SEEDS`` is None until the registration commit sets it: for each family of claims decided on the same models
(:data:`semlm.book.cpu_seeds.FAMILIES`) its registered seed count ``n``, from the claims' rules
(:mod:`semlm.book.claims`: the smallest effect of interest, the pilot's inflated planning SD, and
:func:`semlm.book.effects.least_seeds`, or the affordable n with its power stated). The first commit whose change of
this file adds the line matching :data:`MARK` is the registration: ``python -m semlm.book decisive`` refuses to
decide from any tree whose copy of this file differs from that commit's, and records exactly the registered seeds,
1001 ... 1000 + n per family, a failed seed replaced by the next spare. Planning runs (``--pilot``) use seeds
501-999 only.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field

from semlm.data.paths import REPO_ROOT

#: The files the registration freezes: this one.
REGISTERED_FILES = ("lib/semlm/book/registration_cpu.py",)
#: The line (a regular expression) whose first appearance in this file's history marks the registration commit.
MARK = r"^CPU_SEEDS = CpuRegistration\("


@dataclass(frozen=True)
class CpuRegistration:
    """``n[family]`` decisive seeds of each family from ``first`` (``spares`` more, used in order for failed seeds),
    by the per-seed ``protocol`` (the deciding command refuses code whose protocol differs), at ``profile``,
    recorded in ``book/recorded/cpu-decisive-<name>/``."""

    name: str
    n: dict[str, int] = field(default_factory=dict)
    protocol: dict = field(default_factory=dict)  # semlm.book.cpu_seeds.protocol() as registered
    profile: str = "cpu"
    first: int = 1001
    spares: int = 4

    def seeds(self, family: str) -> list[int]:
        return list(range(self.first, self.first + self.n[family]))

    def all_seeds(self, family: str) -> list[int]:
        return list(range(self.first, self.first + self.n[family] + self.spares))

    @property
    def folder(self) -> str:
        return f"cpu-decisive-{self.name}"


#: The CPU claims, registered from the pilot ``book/recorded/cpu-pilot-39b0955`` and the rules of
#: :mod:`semlm.book.claims`, before any decisive seed. Per family, ``n`` is the least seed count with 0.85 power at 0
#: and at ``m`` for every claim it decides (:func:`semlm.book.effects.least_seeds` at the inflated planning SDs):
#:
#: - fusion-pair, 78: A-T1-fusion-better's planned seeds (pilot cpu-book-e3e2d4f, SD 0.115 inflated x2.12; m =
#:   0.085 seen-only PPL); A-T6-exclaim and A-T6-question (planned 13 and 16) and the threshold claims A-T1-mse and
#:   A-T4-ood-neg are judged on the same 78 seeds; 122 CPU-s a seed in the pilot;
#: - feature-steering, 5: the rule's least seeds (its minimum); pilot SD of requested - opposite 0.0187 over 6 seeds,
#:   within-seed variance of one draw 9.4e-5 against 3.0e-4 between seeds (the sampling part of a seed's mean of two
#:   draws under a quarter of it at 200 sentences per request); 61 CPU-s a seed;
#: - soft-control, 3: pilot SD 0.0165 over 6 seeds; the pilot's split (1.5e-4 within, 1.95e-4 between at the
#:   chapter's 100 sentences per request) puts the sampling part above a quarter, so 200 per request and draw;
#:   141 CPU-s a seed at 200;
#: - topic-drift, 138: over worlds (world seed = training seed; the data's rate on at least 20,000 held-out
#:   transitions per world); pilot SDs 0.047 and 0.044 over 10 worlds (correlation 0.97), within-seed variance of
#:   one draw 1.4e-4 and 1.1e-4 against 2.1e-3 and 1.9e-3 between seeds; guard pilot 0.060 +- 0.024; 26 CPU-s a seed;
#: - lora, 6: B-lora-ppl's planned seeds (pilot cpu-book-e3e2d4f); 77 CPU-s a seed.
#:
#: About 14,400 CPU-seconds in all (4.0 CPU-hours, within the 6 the issue calls affordable); seeds 1001 ... 1000 + n
#: per family, spares used in order for failed seeds; recorded in ``book/recorded/cpu-decisive-c1/``.
CPU_SEEDS = CpuRegistration(
    "c1", n={"fusion-pair": 78, "feature-steering": 5, "soft-control": 3, "topic-drift": 138, "lora": 6},
    protocol={"ood_and_steering_sentences_per_request": 200, "soft_control_sentences_per_request": 200,
              "draws": [0, 1], "draw_offset": 100003,
              "topic_world": "world seed = training seed (lexicon_seed and data.seed)", "world_rate_transitions": 20000})


def registration_commit() -> str | None:
    """The oldest commit whose change of this file adds or removes a line matching :data:`MARK`, or None."""
    try:
        out = subprocess.run(["git", "log", "--format=%H", "-G", MARK, "--", REGISTERED_FILES[0]], cwd=REPO_ROOT,
                             capture_output=True, text=True, timeout=30).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    return out[-1] if out else None
