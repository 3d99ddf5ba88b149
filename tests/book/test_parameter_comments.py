"""A chapter's parameters cell names its profiles' real seed counts (issue 51: chapter 9's said cpu 3, not 5)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from semlm.fusion.profiles import AUDIT_SEEDS, intent_profile
from semlm.idea.profiles import idea_profile, lora_profile, topic_drift_profile
from semlm.profiles import PROFILES

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"

#: each chapter with an ``n_seeds`` parameter: the seeds its profile trains when ``n_seeds`` is None
SEED_COUNTS = {
    "04_leakage_audit": lambda profile: AUDIT_SEEDS[profile],
    "06_idea_gating": lambda profile: idea_profile(profile).n_seeds,
    "08_lora_4bit_idea_gating": lambda profile: lora_profile(profile).n_seeds,
    "09_topic_drift": lambda profile: topic_drift_profile(profile).n_seeds,
    "10_intent_control": lambda profile: intent_profile(profile).n_seeds,
}


def parameter_line(chapter: Path, name: str) -> str | None:
    cell = chapter.read_text().split('# %% tags=["parameters"]', 1)[1].split("# %%", 1)[0]
    return next((line for line in cell.splitlines() if line.startswith(f"{name} =")), None)


def chapters_with_seeds() -> list[Path]:
    return [path for path in sorted(NOTEBOOKS.glob("[0-9]*.py"))
            if '# %% tags=["parameters"]' in path.read_text() and parameter_line(path, "n_seeds")]


def test_every_chapter_with_a_seed_parameter_is_checked():
    assert [path.stem for path in chapters_with_seeds()] == sorted(SEED_COUNTS)


@pytest.mark.parametrize("chapter", sorted(SEED_COUNTS))
def test_parameters_comment_names_the_profiles_seed_counts(chapter):
    line = parameter_line(NOTEBOOKS / f"{chapter}.py", "n_seeds")
    said = dict((name, int(n)) for name, n in re.findall(r"(\w+) (\d+)", line.split("#", 1)[1]))
    assert set(said) == set(PROFILES), f"{chapter}: name every profile's seeds in {line!r}"
    assert said == {profile: SEED_COUNTS[chapter](profile) for profile in PROFILES}, line
