"""The profile names every chapter shares, ``smoke`` (seconds; tests and CI), ``cpu`` (the default book
build on a 2-core laptop) and ``paper`` (the papers' own scale; a GPU for paper B), with the check of a
notebook's parameters, ``make lab``'s profile override and the CPU's bf16 capability. Torch-free.

What a profile means for each experiment lives beside it: :mod:`semlm.fusion.profiles` (paper A) and
:mod:`semlm.idea.profiles` (paper B).
"""

from __future__ import annotations

import os
from pathlib import Path

PROFILES: tuple[str, ...] = ("smoke", "cpu", "paper")
#: Profiles of one chapter only, for recorded runs made outside the book build (``.ci/run-long``):
#: ``cpu-long`` trains chapter 6's plain and gated GPT on a 2-core CPU until they beat the bigram
#: (hours; see :func:`semlm.idea.profiles.idea_profile`). The book never builds at these profiles.
LONG_PROFILES: dict[str, str] = {"cpu-long": "06_idea_gating"}


#: ``SEMLM_CPU_BF16``: ``auto`` (default; bf16 autocast for both papers' ``cpu`` profiles where the CPU
#: computes bf16 natively) or ``off`` (float32 everywhere, e.g. to compare with a build on a CPU without it).
CPU_BF16_VARIABLE = "SEMLM_CPU_BF16"
CPU_BF16_CHOICES: tuple[str, ...] = ("auto", "off")


def cpu_computes_bf16() -> bool:
    """Whether this CPU multiplies bf16 matrices natively (x86 AVX512-BF16 or AMX tiles). Without it oneDNN
    emulates bf16 and autocast makes training slower, not faster (``book/recorded/cpu-bf16-variants`` times a
    step with oneDNN capped below both: ``semlm.fusion.bench.emulated_bf16_step_ratios``). Read from
    ``/proc/cpuinfo`` (no torch import, so a profile stays cheap to build); elsewhere torch's own check."""
    try:
        flags = next((line.split(":", 1)[1].split() for line in Path("/proc/cpuinfo").read_text().splitlines()
                      if line.startswith("flags")), [])
        return bool({"avx512_bf16", "amx_bf16"} & set(flags))
    except OSError:
        import torch  # not Linux

        cpu = getattr(torch, "cpu", None)
        checks = [getattr(cpu, name, None) for name in ("_is_avx512_bf16_supported", "_is_amx_tile_supported")]
        return any(bool(check()) for check in checks if check is not None)


def cpu_precision(otherwise: str | None = None) -> str | None:
    """``TrainConfig.autocast`` of a ``cpu`` profile: ``"bf16"`` where :func:`cpu_computes_bf16` and
    ``SEMLM_CPU_BF16`` is ``auto``, else ``otherwise`` (paper A: None, float32; paper B: "bf16_on_cuda"). The
    value goes into every run key, so a bf16 model and a float32 one never share a cache folder."""
    return "bf16" if cpu_bf16_setting() == "auto" and cpu_computes_bf16() else otherwise


def cpu_bf16_setting() -> str:
    """``$SEMLM_CPU_BF16`` (one of :data:`CPU_BF16_CHOICES`, default ``auto``); a one-line ValueError
    for anything else (the book runner checks it before any chapter starts; no torch needed)."""
    choice = os.environ.get(CPU_BF16_VARIABLE, "auto").strip().lower() or "auto"
    if choice not in CPU_BF16_CHOICES:
        raise ValueError(f"{CPU_BF16_VARIABLE}={choice!r} is not understood; set it to one of: "
                         f"{', '.join(CPU_BF16_CHOICES)} (or unset it)")
    return choice


class ProfileName(str):
    """A profile name :func:`check_profile` has checked: where a profile enters (the runner's plan, a chapter's
    parameters cell, a command line) it is checked once and travels as this; the paper modules' profile builders
    (``synthetic_profile``, ``idea_profile``, ...) take it through :func:`resolved` without checking it again."""


def check_profile(profile, extra: tuple[str, ...] = ()) -> ProfileName:
    """``profile`` as a :class:`ProfileName` if it is one of :data:`PROFILES` (or of ``extra``, a chapter's
    :data:`LONG_PROFILES`); a one-line ValueError naming the choices otherwise."""
    if not isinstance(profile, str) or profile not in (*PROFILES, *extra):
        hint = f" here ({profile} is a profile of {LONG_PROFILES[profile]} only)" if profile in LONG_PROFILES else ""
        raise ValueError(f"unknown profile {profile!r}{hint}; choose one of: {', '.join((*PROFILES, *extra))}")
    return ProfileName(profile)


def resolved(profile, extra: tuple[str, ...] = ()) -> ProfileName:
    """``profile`` where it enters a profile builder: a :class:`ProfileName` of the builder's profiles as it is,
    anything else through :func:`check_profile` (a builder called directly, from a test or a shell, is an entry)."""
    if isinstance(profile, ProfileName) and profile in (*PROFILES, *extra):
        return profile
    return check_profile(profile, extra)


def check_parameters(extra_profiles: tuple[str, ...] = (), **params) -> None:
    """Validate a notebook's papermill parameters: ``profile`` (one of :data:`PROFILES` or ``extra_profiles``,
    the chapter's own :data:`LONG_PROFILES`), ``seed`` (an int >= 0), ``workers``, ``n_seeds`` and ``max_steps``
    (ints >= 1; None for the last two is the profile's own), each when given. Raises a one-line ``ValueError``
    naming the parameter, the bad value and what is expected."""
    for name, value in params.items():
        if name == "profile":
            check_profile(value, extra_profiles)
        elif name == "seed":
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"parameter seed must be a non-negative int, got {value!r} ({type(value).__name__}); "
                                 f"pass e.g. -p seed 111")
        elif name in ("workers", "n_seeds", "max_steps"):
            optional = name != "workers"  # None: the profile's own number of seeds or steps
            if optional and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"parameter {name} must be an int >= 1{' or None' if optional else ''}, got {value!r}")
        else:
            raise ValueError(f"unknown parameter {name!r}; notebooks take profile, seed, workers, n_seeds and "
                             f"max_steps")


#: Set by ``make lab``: the profile a chapter opened in JupyterLab runs at ("Run All" in seconds).
LAB_PROFILE_VARIABLE = "SEMLM_PROFILE"
#: Set by the book runner (:func:`semlm.book.runner.chapter_environment`) for its kernels only.
BUILD_VARIABLE = "SEMLM_BUILD_DIR"


def lab_profile(profile: str) -> str:
    """The profile a chapter runs at: ``$SEMLM_PROFILE`` in an interactive kernel (``make lab`` sets it to
    ``smoke``; one line says so), else ``profile``, the parameters cell's value. The book runner's kernels
    (``SEMLM_BUILD_DIR`` set) keep ``profile``, as does a papermill run from a shell that does not export
    ``SEMLM_PROFILE``."""
    wanted = os.environ.get(LAB_PROFILE_VARIABLE, "").strip()
    if not wanted or os.environ.get(BUILD_VARIABLE) or wanted == profile:
        return profile
    if wanted not in PROFILES:
        raise ValueError(f"{LAB_PROFILE_VARIABLE}={wanted!r} is not a profile; choose one of: "
                         f"{', '.join(PROFILES)} (or unset it)")
    print(f"lab: profile = {wanted!r} from ${LAB_PROFILE_VARIABLE} (the parameters cell says "
          f"{profile!r}; unset {LAB_PROFILE_VARIABLE} to use it)")
    return wanted
