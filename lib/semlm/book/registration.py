"""Registrations of decisive seed runs: what is fixed, with no results, before the runs that decide a claim.

``B_SEEDS`` registers paper B's real-data claims (``B-ppl``, ``B-distinct``, ``B-stickiness``) decided by
``python -m semlm.book seeds`` on a GPU (issue 46). It is ``None`` until the GPU pilot (seeds 501-999, recorded
under ``book/recorded/gpu-pilot-*``) has measured what the registration needs. The commit that sets it is the
registration: the seeds command refuses to decide from any tree whose registered files differ from that commit's.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass

from semlm.book.seeds import Protocol
from semlm.data.paths import REPO_ROOT

#: The files a registration freezes: this one (rules, n, seeds, protocol) and the prompt rule.
REGISTERED_FILES = ("lib/semlm/book/registration.py", "lib/semlm/idea/rule_prompts.py")
#: The line (a regular expression) whose first appearance in this file's history marks the registration commit.
MARK = r"^B_SEEDS = SeedsRegistration\("


@dataclass(frozen=True)
class SeedsRegistration:
    """``n`` decisive seeds from ``first`` (spares follow, used in order for failed seeds), the protocol, the
    smallest effect of interest of ``B-stickiness`` and the pilot it came from, and the recording folder's name."""

    name: str
    n: int
    protocol: Protocol
    stickiness_m: float
    pilot: str
    first: int = 1001
    spares: int = 4

    @property
    def seeds(self) -> list[int]:
        return list(range(self.first, self.first + self.n))

    @property
    def all_seeds(self) -> list[int]:
        return list(range(self.first, self.first + self.n + self.spares))

    @property
    def folder(self) -> str:
        return f"gpu-seeds-{self.name}"


#: Paper B's real-data claims, registered from the GPU pilot ``book/recorded/gpu-pilot-907a21a`` (seeds 501-512, the
#: ``cpu-long`` recipe, the rule-chosen prompts, 3 samples per prompt, two draws per seed):
#:
#: - ``m`` of B-stickiness = 3.05% of the pilot's plain level 0.02725 on the rule-chosen prompts = 0.00083 (half the
#:   paper's 6.1% gain, as the rules fix it);
#: - samples per prompt 18: the pilot's variance split (within-seed variance of one draw's difference 1.40e-5 for
#:   gated - plain and 1.84e-5 for gated - sharpened plain at 3 samples; between-seed 7.8e-6 and 6.5e-6) puts the
#:   sampling part of a seed's mean of two draws at or under a quarter of the between-seed part from 18 samples on;
#:   planning SDs 0.00300 and 0.00283 (inflated for the pilot's 12 seeds in the rule);
#: - n = 120, the affordable n: about 30 minutes of one GPU at 12 seeds side by side per batch. The least n with
#:   0.85 power at 0 and at m is 183; at 120 the power is about 0.70 at 0 and 0.68 at m (the rule states it);
#: - seeds 1001-1120, spares 1121-1124 used in order for failed seeds; B-ppl and B-distinct are judged on the same
#:   seeds, by their committed non-inferiority rules; recorded in ``book/recorded/gpu-seeds-b1/``.
B_SEEDS = SeedsRegistration("b1", n=120, protocol=Protocol(profile="cpu-long", samples_per_prompt=18, draws=(0, 1)),
                            stickiness_m=0.00083, pilot="gpu-pilot-907a21a")
#: Planning SDs of B-stickiness's two comparisons (gated - plain, gated - sharpened plain) at the registered samples,
#: from the pilot's variance split, and their correlation over the pilot's seeds.
B_STICKINESS_SD = (0.003001, 0.002827)
B_STICKINESS_CORRELATION = 0.9822
#: The claims the registration decides, all on its seeds.
B_CLAIMS = ("B-ppl", "B-distinct", "B-stickiness")


def registration_commit() -> str | None:
    """The oldest commit whose change of this file adds or removes a line matching :data:`MARK`, or None."""
    try:
        out = subprocess.run(["git", "log", "--format=%H", "-G", MARK, "--", REGISTERED_FILES[0]], cwd=REPO_ROOT,
                             capture_output=True, text=True, timeout=30).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    return out[-1] if out else None
