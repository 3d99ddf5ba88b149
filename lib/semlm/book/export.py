"""``python -m semlm.book export RUN DIR``: a finished run of the book as a folder transformers loads.

``RUN`` is a run's folder in the run cache (``book/_build/runs/<profile>/...``, the ``run_dir`` of its
``record.json``). The folder gets the weights and ``config.json`` (``save_pretrained``, with ``auto_map``
and the model's code, so ``trust_remote_code=True`` loads it without semlm), the tokenizer where the run
has one (paper B's GPTs; paper A's synthetic models get their word tokenizer, and a fusion model carries its
causal feature bank, so ``generate`` works alone), and a model card (``README.md``) naming the data, profile,
seed, commit and the run's metrics, and what the model reads. SST-2 and intent models are refused with the
reason. Only a run the book's chapters declare (:func:`semlm.book.plan.book_runs`) whose cache key
still matches the code of this checkout can be exported: then the card's commit is code that trains it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

# semlm.book.plan and semlm.core.runs (torch, transformers: seconds) are imported where a run is read, so that a
# wrong path is one line at once (resolve_run)


class ExportError(ValueError):
    """A run that cannot be exported, or a destination that would lose something; the message says which."""


def resolve_run(path: str | Path) -> Path:
    """The run folder ``path`` names: the folder itself, or the one run folder of its parent named ``<path's
    name>-<key>`` (so ``.../gated-mean-seed111`` names ``.../gated-mean-seed111-3f9a...`` beside its ``.lock``
    file); an error naming what is there when none or several match."""
    path = Path(path)
    if (path / "record.json").is_file():
        return path
    here = sorted(p for p in path.parent.glob(f"{path.name}-*") if p.is_dir())  # none where there is no parent
    if len(here) == 1:
        return here[0]
    if here:
        raise ExportError(f"{path} names {len(here)} runs ({', '.join(p.name for p in here)}); give the one to "
                          f"export in full")
    if path.is_dir():
        raise ExportError(f"{path} is not a run's folder (no record.json); give a folder under "
                          f"book/_build/runs/<profile>/ whose run has finished")
    runs_there = sorted(p.parent.name for p in path.parent.glob("*/record.json") if p.is_file())
    where = (f"{path.parent} holds the runs {', '.join(runs_there)}; give one of them, or its name up to the key"
             if runs_there else f"{path.parent} holds no run; give a folder under book/_build/runs/<profile>/")
    raise ExportError(f"{path} names no run: {where}")


def find_run(folder: str | Path):
    """``(experiment, spec, profile, record)`` of the finished run in ``folder``."""
    from semlm.book.plan import book_runs
    from semlm.core import runs
    from semlm.profiles import PROFILES

    folder = Path(folder)
    record_file = folder / "record.json"
    if not record_file.is_file() or not (folder / "train" / "final" / "model.safetensors").is_file():
        raise ExportError(f"{folder} is not a finished run (no record.json and train/final/model.safetensors); "
                          f"give a folder under book/_build/runs/<profile>/ whose run has finished")
    record = json.loads(record_file.read_text())
    if record.get("experiment") in NOT_ALONE:
        raise ExportError(f"{folder} cannot be used without semlm: {NOT_ALONE[record['experiment']]}; export a "
                          f"synthetic-corpus run of chapters 2-4 or a chapter-6 or -7 GPT run")
    if record.get("experiment") == SYNTHETIC_REFERENCE and (record.get("config") or {}).get("setting") == "published":
        raise ExportError(f"{folder} is a published-setting run: its features and attention read the future, so it "
                          f"is not a language model and cannot generate; export the causal run of the same model")
    if str(record.get("experiment", "")).startswith("semlm.idea.lora_experiment:"):
        raise ExportError(f"{folder} is a chapter-8 LoRA run: its weights are adapters and an idea head over a frozen "
                          f"backbone that the run does not hold, so it cannot be written as a model transformers "
                          f"loads alone (a peft adapter export is not built); export a chapter-6 or -7 GPT run")
    for profile in PROFILES:
        for entry in book_runs(profile):
            if entry.experiment.reference() != record.get("experiment"):
                continue
            for spec in entry.specs:
                if ((spec.name, spec.seed, spec.group) == (record["name"], record["seed"], record["group"])
                        and runs.run_key(entry.experiment, spec, record["device"], record["threads"]) == record["key"]):
                    return entry.experiment, spec, profile, record
    raise ExportError(f"{folder}: no run the chapters declare at any profile has key {record.get('key')} with this "
                      f"checkout's code (trained by other code, or a chapter-7 sweep run); rebuild it with "
                      f"`python -m semlm.book plan --profile <profile> --train`")


def _dataset(description) -> str:
    """The first ``dataset`` named anywhere in a run's description (paper A's synthetic runs name none)."""
    if isinstance(description, dict):
        if isinstance(description.get("dataset"), str):
            return description["dataset"]
        return next((found for value in description.values() if (found := _dataset(value))), "")
    return ""


#: Paper A's experiments whose runs cannot be written as a model that works alone, and why.
NOT_ALONE = {
    "semlm.fusion.sst2_experiment:SST2": "an SST-2 fusion model reads features computed by spaCy's tagger and VADER's "
                                         "lexicon, which cannot travel as remote code beside the weights",
    "semlm.fusion.intent_experiment:EXPERIMENT": "a chapter-10 intent model reads a sentence-level request written "
                                                 "into its features by the book's intent writer (semlm.fusion.intent)",
}
SYNTHETIC_REFERENCE = "semlm.fusion.synthetic_experiment:SYNTHETIC"


def _synthetic_usage(kind: str, vocabulary: tuple[str, ...]) -> str:
    """The card's section on a synthetic-corpus model: its words, and (fusion) its features and how a request is
    written."""
    from semlm.fusion.fuzzy import FEATURE_INDEX, FEATURE_NAMES

    words = ", ".join(f"`{w}`" for w in vocabulary)
    text = (f"## The synthetic corpus's model\n\nIt knows the {len(vocabulary)} tokens of paper A's synthetic "
            f"grammar and nothing else (another word is a tokenizer error): {words}. The tokenizer puts `<bos>` "
            "first, as in training; a sentence ends with `<eos>`.\n\n")
    if kind != "fusion":
        return text
    columns = ", ".join(f"{i} `{name}`" for i, name in enumerate(FEATURE_NAMES))
    return text + (
        "The fusion model computes its own input features from the tokens, with the book's causal feature bank "
        "(carried as `featurize.py` beside the weights: the feature at position t reads tokens up to t only). "
        f"The {len(FEATURE_NAMES)} feature columns are fuzzy memberships in [0, 1] (paper A, Eq. 1): {columns}.\n\n"
        "A request is a value written into a column of the newest position's features at each generation step, "
        "for example a positive, strong continuation:\n\n```python\nimport torch\n\n"
        "ids = tokenizer(\"Alice cooks the meal ,\", return_tensors=\"pt\").input_ids\n"
        f"columns = torch.tensor([{FEATURE_INDEX['pos_low']}, {FEATURE_INDEX['pos_med']}, "
        f"{FEATURE_INDEX['pos_high']}])  # pos_low, pos_med, pos_high\n"
        "values = torch.tensor([0.0, 0.0, 1.0])\n"
        "out = model.generate(ids, max_new_tokens=8, do_sample=False, feature_controls=(columns, values))\n"
        "print(tokenizer.decode(out[0], skip_special_tokens=True))\n```\n\n"
        "Prompts in one batch must have one length (no padding). How far such a request moves a causal model is "
        "what the book's chapter 4 measures (its A-feature-steering claim): the features describe words already "
        "written, so a request written into them may change little.\n\n")


def model_card(spec, profile: str, record: dict, commit: str, has_tokenizer: bool, usage: str = "") -> str:
    """The exported folder's ``README.md``; ``usage``: a section on what the model reads and how to ask it."""
    description = spec.description()
    metrics = {k: v for k, v in (record.get("metrics") or {}).items() if isinstance(v, (int, float, str))}
    rows = "\n".join(f"| {k} | {v:.4g} |" if isinstance(v, float) else f"| {k} | {v} |" for k, v in metrics.items())
    data = _dataset(description) or "paper A's synthetic corpus (generated from the corpus settings below)"
    load = ("from transformers import AutoModelForCausalLM, AutoTokenizer\n\n"
            'model = AutoModelForCausalLM.from_pretrained("this/folder", trust_remote_code=True)\n'
            + ('tokenizer = AutoTokenizer.from_pretrained("this/folder")\n' if has_tokenizer else ""))
    return (f"# {spec.name} (seed {spec.seed}), exported from the semlm book\n\n"
            f"- data: {data} (real datasets are read from `$SEMLM_DATA_DIR`; see their PROVENANCE.md)\n"
            f"- profile: `{profile}`\n- training seed: {spec.seed}\n"
            f"- steps: {record.get('steps')}, {record.get('train_seconds', 0):.0f} s of training on "
            f"{record.get('device')}\n"
            f"- code: commit `{commit}` (the run's cache key matches this commit's training code)\n\n"
            f"## Metrics of the run\n\n| metric | value |\n|---|---|\n{rows}\n\n## Load\n\n```python\n{load}```\n\n"
            f"{usage}## The run\n\n```json\n{json.dumps(description, indent=2, default=str)}\n```\n")


