"""``python -m semlm.book seeds``: one small result file per seed, resumable without training; the registration it
decides by, committed before its seeds and refusing any other tree; the rule that chooses the prompts."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from semlm.book import registration
from semlm.book.seeds import PILOT_SEEDS, read_seeds, variance_split
from semlm.idea.rule_prompts import prompts_digest, rule_prompts

REPO = Path(__file__).resolve().parents[2]
RECORDED = REPO / "book" / "recorded"


def _seeds(*args, cwd=REPO, env=None):
    return subprocess.run([sys.executable, "-m", "semlm.book", "seeds", *args], capture_output=True, text=True,
                          cwd=cwd, env=env or os.environ.copy(), timeout=900)


@pytest.mark.needs_data("06_idea_gating")
def test_seeds_command_resumes_without_training(tmp_path):
    folder, runs = tmp_path / "pilot", tmp_path / "runs"
    args = ("--pilot", "--profile", "smoke", "--seeds", "501-502", "--processes", "2", "--folder", str(folder),
            "--runs-dir", str(runs))
    first = _seeds(*args)
    assert first.returncode == 0, first.stderr[-2000:]
    files = sorted((folder / "seeds").glob("*.json"))
    assert [p.name for p in files] == ["501.json", "502.json"]
    before = {p.name: p.read_bytes() for p in files}
    result = json.loads(before["501.json"])
    assert result["seed"] == 501 and set(result["val_ppl"]) == {"baseline", "gated"}
    assert set(result["book"]) == {"baseline", "gated", "sharpened"} and len(result["protocol"]["draws"]) == 2
    assert not any(p.suffix in (".safetensors", ".pt", ".bin") for p in folder.rglob("*"))  # no weights recorded
    # a second call on a machine without the first one's run cache: it must train nothing
    subprocess.run(["rm", "-rf", str(runs)], check=True)
    second = _seeds(*args)
    assert second.returncode == 0 and "2 of 2 already recorded" in second.stdout, second.stderr[-2000:]
    assert not runs.exists(), "the second call trained (or prepared) something"
    assert {p.name: p.read_bytes() for p in sorted((folder / "seeds").glob("*.json"))} == before


def test_the_seeds_command_imports_no_notebook_machinery_or_spacy(tmp_path):
    stop = tmp_path / "stop.json"
    stop.write_text(json.dumps(["the", "a"]))
    code = ("import sys; import semlm.book.runner, semlm.book.seeds, semlm.idea.wikitext_experiment, "
            "semlm.idea.sharpening, semlm.idea.rule_prompts; from semlm.idea.generation import stop_words; "
            "assert stop_words() == frozenset({'the', 'a'}); "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'papermill', 'jupytext', 'spacy', 'nbformat'}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "SEMLM_STOP_WORDS": str(stop)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"


def test_a_malformed_stop_list_is_one_clear_error(tmp_path, monkeypatch):
    from semlm.idea.generation import stop_words

    bad = tmp_path / "stop.json"
    bad.write_text("{not json")
    monkeypatch.setenv("SEMLM_STOP_WORDS", str(bad))
    with pytest.raises(ValueError, match="SEMLM_STOP_WORDS=.*not a readable JSON list"):
        stop_words()


@pytest.mark.parametrize("args, message", [
    (("--pilot", "--seeds", "1001-1002"), "--pilot uses seeds 501-999 only"),
    (("--pilot", "--seeds", "x"), "is not a range"),
    (("--processes", "0"), "--processes must be >= 1"),
    (("--seeds", "2001-2002"), "not the registered ones"),
])
def test_bad_arguments_are_one_line_errors_and_write_nothing(tmp_path, args, message):
    done = _seeds(*args, "--folder", str(tmp_path / "f"), "--runs-dir", str(tmp_path / "r"),
                  env={**os.environ, "SEMLM_COMMIT": "0" * 40})
    assert done.returncode == 2 and done.stderr.startswith("error: ") and message in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "f").exists()


def git(*args, cwd=REPO):
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=60)


def _history():
    if git("rev-parse", "--is-shallow-repository").stdout.strip() != "false":
        pytest.skip("a shallow clone holds no history to check the registration against")
    commit = registration.registration_commit()
    assert commit, "the registration commit is not in this clone's history"
    return commit


def test_decisive_command_refuses_a_dirty_tree(tmp_path):
    _history()
    clone = tmp_path / "clone"
    assert git("clone", "-q", str(REPO), str(clone)).returncode == 0
    (clone / "stray.txt").write_text("not committed")
    env = {k: v for k, v in os.environ.items() if k != "SEMLM_COMMIT"}
    env["PYTHONPATH"] = str(clone / "lib")
    done = _seeds("--profile", "smoke", "--runs-dir", str(tmp_path / "runs"), cwd=clone, env=env)
    assert done.returncode == 2 and "changes outside the recording's seeds/ folder (stray.txt)" in done.stderr, \
        done.stderr
    assert not (tmp_path / "runs").exists()
    assert not (clone / "book" / "recorded" / registration.B_SEEDS.folder / "seeds" / "1037.json").exists()


def test_registration_precedes_decisive_results():
    registered = _history()
    touched = git("show", "--name-only", "--format=", registered).stdout.split()
    assert touched and not any(p.startswith("book/recorded/") for p in touched), touched
    assert set(touched) <= {*registration.REGISTERED_FILES, "lib/semlm/book/claims.py"}
    when = int(git("show", "-s", "--format=%ct", registered).stdout)
    calls = [json.loads(line) for line in
             (RECORDED / registration.B_SEEDS.folder / "calls.jsonl").read_text().splitlines() if line.strip()]
    assert calls
    from datetime import datetime

    for call in calls:
        assert git("merge-base", "--is-ancestor", registered, call["commit"]).returncode == 0, call["commit"]
        assert datetime.fromisoformat(call["started_at"]).timestamp() > when
        assert call["registered_files_sha256"] == {
            name: __import__("hashlib").sha256(git("show", f"{registered}:{name}").stdout.encode()).hexdigest()
            for name in registration.REGISTERED_FILES}


def test_decisive_seeds_are_fresh():
    registered = _history()
    seeds = set(registration.B_SEEDS.all_seeds)
    assert min(seeds) >= 1001 and not seeds & set(PILOT_SEEDS)
    # the CPU claims' decisive folder holds seeds 1001+ too, of other claims on other models
    from semlm.book.cpu_seeds import FAMILIES
    from semlm.book.registration_cpu import CPU_SEEDS

    other = set()
    if CPU_SEEDS is not None:
        assert not {c for f in CPU_SEEDS.n for c in FAMILIES[f].claims} & set(registration.B_CLAIMS)
        other.add(CPU_SEEDS.folder)
    for folder in RECORDED.iterdir():
        if folder.name in {registration.B_SEEDS.folder, *other} or not folder.is_dir():
            continue
        for path in folder.rglob("*.json"):
            text = path.read_text()
            found = {int(s) for s in __import__("re").findall(r'"seeds?": \[?(\d{4})\b', text)} & seeds
            assert not found, f"{path} holds registered seeds {sorted(found)}"
    before = git("ls-tree", "-r", "--name-only", f"{registered}^", "book/recorded").stdout.split()
    assert not any(registration.B_SEEDS.folder in p for p in before)
    # every seed file recorded in the decisive folder is a registered seed, scored by the registered protocol
    results = read_seeds(RECORDED / registration.B_SEEDS.folder)
    assert {r["seed"] for r in results} <= seeds
    from dataclasses import asdict

    protocol = json.loads(json.dumps(asdict(registration.B_SEEDS.protocol)))
    assert all(r["protocol"] == protocol for r in results)


def test_the_pilot_measured_what_the_registration_states():
    reg = registration.B_SEEDS
    results = read_seeds(RECORDED / reg.pilot)
    assert all(r["seed"] in PILOT_SEEDS for r in results) and len(results) == 12
    plain = sum(sum(d["stickiness"] for d in r["book"]["baseline"]["stickiness"].values()) / 5 for r in results)
    assert reg.stickiness_m == pytest.approx(0.0305 * plain / len(results), abs=5e-6)
    samples = reg.protocol.samples_per_prompt
    pilot_samples = results[0]["protocol"]["samples_per_prompt"]
    for comparison, sd in zip(("gated - plain", "gated - sharpened plain"), registration.B_STICKINESS_SD):
        split = variance_split(results, comparison)
        within = split["within"] * pilot_samples / samples / 2  # a seed's mean of two draws at the registered samples
        assert within <= split["between"] / 4
        assert sd == pytest.approx((split["between"] + within) ** 0.5, abs=2e-6)


def test_rule_prompts_take_the_first_sentences_cut_before_a_term():
    lines = [" = Heading with an album = ",
             " The band went to the studio for an album . Short album .",   # 8 words, then 1 word: too few
             " One two three four five six seven eight nine album .",         # 9 words: too many
             " The storm moved west .",                                        # 2 words
             " Late in the season the <unk> hurricane formed .",               # <unk> before the term
             " After a quiet week at sea the storm grew .",
             " Fans said that the new single was an album track .",
             " In the end a weak tropical storm formed .",
             " Much later the same small band cut another album ."]           # after the domain is full
    terms = {"music": ["album"], "storms": ["storm", "hurricane"]}
    assert rule_prompts(lines, terms, per_domain=2) == {
        "music": [" The band went to the studio for an", " Fans said that the new single was an"],
        "storms": [" After a quiet week at sea the", " In the end a weak tropical"]}
    with pytest.raises(ValueError, match="too few prompts by the rule"):
        rule_prompts(lines, terms, per_domain=3)
    assert prompts_digest({"b": ["x"], "a": ["y"]}) == prompts_digest({"a": ["y"], "b": ["x"]})
    assert prompts_digest({"a": ["y"]}) != prompts_digest({"a": ["y "]})


def test_about_states_the_paper_run_estimate_of_the_recorded_files():
    from semlm.book.recorded import paper_run_estimate

    about = (REPO / "book" / "about.md").read_text()
    rows = paper_run_estimate()
    assert {r["folder"] for r in rows} >= {"h100-d-gpu-throughput", "h200-a-gpu-throughput"}
    for r in rows:
        line = (f"| `{r['folder']}` | {r['gpu'].split()[1]} | {r['model']} | {r['setting']} | "
                f"{r['tokens_per_second']:,.0f} | {r['training_minutes']:.1f} min | "
                f"{r['validation_minutes']:.1f} min | {r['total_minutes']:.1f} min |")
        assert line in about, line


def test_a_collected_registered_recording_gives_paper_b_s_final_verdicts(tmp_path, monkeypatch):
    """Once ``collect-seeds`` has written the registered folder's report (it does only at exactly n seeds), B-ppl and
    B-distinct take their final verdict from it, and B-stickiness too once it holds the rule's planned seeds; here a
    stand-in folder of 12 seeds (the pilot's files) is complete for the first two and not for B-stickiness."""
    import shutil
    from dataclasses import replace

    from semlm.book import decisive
    from semlm.book.claims import evaluate_claims
    from semlm.book.recorded import recorded_verdicts
    from semlm.book.report import attach_recorded, final_verdicts, registered_decisive

    reg = replace(registration.B_SEEDS, n=12, first=501)
    root = tmp_path / "recorded"
    for name in ("cpu-long-seeds", "cpu-long"):
        shutil.copytree(RECORDED / name, root / name)
    shutil.copytree(RECORDED / reg.pilot / "seeds", root / reg.folder / "seeds")
    assert registered_decisive(root) == {}  # not collected: no final verdict comes from it
    monkeypatch.setattr(registration, "B_SEEDS", reg)
    monkeypatch.setattr(decisive, "B_SEEDS", reg)
    monkeypatch.setattr(decisive, "git", lambda *a: subprocess.CompletedProcess(a, 0, "", ""))
    monkeypatch.setattr(decisive, "registration_commit", lambda: "0" * 40)
    decisive.collect(root / reg.folder)
    assert registered_decisive(root) == dict.fromkeys(registration.B_CLAIMS, reg.folder)
    rows = final_verdicts(attach_recorded(evaluate_claims({}), recorded_verdicts(root)), root=root)
    final = {row["id"]: row["final"] for row in rows}
    assert final["B-ppl"]["source"] == final["B-distinct"]["source"] == reg.folder
    assert final["B-stickiness"]["source"] != reg.folder and "12 of 120" in final["B-stickiness"]["note"]


def test_an_empty_seed_range_or_a_missing_folder_is_one_line(tmp_path):
    from argparse import Namespace

    from semlm.book.decisive import planned_seeds
    from semlm.book.seeds import SeedsError, read_seeds

    with pytest.raises(SeedsError, match="'5-2' is an empty range"):
        planned_seeds(Namespace(seeds="5-2", pilot=True))
    with pytest.raises(SeedsError, match="is not a folder"):
        read_seeds(tmp_path / "nothing")
