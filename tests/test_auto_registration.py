"""The book's models are transformers citizens from ``import semlm`` alone (issue 34): a fresh process that
imports only ``semlm`` and transformers loads a saved idea GPT, fusion or baseline model with the Auto
classes; a process that never imports semlm loads the same folders with ``trust_remote_code=True``
(the folder carries ``auto_map`` and the model's source); and ``import semlm`` still loads no torch."""

import json
import os
import subprocess
import sys

import pytest
import torch

from semlm import _auto_registration
from semlm.idea import profiles
from semlm.fusion.config import BackboneConfig
from semlm.fusion.model import lm_config, build_model
from semlm.idea import model as idea_model
from semlm.idea.model import IdeaGPTConfig, IdeaGPTForCausalLM

PROMPT = [[5, 9, 2, 7]]


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> dict:
    """One tiny saved model of each model type, with its greedy continuation of PROMPT (idea GPT) or its
    logits' sum on PROMPT (fusion and baseline, whose generate needs a featurizer)."""
    root = tmp_path_factory.mktemp("saved")
    torch.manual_seed(0)
    idea = IdeaGPTForCausalLM(IdeaGPTConfig(vocab_size=61, n_positions=32, n_embd=24, n_layer=2, n_head=2,
                                            dropout=0.0)).eval()
    idea.save_pretrained(root / "idea_gpt")
    expected = {"idea_gpt": idea.generate(torch.tensor(PROMPT), max_new_tokens=6, do_sample=False,
                                          eos_token_id=None).tolist()}
    for kind in ("fusion", "baseline"):
        model = build_model(lm_config(BackboneConfig(20, d_model=16, n_layers=1, n_heads=2, d_ff=32), kind=kind,
                                     n_features=4)).eval()
        model.save_pretrained(root / kind)
        features = torch.full((1, len(PROMPT[0]), 4), 0.5)
        expected[kind] = round(float(model(torch.tensor(PROMPT), features).logits.sum().detach()), 4)
    return {"root": root, "expected": expected}


def _run(code: str, saved: dict) -> dict:
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_MODULES_CACHE=str(saved["root"] / "hf_modules"),
               TQDM_DISABLE="1")
    out = subprocess.run([sys.executable, "-c", code, str(saved["root"])], capture_output=True, text=True,
                         env=env, cwd=saved["root"])
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


LOAD_ALL = """
import json, sys, torch
from transformers import AutoConfig, AutoModelForCausalLM
root, result = sys.argv[1], {}
for name in ("idea_gpt", "fusion", "baseline"):
    config = AutoConfig.from_pretrained(f"{root}/{name}"TRUST)
    model = AutoModelForCausalLM.from_pretrained(f"{root}/{name}"TRUST).eval()
    result[name + "_class"] = type(model).__module__ + "." + type(model).__name__
    if name == "idea_gpt":
        result[name] = model.generate(torch.tensor(PROMPT), max_new_tokens=6, do_sample=False,
                                      eos_token_id=None).tolist()
    else:
        features = torch.full((1, LENGTH, 4), 0.5)
        result[name] = round(float(model(torch.tensor(PROMPT), features).logits.sum().detach()), 4)
result["semlm_modules"] = sorted(m for m in sys.modules if m == "semlm" or m.startswith("semlm."))
print(json.dumps(result))
"""


def _load_all(first: str, saved: dict, trust: bool = False) -> dict:
    code = first + (LOAD_ALL.replace("TRUST", ", trust_remote_code=True" if trust else "")
                    .replace("PROMPT", repr(PROMPT)).replace("LENGTH", str(len(PROMPT[0]))))
    return _run(code, saved)


def _check(result: dict, saved: dict) -> None:
    for name, value in saved["expected"].items():
        assert result[name] == value, name


def test_import_semlm_alone_lets_the_auto_classes_load_and_generate_every_saved_model(saved):
    result = _load_all("import semlm\n", saved)
    _check(result, saved)
    assert result["idea_gpt_class"] == "semlm.idea.model.IdeaGPTForCausalLM"
    assert result["fusion_class"] == "semlm.fusion.model.FusionLM"
    assert result["baseline_class"] == "semlm.fusion.model.BaselineLM"


def test_import_semlm_after_transformers_auto_classes_still_registers(saved):
    result = _load_all("from transformers import AutoConfig, AutoModelForCausalLM\nimport semlm\n", saved)
    _check(result, saved)
    assert result["idea_gpt_class"] == "semlm.idea.model.IdeaGPTForCausalLM"


def test_trust_remote_code_loads_every_saved_model_in_a_process_that_never_imports_semlm(saved):
    for name in ("idea_gpt", "fusion", "baseline"):
        auto_map = json.loads((saved["root"] / name / "config.json").read_text())["auto_map"]
        assert auto_map["AutoModelForCausalLM"].startswith("model.")
        assert (saved["root"] / name / "model.py").exists()
    result = _load_all("", saved, trust=True)
    _check(result, saved)
    assert result["semlm_modules"] == []
    assert result["idea_gpt_class"].startswith("transformers_modules.")


def test_importing_semlm_loads_neither_torch_nor_transformers():
    code = "import sys, semlm; print('transformers' in sys.modules, 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]


def test_the_announced_model_types_are_those_the_classes_register():
    import importlib

    import semlm.models  # noqa: F401
    from transformers.models.auto import configuration_auto

    for model_type, path in _auto_registration.MODEL_TYPES.items():
        module, name = path.rsplit(".", 1)
        config_class = getattr(importlib.import_module(module), name)
        assert config_class.model_type == model_type
        assert configuration_auto.CONFIG_MAPPING[model_type] is config_class
    # transformers still has the table the lazy registration writes into
    assert _auto_registration.announce(configuration_auto)


def test_model_files_saved_as_remote_code_import_nothing_from_semlm():
    from transformers.dynamic_module_utils import get_imports, get_relative_import_files

    from semlm.fusion import model as fusion_model

    assert idea_model.DROPOUT_SCOPES == profiles.DROPOUT_SCOPES and idea_model.INITS == profiles.INITS
    for module in (idea_model, fusion_model):
        for path in [module.__file__, *get_relative_import_files(module.__file__)]:
            assert "semlm" not in get_imports(path), path
