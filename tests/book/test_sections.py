"""Results show themselves (issue 52, item 1): a chapter hands each result to ``chapter.show(section)``, which
displays its table and glues its typed numbers; no chapter holds a loop that calls ``glue``, and no record builder
takes positional arguments."""

from __future__ import annotations

import ast
import importlib
import re
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import pytest

from semlm.book.chapter import Chapter
from semlm.core.records import glue_items

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
CHAPTERS = sorted(NOTEBOOKS.glob("[0-9]*.py"))


def glue_calls_in_loops(source: str) -> list[int]:
    """Lines of calls to ``glue`` (a name or an attribute, ``chapter.glue`` too) inside a ``for`` or ``while``
    loop or a comprehension of ``source``."""
    found = []
    for loop in ast.walk(ast.parse(source)):
        if isinstance(loop, (ast.For, ast.AsyncFor, ast.While, ast.ListComp, ast.SetComp, ast.DictComp,
                             ast.GeneratorExp)):
            for node in ast.walk(loop):
                if isinstance(node, ast.Call):
                    func = node.func
                    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
                    if name == "glue":
                        found.append(node.lineno)
    return sorted(set(found))


def test_the_loop_check_finds_a_glue_loop():
    assert glue_calls_in_loops("for k, v in x.glue().items():\n    glue(k, v, display=False)\n") == [1, 2]
    assert glue_calls_in_loops("[chapter.glue(k=v) for v in x]\n") == [1]
    assert glue_calls_in_loops("chapter.show(x)\nglue('a', 1)\n") == []


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_no_chapter_glues_in_a_loop(path):
    lines = glue_calls_in_loops(path.read_text())
    assert not lines, f"{path.name} calls glue in a loop at line(s) {lines}: give the result a numbers() and " \
                      f"call chapter.show(result)"


HIDDEN = ("remove-cell", "remove-input", "hide-input")


def visible_glue_lines(source: str) -> list[str]:
    """Lines that call ``glue`` in a code cell whose input the page shows (no ``remove-cell``, ``remove-input`` or
    ``hide-input`` tag): bookkeeping the browser check of a built page also refuses."""
    parts = re.split(r"^(# %%.*)$", source, flags=re.M)
    return [line for head, body in zip(parts[1::2], parts[2::2])
            if "[markdown]" not in head and not any(tag in head for tag in HIDDEN)
            for line in body.splitlines() if "glue(" in line and not line.lstrip().startswith("#")]


def test_the_visible_glue_check_finds_a_shown_glue():
    assert visible_glue_lines('# %%\nx.table()\nchapter.glue(a=1)\n') == ["chapter.glue(a=1)"]
    assert visible_glue_lines('# %% tags=["remove-cell"]\nchapter.glue(a=1)\n# %%\nchapter.show(x)\n') == []


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_no_chapter_shows_its_glue_to_the_reader(path):
    lines = visible_glue_lines(path.read_text())
    assert not lines, f"{path.name} shows glue calls to the reader: {lines}; put them in a remove-cell cell"


def record_builders() -> dict[str, object]:
    """Every ``*_record`` function a chapter calls, resolved through the chapter's own imports."""
    builders = {}
    for path in CHAPTERS:
        tree = ast.parse(path.read_text())
        modules = {alias.asname or alias.name: node.module + "." + alias.name if isinstance(node, ast.ImportFrom)
                   else alias.name for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
                   for alias in node.names}
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                func = node.func
                if isinstance(func, ast.Attribute) and func.attr.endswith("_record") \
                        and isinstance(func.value, ast.Name) and func.value.id in modules:
                    module = importlib.import_module(modules[func.value.id])
                    builders[f"{module.__name__}.{func.attr}"] = getattr(module, func.attr)
                elif isinstance(func, ast.Name) and func.id.endswith("_record") and func.id in modules:
                    module, _, name = modules[func.id].rpartition(".")
                    builders[modules[func.id]] = getattr(importlib.import_module(module), name)
    return builders


def test_record_builders_are_found():
    assert len(record_builders()) >= 8


@pytest.mark.parametrize("name", sorted(record_builders()))
def test_no_record_builder_takes_positional_arguments(name):
    code = record_builders()[name].__code__
    assert code.co_argcount == 0, f"{name} takes {code.co_varnames[:code.co_argcount]} positionally: make its " \
                                  f"parameters keyword-only (def f(*, ...))"


@dataclass(frozen=True)
class _Numbers:
    ratio: float
    verdict: str


class _Section:
    def table(self):
        return "the table"

    def numbers(self):
        return _Numbers(ratio=1.5, verdict="pass")


@pytest.fixture
def glued(monkeypatch):
    """What ``chapter.show`` glues and displays, captured by stand-ins for myst_nb and IPython."""
    seen = {"glue": {}, "display": []}
    fake = types.ModuleType("myst_nb")
    fake.glue = lambda key, value, display=True: seen["glue"].__setitem__(key, (value, display))
    monkeypatch.setitem(sys.modules, "myst_nb", fake)
    import IPython.display

    monkeypatch.setattr(IPython.display, "display", seen["display"].append)
    return seen


def test_show_displays_the_table_and_glues_each_number_under_its_field_name(glued):
    chapter = Chapter("06_idea_gating", "smoke", 1)
    assert chapter.show(_Section()) is None
    assert glued["display"] == ["the table"]
    assert glued["glue"] == {"ratio": (1.5, False), "verdict": ("pass", False)}


def test_show_with_a_prefix_and_no_table(glued):
    Chapter("06_idea_gating", "smoke", 1).show(_Section(), prefix="decision_", table=False)
    assert glued["display"] == []
    assert set(glued["glue"]) == {"decision_ratio", "decision_verdict"}


def test_chapter_glue_glues_keywords(glued):
    Chapter("06_idea_gating", "smoke", 1).glue(vocab=300, dataset="wikitext-2")
    assert glued["glue"] == {"vocab": (300, False), "dataset": ("wikitext-2", False)}


def test_chapter_glue_glues_a_numbers_dataclass_and_keywords(glued):
    Chapter("06_idea_gating", "smoke", 1).glue(_Numbers(ratio=2.0, verdict="x"), vocab=3)
    assert glued["glue"] == {"ratio": (2.0, False), "verdict": ("x", False), "vocab": (3, False)}


def test_glue_items_reads_the_dataclass_fields():
    assert glue_items(_Numbers(ratio=2.0, verdict="x"), "p_") == {"p_ratio": 2.0, "p_verdict": "x"}
