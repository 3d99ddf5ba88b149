"""The idea-gated GPT is a transformers citizen: once ``semlm.idea.model`` is imported, the Auto
classes load a saved folder (no remote code) and ``generate()`` runs on what they return."""

import subprocess
import sys

import torch
from transformers import AutoConfig, AutoModelForCausalLM

from semlm.idea.model import IdeaGPTConfig, IdeaGPTForCausalLM


def test_auto_classes_load_a_saved_idea_gpt_and_generate_the_same_tokens(tmp_path):
    torch.manual_seed(0)
    config = IdeaGPTConfig(vocab_size=61, n_positions=32, n_embd=24, n_layer=2, n_head=2, dropout=0.0, alpha=0.7)
    model = IdeaGPTForCausalLM(config).eval()
    model.save_pretrained(tmp_path)
    assert isinstance(AutoConfig.from_pretrained(tmp_path), IdeaGPTConfig)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    assert type(loaded) is IdeaGPTForCausalLM and loaded.config.alpha == 0.7
    x = torch.randint(1, 61, (2, 6))
    a, b = model(x), loaded(x)
    assert torch.equal(a.logits, b.logits) and torch.equal(a.idea_logits, b.idea_logits)
    settings = dict(max_new_tokens=12, do_sample=False, pad_token_id=0, eos_token_id=None)
    assert torch.equal(model.generate(x, **settings), loaded.generate(x, **settings))


def test_importing_semlm_alone_stays_light():
    # The Auto registration waits for the first lookup (semlm._auto_registration): `import semlm` loads no transformers.
    code = "import sys, semlm; print('transformers' in sys.modules, 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]
