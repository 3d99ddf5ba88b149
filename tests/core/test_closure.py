"""The runner's cache keys come from the code closure (semlm.core.closure), never from a hand-kept list."""

import importlib.util
import json
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

import semlm
from semlm.core import runs
from semlm.core.closure import code_closure
from semlm.fusion.synthetic_experiment import SYNTHETIC
from semlm.idea.wikitext_experiment import IDEA

LIBRARY = Path(semlm.__file__).parent

KEYS = """
import json
from semlm.core import runs
from semlm.fusion.synthetic_experiment import SYNTHETIC
print(json.dumps({"train": runs.training_key(SYNTHETIC), "evaluate": runs.evaluation_key(SYNTHETIC)}))
"""


def keys_after_edit(tmp_path: Path, module: str | None, old: str = "", new: str = "") -> dict:
    """The synthetic experiment's keys, computed in a fresh process over a copy of the library in
    which ``module`` (a path below ``semlm/``) has ``old`` replaced by ``new``."""
    root = tmp_path / (module.replace("/", "_") if module else "unchanged")
    shutil.copytree(LIBRARY, root / "semlm", ignore=shutil.ignore_patterns("__pycache__"))
    if module is not None:
        path = root / "semlm" / module
        text = path.read_text()
        assert old in text, f"{old!r} is not in {module}: update this test"
        path.write_text(text.replace(old, new, 1))
    out = subprocess.run([sys.executable, "-c", KEYS], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def unchanged(tmp_path_factory):
    return keys_after_edit(tmp_path_factory.mktemp("keys"), None)


def test_cache_key_closure_changes_when_a_module_the_experiment_imports_is_edited(unchanged, tmp_path):
    # the trainer's default loss lives in semlm.fusion.losses, which no experiment lists anywhere
    edited = keys_after_edit(tmp_path, "fusion/losses.py", "    per_token = F.cross_entropy(",
                              "    per_token = 1.0 * F.cross_entropy(")
    assert edited["train"] != unchanged["train"]
    # so does the generator of the synthetic corpus, two imports away
    edited = keys_after_edit(tmp_path, "data/synthetic.py", '"great", ', '"great", "fine", ')
    assert edited["train"] != unchanged["train"]


def test_cache_key_closure_leaves_training_alone_when_only_evaluation_or_presentation_code_changes(unchanged, tmp_path):
    edited = keys_after_edit(tmp_path, "core/metrics.py", '"n_tokens": int(scores.targets.numel()),',
                             '"n_tokens": int(scores.targets.numel()) + 0,')
    assert edited["train"] == unchanged["train"]  # the cached model is kept ...
    assert edited["evaluate"] != unchanged["evaluate"]  # ... and re-evaluated
    edited = keys_after_edit(tmp_path, "plots.py", "def ", "def _unused(): pass\n\n\ndef ")
    assert edited == unchanged


def test_the_training_closure_reaches_what_a_hand_list_missed():
    synthetic = code_closure(type(SYNTHETIC), exclude=runs.evaluation_methods())
    assert "semlm.fusion.losses:label_smoothed_cross_entropy" in synthetic  # the loss its fit passes (Eq. 5)
    assert "semlm.core.precision:autocast" in code_closure(runs.train)
    assert "semlm.fusion.model:FusionLM" in synthetic
    assert not any(name.startswith("semlm.core.metrics:evaluate") for name in synthetic)
    idea = code_closure(type(IDEA), exclude=runs.evaluation_methods())
    # the idea GPT's key once left out the WikiText loader and IdeaData.blocks
    assert "semlm.idea.data:IdeaData" in idea
    assert any(name.startswith("semlm.data.wikitext:") for name in idea)
    assert "semlm.idea.model:IdeaGPTForCausalLM" in idea


def test_the_cache_key_is_the_same_in_another_process(unchanged):
    assert unchanged["train"] == runs.training_key(SYNTHETIC)
    assert unchanged["evaluate"] == runs.evaluation_key(SYNTHETIC)


def test_cache_key_ignores_docstrings(unchanged, tmp_path):
    """Prose in the training code (a docstring, a comment) retrains nothing; a changed statement does."""
    edited = keys_after_edit(tmp_path, "fusion/losses.py", "    per_token = F.cross_entropy(",
                             "    # a comment a reader added\n    per_token = F.cross_entropy(")
    assert edited == unchanged
    edited = keys_after_edit(tmp_path, "core/train.py", '"""Stable hash of JSON-able configs',
                             '"""A reworded docstring. Stable hash of JSON-able configs')
    assert edited == unchanged
    # the same function is in the training closure: a changed statement there does retrain
    edited = keys_after_edit(tmp_path / "code", "core/train.py", "    h = hashlib.sha256()\n",
                             "    h = hashlib.sha256(b'')\n")
    assert edited["train"] != unchanged["train"]


def test_cache_key_sees_package_versions(monkeypatch):
    from semlm.fusion.synthetic_experiment import spec_for
    from semlm.fusion.profiles import synthetic_profile

    spec = spec_for(synthetic_profile("smoke"), "fusion")
    before = runs.run_key(SYNTHETIC, spec, "cpu", 1)
    versions = runs.package_versions()
    assert set(versions) >= {"torch", "transformers", "tokenizers"}
    monkeypatch.setattr(runs, "package_versions", lambda names: {**versions, "torch": "0.0.0"})
    assert runs.run_key(SYNTHETIC, spec, "cpu", 1) != before


@pytest.fixture
def library_module(tmp_path, monkeypatch):
    """``load(name, source, version)``: ``source`` as the library module ``semlm.<name>`` (a file under
    ``tmp_path/<version>``, so an edited module is a new file to ``inspect``), in ``sys.modules`` for the test."""
    def load(name: str, source: str, version: str = "v1"):
        path = tmp_path / version / f"{name}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
        spec = importlib.util.spec_from_file_location(f"semlm.{name}", path)
        module = importlib.util.module_from_spec(spec)
        monkeypatch.setitem(sys.modules, spec.name, module)
        spec.loader.exec_module(module)
        return module
    return load


CALLER = """
def train_step(x):
    from semlm.probe_helpers import helper

    return helper(x)


def other_step(x):
    import semlm.probe_helpers as helpers

    return helpers.helper(x)
"""


def test_cache_key_follows_imports_in_function_bodies(library_module):
    library_module("probe_helpers", "def helper(x):\n    return x + 1\n")
    caller = library_module("probe_caller", CALLER)
    before = [code_closure(caller.train_step), code_closure(caller.other_step)]
    assert "semlm.probe_helpers:helper" in code_closure(caller.train_step)
    library_module("probe_helpers", "def helper(x):\n    return x + 2\n", "v2")
    after = [code_closure(caller.train_step), code_closure(caller.other_step)]
    assert after[0] != before[0] and after[1] != before[1]
    # in the library: SST-2's feature code imports the tree reader inside a function
    from semlm.fusion.sst2_experiment import SST2
    assert "semlm.data.sst2:tree_leaves" in runs.training_closure(SST2)


REGISTRY = """
_LOSSES = {}


def register(name):
    def add(fn):
        _LOSSES[name] = fn
        return fn
    return add


@register("power")
def power(x):
    return x * x


def loss(name, x):
    return _LOSSES[name](x)
"""


def test_cache_key_sees_functions_a_decorator_registers(library_module):
    # the library has no such registry today (its decorators wrap claims' judges, and transformers' Auto
    # classes are filled by register() calls no experiment's training consults); this keeps it so
    before = code_closure(library_module("probe_registry", REGISTRY).loss)
    edited = library_module("probe_registry", REGISTRY.replace("x * x", "x * x * x"), "v2")
    assert "semlm.probe_registry:power" in code_closure(edited.loss)
    assert code_closure(edited.loss) != before
    renamed = library_module("probe_registry", REGISTRY.replace('"power"', '"square"'), "v3")
    assert code_closure(renamed.loss) != before  # the name a function is filed under is code too


EXPERIMENT = """
from semlm.core import runs


class Scorer:
    def evaluate(self, x):
        return x + 1


class ProbeExperiment(runs.Experiment):
    def fit(self, spec, data):
        return Scorer().evaluate(data)

    def evaluate(self, spec, data, model, result):
        return {"score": 1}


PROBE = ProbeExperiment()
"""


def test_evaluate_is_left_out_of_the_training_key_only_on_experiment_classes(library_module):
    first = library_module("probe_experiment", EXPERIMENT).PROBE
    keys = runs.training_key(first), runs.evaluation_key(first)
    scorer = library_module("probe_experiment", EXPERIMENT.replace("x + 1", "x + 2"), "v2").PROBE
    assert runs.training_key(scorer) != keys[0]  # Scorer.evaluate is training code
    metrics = library_module("probe_experiment", EXPERIMENT.replace('"score": 1', '"score": 2'), "v3").PROBE
    assert runs.training_key(metrics) == keys[0]  # the experiment's evaluate only re-evaluates
    assert runs.evaluation_key(metrics) != keys[1]


FILE_READING = """
from semlm.data.paths import dataset_file
from semlm.fusion.synthetic_experiment import SyntheticExperiment


class FileReadingExperiment(SyntheticExperiment):
    name = "file_reading"

    def prepare(self, spec):
        dataset_file("sst2", "train.tsv").read_text()
        return super().prepare(spec)


EXPERIMENT = FileReadingExperiment()
"""


def test_cache_key_sees_data(library_module, tmp_path, monkeypatch):
    from semlm.fusion.synthetic_experiment import spec_for
    from semlm.fusion.profiles import synthetic_profile

    data = tmp_path / "data" / "sst2" / "train.tsv"
    data.parent.mkdir(parents=True)
    data.write_text("a fine film\t1\n")
    monkeypatch.setenv("SEMLM_DATA_DIR", str(data.parents[1]))
    experiment = library_module("probe_data", FILE_READING).EXPERIMENT
    smoke = synthetic_profile("smoke", seed=5)
    spec = spec_for(replace(smoke, train=replace(smoke.train, epochs=1)), "baseline")
    first = runs.run_one(experiment, spec, tmp_path / "runs")
    assert first.status == "trained" and first.data_fingerprint
    assert runs.run_one(experiment, spec, tmp_path / "runs").status == "loaded"  # the same data: served
    assert runs.data_fingerprint(SYNTHETIC) == ""  # made by library code, which its closure holds
    key, synthetic_key = runs.run_key(experiment, spec, "cpu", 1), runs.run_key(SYNTHETIC, spec, "cpu", 1)
    data.write_text("a dull, overlong film\t0\n")
    assert runs.run_key(experiment, spec, "cpu", 1) != key
    assert runs.run_key(SYNTHETIC, spec, "cpu", 1) == synthetic_key
    again = runs.run_one(experiment, spec, tmp_path / "runs")  # the finished run is not served: it retrains
    assert again.status == "trained" and again.run_dir != first.run_dir
    assert again.data_fingerprint != first.data_fingerprint
    # a finished run whose record names other data than the folder holds now (copied by hand) is refused
    record = Path(again.run_dir) / "record.json"
    record.write_text(record.read_text().replace(again.data_fingerprint, first.data_fingerprint))
    with pytest.raises(ValueError, match="other data .*--fresh"):
        runs.run_one(experiment, spec, tmp_path / "runs")
