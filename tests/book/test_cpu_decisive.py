"""``python -m semlm.book decisive``: the CPU claims' seeds, one small result file per seed and family, resumable
without training, judged by the claims' own rules; no deciding call without a committed registration."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from semlm.book import registration_cpu
from semlm.book import decisive
from semlm.book.claims import DECISIVE_EFFECTS, DECISIVE_THRESHOLDS, decisive_rows
from semlm.fusion.claims import A_T1_RULE, mse_status
from semlm.idea.claims import LORA_EFFECT
from semlm.book.cpu_seeds import FAMILIES, FAMILY_OF
from semlm.core.records import Interval

REPO = Path(__file__).resolve().parents[2]


def _decisive(*args, command="decisive", env=None):
    return subprocess.run([sys.executable, "-m", "semlm.book", command, *args], capture_output=True, text=True,
                          cwd=REPO, env=env or os.environ.copy(), timeout=900)


@pytest.mark.needs_data("08_lora_4bit_idea_gating")
def test_a_pilot_resumes_without_training_and_is_judged_by_the_claims_rules(tmp_path):
    folder, runs = tmp_path / "pilot", tmp_path / "runs"
    claims = "A-T6-exclaim,B-lora-ppl,A-feature-steering,A-soft-control,B-topic-drift"
    args = ("--pilot", "--profile", "smoke", "--claims", claims, "--seeds", "501-502",
            "--folder", str(folder), "--runs-dir", str(runs))
    first = _decisive(*args)
    assert first.returncode == 0, first.stderr[-2000:]
    files = sorted(p.relative_to(folder / "seeds").as_posix() for p in (folder / "seeds").rglob("*.json"))
    families = ["feature-steering", "fusion-pair", "lora", "soft-control", "topic-drift"]
    assert files == [f"{f}/{s}.json" for f in families for s in (501, 502)]
    before = {p: (folder / "seeds" / p).read_bytes() for p in files}
    result = json.loads(before["fusion-pair/501.json"])
    assert result["seed"] == 501 and set(result["values"]) == set(FAMILIES["fusion-pair"].claims)
    metrics = result["metrics"]
    assert result["values"]["A-T1-fusion-better"]["baseline - fusion"] == pytest.approx(
        metrics["baseline"]["ppl_seen_only"] - metrics["fusion"]["ppl_seen_only"])
    assert not any(p.suffix in (".safetensors", ".pt", ".bin") for p in folder.rglob("*"))  # no weights recorded
    assert sorted(p.name for p in folder.iterdir()) == ["seeds"]  # the call's log too is in seeds/ (calls.jsonl)
    assert [json.loads(line)["event"] for line in (folder / "seeds" / "calls.jsonl").read_text().splitlines()] == [
        "start", "end"]
    # a second call with another (new) runs folder must train nothing: every seed has its file
    second = _decisive(*args[:-1], str(tmp_path / "runs2"))
    assert second.returncode == 0 and "10 of 10 seeds already recorded" in second.stdout, second.stderr[-2000:]
    assert not (tmp_path / "runs2").exists(), "the second call trained (or prepared) something"
    assert {p: (folder / "seeds" / p).read_bytes() for p in files} == before
    collected = _decisive("--pilot", str(folder), command="collect-decisive")
    assert collected.returncode == 0, collected.stderr[-2000:]
    report = json.loads((folder / "report.json").read_text())
    rows = {row["id"]: row for row in report["claims"]}
    assert set(rows) == {*FAMILIES["fusion-pair"].claims, "B-lora-ppl", "A-feature-steering", "A-soft-control",
                         "B-topic-drift"}
    values = [json.loads(before[f"lora/{s}.json"])["values"]["B-lora-ppl"] for s in (501, 502)]
    observed = {c: Interval.of_mean([v[c] for v in values]) for c in LORA_EFFECT.comparisons}
    assert rows["B-lora-ppl"]["status"] == LORA_EFFECT.decide(observed)[0]
    assert rows["B-lora-ppl"]["seed_ids"] == [501, 502] and "over 2 pilot seeds" in rows["B-lora-ppl"]["reason"]
    provenance = json.loads((folder / "provenance.json").read_text())
    assert provenance["pilot"] and provenance["seeds"]["A-T1-mse"] == [501, 502]
    assert "Pilot seeds of the CPU claims" in (folder / "VERDICTS.md").read_text()
    # the generated-text claims keep two draws per seed, and the record splits their variance
    steering = json.loads(before["feature-steering/501.json"])["values"]["A-feature-steering"]["requested - opposite"]
    assert len(steering) == 2 and set(provenance["variance_split"]) >= {"A-feature-steering", "A-soft-control"}
    topic = json.loads(before["topic-drift/501.json"])
    assert topic["metrics"]["data_transitions"] >= 20_000 and topic["metrics"]["world"]["lexicon_seed"] == 501


def test_without_a_committed_registration_a_deciding_call_is_refused_in_one_line(tmp_path, monkeypatch, capsys):
    from semlm.book.runner import main

    monkeypatch.setattr(registration_cpu, "CPU_SEEDS", None)  # as before the registration commit
    assert main(["decisive", "--claims", "A-T1-fusion-better", "--folder", str(tmp_path / "f")]) == 2
    err = capsys.readouterr().err
    assert "no registration of the CPU claims' seeds is committed" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "f").exists()


@pytest.mark.parametrize("args, message", [
    (("--pilot", "--seeds", "1001-1002"), "--pilot uses seeds 501-999 only"),
    (("--pilot", "--seeds", "9-x"), "is not a range"),
    (("--pilot", "--seeds", "505-501"), "is an empty range"),
    (("--pilot", "--claims", "A-T9-nothing"), "unknown decisive claim 'A-T9-nothing'"),
    (("--pilot", "--workers", "0"), "--workers must be >= 1"),
])
def test_bad_arguments_are_one_line_errors_and_write_nothing(tmp_path, args, message):
    done = _decisive(*args, "--folder", str(tmp_path / "f"), "--runs-dir", str(tmp_path / "r"))
    assert done.returncode == 2 and done.stderr.startswith("error: ") and message in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "f").exists() and not (tmp_path / "r").exists()


def test_collect_names_a_folder_without_seeds(tmp_path):
    done = _decisive("--pilot", str(tmp_path), command="collect-decisive")
    assert done.returncode == 2 and "holds no seed files" in done.stderr, done.stderr


def test_every_family_claim_has_a_decisive_rule_and_the_rows_apply_it():
    assert set(FAMILY_OF) == set(DECISIVE_EFFECTS) | set(DECISIVE_THRESHOLDS)
    gain = [0.30, 0.25, 0.35, 0.28]      # well above m = 0.085 over 4 seeds
    none = [0.01, -0.02, 0.015, -0.01]   # tight around 0: below m
    mse = [0.004, 0.0041, 0.0039, 0.004]  # below twice the paper's 0.0087
    seeds = [1001, 1002, 1003, 1004]
    rows = {r["id"]: r for r in decisive_rows(
        {"A-T1-fusion-better": {"baseline - fusion": gain}, "A-T6-exclaim": {"baseline - fusion": none},
         "A-T1-mse": {"fusion semantic MSE": mse}}, dict.fromkeys(("A-T1-fusion-better", "A-T6-exclaim", "A-T1-mse"),
                                                                  seeds), "cpu")}
    assert rows["A-T1-fusion-better"]["status"] == A_T1_RULE.decide(
        {"baseline - fusion": Interval.of_mean(gain)})[0] == "reproduced"
    assert rows["A-T6-exclaim"]["status"] == "not reproduced"
    assert rows["A-T1-mse"]["status"] == mse_status(Interval.of_mean(mse))[0] == "holds by construction"
    power = rows["A-T1-fusion-better"]["power"]
    assert power["n_planned"] == A_T1_RULE.n_planned and power["seeds_used"] == 4
    with pytest.raises(ValueError, match="has no decisive rule"):
        decisive_rows({"A-T2-adj": {"x": [1.0, 1.0]}}, {"A-T2-adj": [1, 2]}, "cpu")


# -- the registration: committed before its seeds, fresh seeds, a clean tree ----------------------------------------

RECORDED = REPO / "book" / "recorded"


def git(*args, cwd=REPO):
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=60)


def _registered():
    reg = registration_cpu.CPU_SEEDS
    if reg is None:
        pytest.skip("the CPU claims are not registered yet (registration_cpu.CPU_SEEDS is None)")
    if git("rev-parse", "--is-shallow-repository").stdout.strip() != "false":
        pytest.skip("a shallow clone holds no history to check the registration against")
    commit = registration_cpu.registration_commit()
    assert commit, "the registration commit is not in this clone's history"
    return reg, commit


def test_cpu_registration_precedes_decisive_results():
    reg, registered = _registered()
    touched = git("show", "--name-only", "--format=", registered).stdout.split()
    assert touched and not any(p.startswith("book/recorded/") for p in touched), touched
    when = int(git("show", "-s", "--format=%ct", registered).stdout)
    calls_file = RECORDED / reg.folder / "seeds" / "calls.jsonl"
    calls = [json.loads(line) for line in calls_file.read_text().splitlines() if line.strip()] \
        if calls_file.is_file() else []
    from datetime import datetime

    for call in calls:
        assert git("merge-base", "--is-ancestor", registered, call["commit"]).returncode == 0, call["commit"]
        assert datetime.fromisoformat(call["started_at"]).timestamp() > when
        assert call["registered_files_sha256"] == {
            name: __import__("hashlib").sha256(git("show", f"{registered}:{name}").stdout.encode()).hexdigest()
            for name in registration_cpu.REGISTERED_FILES}


def test_cpu_decisive_seeds_are_fresh():
    import re

    reg, registered = _registered()
    claims = {c: f for f in reg.n for c in FAMILIES[f].claims}
    seeds = {s for f in reg.n for s in reg.all_seeds(f)}
    assert min(seeds) >= 1001
    from semlm.book.registration import B_CLAIMS, B_SEEDS

    for folder in RECORDED.iterdir():
        if not folder.is_dir() or folder.name == reg.folder:
            continue
        if B_SEEDS is not None and folder.name == B_SEEDS.folder:
            assert not set(claims) & set(B_CLAIMS)  # paper B's seeds decide other claims on other models
            continue
        for path in folder.rglob("*.json"):
            found = {int(s) for s in re.findall(r'"seeds?": \[?(\d{4})\b', path.read_text())} & seeds
            assert not found, f"{path} holds registered seeds {sorted(found)}"
    before = git("ls-tree", "-r", "--name-only", f"{registered}^", "book/recorded").stdout.split()
    assert not any(reg.folder in p for p in before)
    from semlm.book.cpu_seeds import read_results

    for family, rows in read_results(RECORDED / reg.folder).items():
        assert family in reg.n and {r["seed"] for r in rows} <= set(reg.all_seeds(family))
        assert all(r["profile"] == reg.profile for r in rows)


def test_cpu_decisive_command_refuses_a_dirty_tree(tmp_path):
    reg, _ = _registered()
    clone = tmp_path / "clone"
    assert git("clone", "-q", str(REPO), str(clone)).returncode == 0
    (clone / "stray.txt").write_text("not committed")
    env = {k: v for k, v in os.environ.items() if k != "SEMLM_COMMIT"}
    env["PYTHONPATH"] = str(clone / "lib")
    done = subprocess.run([sys.executable, "-m", "semlm.book", "decisive", "--runs-dir", str(tmp_path / "runs")],
                          capture_output=True, text=True, cwd=clone, env=env, timeout=300)
    assert done.returncode == 2 and "changes outside the recording's seeds/ folder (stray.txt)" in done.stderr, \
        done.stderr
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("args, message", [
    (("--recheck", "--claims", "B-lora-ppl"), "--recheck needs --seeds"),
    (("--recheck", "--claims", "B-lora-ppl", "--seeds", "2001-2002"), "runs registered seeds only"),
    (("--recheck", "--pilot", "--seeds", "1001-1001"), "a folder of its own"),
])
def test_a_recheck_runs_registered_seeds_beside_the_recording_only(tmp_path, args, message):
    _registered()
    done = _decisive(*args, "--folder", str(tmp_path / "f"), "--runs-dir", str(tmp_path / "r"))
    assert done.returncode == 2 and done.stderr.startswith("error: ") and message in done.stderr, done.stderr
    assert not (tmp_path / "f").exists() and not (tmp_path / "r").exists()
    reg = registration_cpu.CPU_SEEDS
    into = _decisive("--recheck", "--claims", "B-lora-ppl", "--seeds", "1001-1001", "--folder",
                     str(RECORDED / reg.folder))
    assert into.returncode == 2 and "never into it" in into.stderr, into.stderr


def test_a_collected_cpu_recording_gives_the_cpu_claims_final_verdicts(tmp_path, monkeypatch):
    """Once ``collect-decisive`` has written the registered folder's report (only at exactly n seeds per family), each
    CPU claim takes its final verdict from it where it holds the rule's planned seeds; here the pilot's files stand in
    for a registration of their own counts: complete for A-feature-steering (5 planned) and A-soft-control (3) and
    the threshold claims, not for B-topic-drift (138) or A-T1-fusion-better (78)."""
    import shutil
    from dataclasses import replace

    from semlm.book import cpu_decisive
    from semlm.book.claims import evaluate_claims
    from semlm.book.recorded import recorded_verdicts
    from semlm.book.report import attach_recorded, final_verdicts, registered_decisive

    pilot = RECORDED / "cpu-pilot-39b0955"
    counts = {"feature-steering": 6, "soft-control": 6, "topic-drift": 10, "fusion-pair": 2, "lora": 2}
    reg = replace(registration_cpu.CPU_SEEDS or registration_cpu.CpuRegistration("c1"), n=counts, first=501,
                  spares=0)
    root = tmp_path / "recorded"
    shutil.copytree(pilot / "seeds", root / reg.folder / "seeds")
    monkeypatch.setattr(registration_cpu, "CPU_SEEDS", reg)
    assert registered_decisive(root) == {}  # not collected: no final verdict comes from it
    monkeypatch.setattr(registration_cpu, "registration_commit", lambda: "0" * 40)
    monkeypatch.setattr(decisive, "git", lambda *a: subprocess.CompletedProcess(a, 0, "", ""))  # claims_commit
    cpu_decisive.collect(root / reg.folder)
    provenance = json.loads((root / reg.folder / "provenance.json").read_text())
    assert provenance["n_registered"]["B-topic-drift"] == 10 and provenance["seeds"]["B-lora-ppl"] == [501, 502]
    claims = {c for f in counts for c in FAMILIES[f].claims}
    assert registered_decisive(root) == dict.fromkeys(claims, reg.folder)
    rows = final_verdicts(attach_recorded(evaluate_claims({}), recorded_verdicts(root)), root=root)
    final = {row["id"]: row["final"] for row in rows}
    for claim in ("A-feature-steering", "A-soft-control", "A-T1-mse", "A-T4-ood-neg"):
        assert final[claim]["source"] == reg.folder, (claim, final[claim])
    assert final["A-feature-steering"]["status"] == "not reproduced"
    assert final["A-soft-control"]["status"] == "reproduced"
    assert final["B-topic-drift"]["source"] != reg.folder and "10 of 138" in final["B-topic-drift"]["note"]
    assert final["A-T1-fusion-better"]["source"] != reg.folder and "2 of 78" in final["A-T1-fusion-better"]["note"]
    # a folder with a seed missing is refused in one line, and nothing is rewritten
    (root / reg.folder / "seeds" / "lora" / "502.json").unlink()
    before = (root / reg.folder / "report.json").read_bytes()
    from semlm.book.seeds import SeedsError

    with pytest.raises(SeedsError, match="not exactly the registered 2"):
        cpu_decisive.collect(root / reg.folder)
    assert (root / reg.folder / "report.json").read_bytes() == before


def test_a_failed_seed_is_replaced_by_the_next_spare_and_nothing_is_added(tmp_path):
    from semlm.book.cpu_decisive import _failed, _todo

    out = tmp_path / "seeds"
    (out / "lora").mkdir(parents=True)
    for seed in (1001, 1003):
        (out / "lora" / f"{seed}.json").write_text("{}")
    calls = out / "calls.jsonl"
    calls.write_text(json.dumps({"event": "start"}) + "\n" + json.dumps({"event": "end", "failed": [["lora", 1002]]})
                     + "\n")
    wanted = {"lora": ([1001, 1002, 1003], [1004, 1005])}
    assert _failed(calls) == {"lora": {1002}}
    assert _todo(out, wanted, _failed(calls)) == {"lora": [1004]}  # 1002 failed: the first spare instead
    assert _todo(out, wanted, {}) == {"lora": [1002]}
    (out / "lora" / "1004.json").write_text("{}")
    assert _todo(out, wanted, _failed(calls)) == {"lora": []}
