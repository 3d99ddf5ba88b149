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


#: Not registered yet (see the module docstring).
CPU_SEEDS: CpuRegistration | None = None


def registration_commit() -> str | None:
    """The oldest commit whose change of this file adds or removes a line matching :data:`MARK`, or None."""
    try:
        out = subprocess.run(["git", "log", "--format=%H", "-G", MARK, "--", REGISTERED_FILES[0]], cwd=REPO_ROOT,
                             capture_output=True, text=True, timeout=30).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    return out[-1] if out else None
