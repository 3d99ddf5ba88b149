"""``python -m semlm.book export``: a finished run becomes a folder transformers loads without semlm, and the
README's snippet runs as written against such a folder."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from semlm.book.export import ExportError, export_run, find_run, resolve_run
from semlm.book.plan import book_runs
from semlm.book.runner import main as runner_main
from semlm.core import runs
from semlm.data.paths import data_dir
from semlm.idea.wikitext_experiment import IDEA

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.needs_data("06_idea_gating")


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    spec = next(s for e in book_runs("smoke") if e.experiment is IDEA for s in e.specs
                if s.name.startswith("gated") and s.seed == 111)
    record = runs.run_one(IDEA, spec, tmp_path_factory.mktemp("runs"))
    return spec, Path(record.run_dir)


def _clean_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return {**env, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def test_export_writes_a_folder_transformers_loads_without_semlm(finished, tmp_path):
    spec, folder = finished
    out = export_run(folder, tmp_path / "gated")
    assert {"config.json", "model.safetensors", "tokenizer.json", "README.md"} <= {p.name for p in out.iterdir()}
    card = (out / "README.md").read_text()
    assert "wikitext-2" in card and "`smoke`" in card and "seed 111" in card and "val_ppl" in card
    ids = torch.tensor([[5, 17, 42, 8]])
    original = runs.load_model(IDEA, spec, folder, "cpu")
    with torch.no_grad():
        expected = original(ids).logits[0, -1].tolist()
    script = ("import sys, torch\nfrom transformers import AutoModelForCausalLM\n"
              f"m = AutoModelForCausalLM.from_pretrained({str(out)!r}, trust_remote_code=True)\n"
              "print(m(torch.tensor([[5, 17, 42, 8]])).logits[0, -1].tolist())\nprint('semlm' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path,
                          env=_clean_env(), timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    logits, imported = done.stdout.strip().splitlines()[-2:]
    assert eval(logits) == pytest.approx(expected, abs=1e-5) and imported == "False"


def test_export_refuses_what_it_cannot_do_and_writes_nothing(finished, tmp_path):
    _, folder = finished
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "keep.txt").write_text("mine")
    with pytest.raises(ExportError, match="not an empty folder"):
        export_run(folder, tmp_path / "busy")
    assert [p.name for p in (tmp_path / "busy").iterdir()] == ["keep.txt"]
    with pytest.raises(ExportError, match="not a finished run"):
        find_run(tmp_path)
    done = subprocess.run([sys.executable, "-m", "semlm.book", "export", str(tmp_path), str(tmp_path / "x")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and done.stderr.startswith("error: ") and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()


def test_readme_transformers_snippet(finished, tmp_path, monkeypatch):
    """The README's export command and Python block, run as written (the run folder's glob and all)."""
    _, folder = finished
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Use a trained model from transformers", 1)[1].split("\n## ", 1)[0]
    command = re.search(r"```bash\n(.+?)\n```", section, re.S).group(1)
    code = re.search(r"```python\n(.+?)```", section, re.S).group(1)
    assert "semlm.book export" in command and command.split()[-1] == "exported/gated"
    # the command as written, in a folder laid out as `make book` leaves it: the run beside its .lock file
    run = command.split()[-2]
    assert run.startswith("book/_build/runs/cpu/") and "*" not in run
    laid_out = tmp_path / run
    laid_out.parent.mkdir(parents=True)
    shutil.copytree(folder, laid_out.parent / f"{laid_out.name}-{folder.name.rsplit('-', 1)[-1]}")
    (laid_out.parent / f"{laid_out.name}-{folder.name.rsplit('-', 1)[-1]}.lock").write_text("")
    argv = command.split()[command.split().index("export"):]
    # the run's key hashes the data files: a relative $SEMLM_DATA_DIR (as .ci/run sets) must keep naming them
    monkeypatch.setenv("SEMLM_DATA_DIR", str(data_dir()))
    monkeypatch.chdir(tmp_path)
    assert runner_main(argv) == 0 and (tmp_path / "exported" / "gated" / "config.json").is_file()
    done = subprocess.run([sys.executable, "-c", code + "\nimport sys\nprint('semlm' in sys.modules)\n"],
                          capture_output=True, text=True, cwd=tmp_path, env=_clean_env(), timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "False"
    assert done.stdout.strip().splitlines()[0].startswith("The band released its second album")


def test_a_run_is_named_up_to_its_key_and_an_ambiguous_or_missing_name_is_refused(tmp_path):
    runs_dir = tmp_path / "runs"
    (runs_dir / "gated-mean-seed111-aaaa").mkdir(parents=True)
    (runs_dir / "gated-mean-seed111-aaaa" / "record.json").write_text("{}")
    (runs_dir / "gated-mean-seed111-aaaa.lock").write_text("")
    assert resolve_run(runs_dir / "gated-mean-seed111") == runs_dir / "gated-mean-seed111-aaaa"
    with pytest.raises(ExportError, match="names no run: .* holds the runs gated-mean-seed111-aaaa"):
        resolve_run(runs_dir / "plain-seed111")
    (runs_dir / "gated-mean-seed111-bbbb").mkdir()
    with pytest.raises(ExportError, match="names 2 runs"):
        resolve_run(runs_dir / "gated-mean-seed111")


def test_a_lora_run_is_refused_with_its_reason(tmp_path):
    import json

    folder = tmp_path / "lora-seed111-0123456789abcdef"
    (folder / "train" / "final").mkdir(parents=True)
    (folder / "train" / "final" / "model.safetensors").write_bytes(b"")
    (folder / "record.json").write_text(json.dumps({"experiment": "semlm.idea.lora_experiment:LORA", "name": "gated",
                                                    "seed": 111, "group": "nf4", "key": "0123456789abcdef"}))
    with pytest.raises(ExportError, match="chapter-8 LoRA run: its weights are adapters"):
        find_run(folder)


def test_a_path_that_names_no_run_is_one_line_before_the_heavy_imports(tmp_path):
    (tmp_path / "not-a-run").mkdir()
    (tmp_path / "data").mkdir()
    code = ("import sys\nfrom semlm.book.export import ExportError, resolve_run\n"
            "for path in sys.argv[1:]:\n    try:\n        resolve_run(path)\n    except ExportError as e:\n"
            "        print(e)\nprint('torch' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "missing"), str(tmp_path / "not-a-run")],
                          capture_output=True, text=True, timeout=60)
    missing, folder, torch_loaded = done.stdout.strip().splitlines()
    assert "names no run" in missing and "holds no run" in missing and "data" not in missing  # not a run: not listed
    assert "is not a run's folder (no record.json)" in folder
    assert torch_loaded == "False"
