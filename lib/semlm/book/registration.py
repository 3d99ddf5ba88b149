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
#: The text whose first appearance in this file's history marks the registration commit.
MARK = "B_SEEDS = SeedsRegistration("


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


B_SEEDS: SeedsRegistration | None = None


def registration_commit() -> str | None:
    """The oldest commit that sets ``B_SEEDS`` in this file (git's pickaxe), or None."""
    try:
        out = subprocess.run(["git", "log", "--format=%H", "-S", MARK, "--", REGISTERED_FILES[0]], cwd=REPO_ROOT,
                             capture_output=True, text=True, timeout=30).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    return out[-1] if out else None
