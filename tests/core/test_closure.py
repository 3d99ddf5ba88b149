"""The runner's cache keys come from the code closure (semlm.core.closure), never from a hand-kept list."""

import json
import shutil
import subprocess
import sys
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
    synthetic = code_closure(type(SYNTHETIC), exclude=runs.EVALUATION_METHODS)
    assert "semlm.fusion.losses:label_smoothed_cross_entropy" in synthetic  # the loss its fit passes (Eq. 5)
    assert "semlm.core.precision:autocast" in code_closure(runs.train)
    assert "semlm.fusion.model:FusionLM" in synthetic
    assert not any(name.startswith("semlm.core.metrics:evaluate") for name in synthetic)
    idea = code_closure(type(IDEA), exclude=runs.EVALUATION_METHODS)
    # the idea GPT's key once left out the WikiText loader and IdeaData.blocks
    assert "semlm.idea.wikitext_experiment:IdeaData" in idea
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
    from semlm.profiles import synthetic_profile

    spec = spec_for(synthetic_profile("smoke"), "fusion")
    before = runs.run_key(SYNTHETIC, spec, "cpu", 1)
    versions = runs.package_versions()
    assert set(versions) >= {"torch", "transformers", "tokenizers"}
    monkeypatch.setattr(runs, "package_versions", lambda: {**versions, "torch": "0.0.0"})
    assert runs.run_key(SYNTHETIC, spec, "cpu", 1) != before