def export_run(folder: str | Path, out: str | Path) -> Path:
    """Write the finished run in ``folder`` to ``out`` (which must not exist or be empty); returns ``out``."""
    from transformers import PreTrainedModel

    from semlm.book.report import git_commit
    from semlm.core import runs

    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ExportError(f"{out} exists and is not an empty folder; give a new folder (nothing was written)")
    folder = resolve_run(folder)
    experiment, spec, profile, record = find_run(folder)
    model = runs.load_model(experiment, spec, Path(folder), "cpu")
    if not isinstance(model, PreTrainedModel):
        raise ExportError(f"{spec.name} is a {type(model).__name__}, not a transformers model; it cannot be exported")
    data, usage = experiment.data(spec), ""
    tokenizer = getattr(data, "tokenizer", None)
    if experiment.reference() == SYNTHETIC_REFERENCE:  # a word tokenizer and, for fusion, the feature bank inside
        tokenizer = data.vocab.hf_tokenizer()
        if getattr(model, "uses_features", False):
            model.attach_featurizer(data.featurizer.tables, data.vocab.pad_id)
        usage = _synthetic_usage(model.config.kind, data.vocab.tokens)
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    if tokenizer is not None:
        tokenizer.save_pretrained(tmp)
    (tmp / "README.md").write_text(model_card(spec, profile, record, git_commit(), tokenizer is not None, usage))
    if out.exists():
        out.rmdir()
    tmp.replace(out)
    return out
