"""A profile resolved once (issue 52, item 5): a profile name is checked where it enters (the runner's plan, a
chapter's parameters cell, a command line) and travels checked; the paper modules' profile builders take it as it
is, and below them only typed configurations travel: no experiment turns a name into a configuration again."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

import semlm
import semlm.profiles as profiles
from semlm.profiles import ProfileName, check_profile, resolved

LIBRARY = Path(semlm.__file__).parent
#: the functions that turn a checked profile name into a paper's typed configuration
BUILDERS = {"synthetic_profile", "sst2_profile", "intent_profile", "idea_profile", "topic_drift_profile",
            "lora_profile"}
#: where a paper module may call a builder: the builders' own modules and the papers' command lines (entries)
ENTRIES = {"fusion/profiles.py", "idea/profiles.py", "fusion/__main__.py", "idea/distributed.py"}


@pytest.fixture
def counted(monkeypatch):
    """Counts every call of :func:`check_profile`, through whichever module imported it."""
    import semlm.book.chapter, semlm.book.plan, semlm.book.runner, semlm.fusion.audit  # noqa: F401, E401 (patched)

    calls = []
    original = profiles.check_profile

    def counting(*args, **kwargs):
        calls.append(args[0] if args else kwargs.get("profile"))
        return original(*args, **kwargs)

    for module in [m for name, m in sys.modules.items() if name.startswith("semlm")]:
        if getattr(module, "check_profile", None) is original:
            monkeypatch.setattr(module, "check_profile", counting)
    return calls


def test_the_whole_plan_checks_its_profile_once(counted):
    from semlm.book.plan import book_runs

    planned = book_runs("smoke")
    assert sum(len(entry.specs) for entry in planned) > 10
    assert counted == ["smoke"]


def test_the_runner_checks_once_and_the_plan_takes_its_checked_name(counted):
    from semlm.book.plan import book_runs
    from semlm.book.runner import check_build_settings

    profile = check_build_settings("smoke")
    book_runs(profile)
    assert isinstance(profile, ProfileName) and counted == ["smoke"]


def test_a_chapter_checks_its_profile_when_it_opens_and_its_builder_takes_it(counted):
    from semlm import book
    from semlm.idea.profiles import idea_profile

    chapter = book.open("06_idea_gating", profile="smoke", seed=111)
    idea_profile(chapter.profile, 111)
    assert counted == ["smoke"]


def test_a_builder_called_with_a_plain_name_is_an_entry_and_checks_it(counted):
    from semlm.fusion.profiles import synthetic_profile

    assert synthetic_profile("smoke").name == "smoke"
    assert counted == ["smoke"]
    with pytest.raises(ValueError, match="unknown profile 'tiny'"):
        synthetic_profile("tiny")


def test_a_long_profile_checked_for_its_chapter_is_refused_elsewhere():
    from semlm.fusion.profiles import synthetic_profile

    long = check_profile("cpu-long", ("cpu-long",))
    assert resolved(long, ("cpu-long",)) is long
    with pytest.raises(ValueError, match="profile of 06_idea_gating only"):
        synthetic_profile(long)


def builder_calls(path: Path) -> list[tuple[str, int]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            if name in BUILDERS:
                found.append((name, node.lineno))
    return found


def test_no_experiment_turns_a_profile_name_into_a_configuration():
    called = {str(path.relative_to(LIBRARY)): calls for paper in ("fusion", "idea")
              for path in sorted((LIBRARY / paper).rglob("*.py"))
              if str(path.relative_to(LIBRARY)) not in ENTRIES and (calls := builder_calls(path))}
    assert not called, f"paper modules build a profile from its name (take the typed configuration): {called}"


def test_the_builder_check_finds_a_call(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f(profile):\n    return idea_profile(profile).size\n")
    assert builder_calls(module) == [("idea_profile", 2)]
