"""Paper B's run keys hold the recipe, all of it and nothing else (issue 51, item 3).

Each test edits a copy of the library's source, as a maintainer would, and asks a fresh Python process for the
run keys of the smoke profile's chapter-6 and chapter-9 runs: a generation-only or execution-only edit keeps
them, an edit to the recipe changes them (so the comparison can fail).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import semlm

LIBRARY = Path(semlm.__file__).resolve().parent

KEYS = r"""
import json, sys
import semlm
assert semlm.__file__.startswith(sys.argv[1]), semlm.__file__  # the edited copy, not the installed library
from semlm.core.runs import run_key
from semlm.idea.profiles import idea_profile, topic_drift_profile
from semlm.idea.topic_experiment import TOPIC_DRIFT, topic_drift_runs
from semlm.idea.wikitext_experiment import IDEA, idea_run
idea = idea_run(idea_profile("smoke"), "gated", True)
topic = topic_drift_runs(topic_drift_profile("smoke"), [111])[0]
print(json.dumps({"idea": run_key(IDEA, idea, "cpu", 1), "topic": run_key(TOPIC_DRIFT, topic, "cpu", 1)}))
"""


def keys_after(tmp_path: Path, edits: dict[str, list[tuple[str, str]]]) -> dict[str, str]:
    """The smoke runs' keys computed by a library whose files ``edits`` changed ({file: [(old, new), ...]})."""
    root = tmp_path / f"lib{len(list(tmp_path.iterdir()))}"
    shutil.copytree(LIBRARY, root / "semlm", ignore=shutil.ignore_patterns("__pycache__"))
    for name, replacements in edits.items():
        path = root / "semlm" / name
        text = path.read_text()
        for old, new in replacements:
            assert text.count(old) == 1, f"{old!r} must occur once in {name}"
            text = text.replace(old, new)
        path.write_text(text)
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run([sys.executable, "-c", KEYS, str(root)], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def unchanged(tmp_path_factory) -> dict[str, str]:
    return keys_after(tmp_path_factory.mktemp("keys"), {})


def test_generation_setting_does_not_retrain(tmp_path, unchanged):
    generation = {"idea/profiles.py": [
        ("max_new_tokens: int = 100", "max_new_tokens: int = 120"),                        # a class default
        ("samples_per_prompt=2, max_new_tokens=12, seeds=(0,), authors_samples=2",         # the smoke profile's
         "samples_per_prompt=3, max_new_tokens=16, seeds=(0,), authors_samples=2"),
        ("loop_new_tokens: int = 150", "loop_new_tokens: int = 151")]}
    assert keys_after(tmp_path, generation) == unchanged
    recipe = {"idea/profiles.py": [("train_tokens=12_000, eval_tokens=3_000",
                                    "train_tokens=12_001, eval_tokens=3_000")]}
    changed = keys_after(tmp_path, recipe)
    assert changed["idea"] != unchanged["idea"]


def test_execution_setting_does_not_retrain(tmp_path, unchanged):
    execution = {
        "core/train_config.py": [("compile_on_cuda: bool | str = field(default=False",
                                  "compile_on_cuda: bool | str = field(default=True")],
        "idea/profiles.py": [("loop_new_tokens=16, max_workers=1,", "loop_new_tokens=16, max_workers=2,"),
                             ("    max_workers: int = 2\n", "    max_workers: int = 3\n")]}
    assert keys_after(tmp_path, execution) == unchanged
    recipe = {"core/train_config.py": [("label_smoothing: float = 0.02", "label_smoothing: float = 0.03")]}
    changed = keys_after(tmp_path, recipe)
    assert changed["idea"] != unchanged["idea"] and changed["topic"] != unchanged["topic"]
