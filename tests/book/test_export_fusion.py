"""Paper A's synthetic models exported (issue 49): a word tokenizer and, for fusion, the causal feature bank inside the
model, so that transformers alone, in a process that never imports semlm, tokenizes, computes the features and
generates exactly what the book's own decoder does; the models that cannot work alone are refused with the reason."""

import json
import os
import subprocess
import sys

import pytest
import torch

from semlm.book.export import ExportError, export_run, find_run
from semlm.book.plan import book_runs
from semlm.core import runs
from semlm.fusion.synthetic_experiment import SYNTHETIC

PROMPT = "Alice cooks the meal ,"
COLUMNS, VALUES = [10, 11, 12], [0.0, 0.0, 1.0]  # pos_low, pos_med, pos_high: a strong positive request


def _spec(name: str):
    return next(s for e in book_runs("smoke") if e.experiment is SYNTHETIC for s in e.specs
                if s.name == name and s.config.setting == "causal")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    folder = tmp_path_factory.mktemp("runs")
    return {name: (_spec(name), runs.run_one(SYNTHETIC, _spec(name), folder)) for name in ("fusion", "baseline")}


def _book_generation(spec, record, controls: bool) -> list[int]:
    """Greedy continuation by the book's own model and featurizer (semlm loaded)."""
    data = SYNTHETIC.data(spec)
    model = record.load()
    ids = torch.tensor([data.vocab.encode(PROMPT.split())[:-1]])
    extra = {"featurize": data.featurizer} if model.uses_features else {}
    if controls:
        extra["feature_controls"] = (torch.tensor(COLUMNS), torch.tensor(VALUES))
    with torch.no_grad():
        return model.generate(ids, max_new_tokens=8, do_sample=False, **extra)[0].tolist()


STANDALONE = """
import json, sys, torch
from transformers import AutoModelForCausalLM, AutoTokenizer
model = AutoModelForCausalLM.from_pretrained(sys.argv[1], trust_remote_code=True)
tokenizer = AutoTokenizer.from_pretrained(sys.argv[1])
ids = tokenizer(sys.argv[2], return_tensors="pt").input_ids
out = {"plain": model.generate(ids, max_new_tokens=8, do_sample=False)[0].tolist()}
if model.config.kind == "fusion":
    controls = (torch.tensor(json.loads(sys.argv[3])), torch.tensor(json.loads(sys.argv[4])))
    out["controls"] = model.generate(ids, max_new_tokens=8, do_sample=False, feature_controls=controls)[0].tolist()
    out["logits"] = model(ids).logits[0, -1].tolist()
out["text"] = tokenizer.decode(out["plain"], skip_special_tokens=True)
out["semlm"] = sorted(m for m in sys.modules if m == "semlm" or m.startswith("semlm."))
print(json.dumps(out))
"""


def _standalone(folder) -> dict:
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", STANDALONE, str(folder), PROMPT, json.dumps(COLUMNS),
                           json.dumps(VALUES)], capture_output=True, text=True, cwd=folder, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_fusion_export_generates_without_semlm(trained, tmp_path):
    spec, record = trained["fusion"]
    out = export_run(record.run_dir, tmp_path / "fusion")
    files = {p.name for p in out.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "featurize.py", "fuzzy.py", "README.md"} <= files
    assert json.loads((out / "config.json").read_text())["featurizer"] == "synthetic"
    alone = _standalone(out)
    assert alone["semlm"] == []  # the process never imported semlm: its features came from the exported bank
    assert alone["plain"] == _book_generation(spec, record, controls=False)
    assert alone["controls"] == _book_generation(spec, record, controls=True)
    data = SYNTHETIC.data(spec)
    ids = torch.tensor([data.vocab.encode(PROMPT.split())[:-1]])
    with torch.no_grad():
        expected = record.load()(ids, features=data.featurizer(ids)).logits[0, -1].tolist()
    assert alone["logits"] == pytest.approx(expected, abs=1e-5)
    assert alone["text"].startswith("Alice cooks the meal,")
    card = (out / "README.md").read_text()
    assert "pos_high" in card and "feature_controls" in card and "reads tokens up to t only" in card


def test_baseline_export_carries_its_tokenizer(trained, tmp_path):
    spec, record = trained["baseline"]
    alone = _standalone(export_run(record.run_dir, tmp_path / "baseline"))
    assert alone["semlm"] == [] and alone["plain"] == _book_generation(spec, record, controls=False)


def test_the_exported_bank_is_the_books_causal_bank(trained):
    """One featurizer, not two: the bank inside the model gives the book's features, and position t never reads
    a later token."""
    spec, _ = trained["fusion"]
    data = SYNTHETIC.data(spec)
    model = SYNTHETIC.build(spec, data).attach_featurizer(data.featurizer.tables, data.vocab.pad_id)
    ids = data.val.input_ids[:8]
    assert torch.equal(model.featurizer(ids), data.featurizer(ids))
    changed = ids.clone()
    changed[:, 6:] = data.vocab.id("terrible")
    assert torch.equal(model.featurizer(changed)[:, :6], model.featurizer(ids)[:, :6])


@pytest.mark.parametrize("experiment, config, reason", [
    ("semlm.fusion.sst2_experiment:SST2", {}, "spaCy's tagger and VADER's lexicon"),
    ("semlm.fusion.intent_experiment:EXPERIMENT", {}, "sentence-level request"),
    ("semlm.fusion.synthetic_experiment:SYNTHETIC", {"setting": "published"}, "read the future"),
])
def test_a_model_that_cannot_work_alone_is_refused_with_its_reason(tmp_path, experiment, config, reason):
    folder = tmp_path / "fusion-seed111-0123456789abcdef"
    (folder / "train" / "final").mkdir(parents=True)
    (folder / "train" / "final" / "model.safetensors").write_bytes(b"")
    (folder / "record.json").write_text(json.dumps({"experiment": experiment, "name": "fusion", "seed": 111,
                                                    "group": "", "key": "0123456789abcdef", "config": config}))
    with pytest.raises(ExportError, match=reason):
        find_run(folder)
