"""Run keys follow what a run reads beyond the pinned data: Hub-cached files and modules loaded by name (issue 51)."""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass

import pytest

from semlm.core import runs
from semlm.core.closure import code_closure


@dataclass(frozen=True)
class Recipe:
    steps: int = 1


class HubExperiment(runs.Experiment):
    name = "hub-probe"

    def hub_sources(self, spec):
        return ("models/org/tiny", "datasets/org/corpus")


def snapshot_file(cache, repository: str, name: str, text: str) -> None:
    path = cache / repository / "snapshots" / "abc123" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_hub_data_is_in_the_key(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    spec, experiment = runs.RunSpec("probe", 0, Recipe()), HubExperiment()
    absent = runs.run_key(experiment, spec, "cpu", 1)
    snapshot_file(tmp_path, "models--org--tiny", "tokenizer.json", '{"vocab": 1}')
    snapshot_file(tmp_path, "datasets--org--corpus", "train.txt", "one line\n")
    cached = runs.run_key(experiment, spec, "cpu", 1)
    assert cached != absent
    assert runs.run_key(experiment, spec, "cpu", 1) == cached  # same files, same key
    snapshot_file(tmp_path, "datasets--org--corpus", "train.txt", "another line\n")  # the Hub's file changed
    assert runs.run_key(experiment, spec, "cpu", 1) not in (cached, absent)
    plain = runs.Experiment()
    assert runs.hub_fingerprint(plain.hub_sources(spec)) == ""  # an experiment that reads no Hub file


def test_package_versions_and_python_are_in_the_key(monkeypatch):
    spec, experiment = runs.RunSpec("probe", 0, Recipe()), HubExperiment()
    experiment.packages = ("torch", "peft")
    before = runs.run_key(experiment, spec, "cpu", 1)
    monkeypatch.setattr(runs, "package_versions", lambda names: {name: "0.0.0" for name in names})
    assert runs.run_key(experiment, spec, "cpu", 1) != before
    monkeypatch.undo()
    monkeypatch.setattr(runs, "python_minor", lambda: "2.7")
    assert runs.run_key(experiment, spec, "cpu", 1) != before


def module(name: str, source: str) -> types.ModuleType:
    """A library module ``name`` (``semlm.*``) made from ``source``, registered so ``import_module`` finds it."""
    made = types.ModuleType(name)
    exec(compile(source, f"<{name}>", "exec"), made.__dict__)  # noqa: S102 - the test's own code
    sys.modules[name] = made
    return made


@pytest.fixture
def loaded_by_name():
    names = ("semlm._probe_target", "semlm._probe_caller")
    yield names
    for name in names:
        sys.modules.pop(name, None)


def test_importlib_module_is_in_the_key(loaded_by_name):
    target, caller = loaded_by_name
    module(target, "def helper():\n    return 1\n")
    calling = module(caller, "import importlib\n\ndef train():\n"
                             f"    return importlib.import_module({target!r}).helper()\n")
    first = code_closure(calling.train)
    assert f"{target}:helper" in first
    module(target, "def helper():\n    return 2\n")  # the module loaded by name changed
    assert code_closure(calling.train) != first
