"""One final verdict per claim, from a fixed order of sources (issue 43): a registered decisive recording when
complete, else this build's verdict, else, for a claim the profile cannot test, the competent recorded run its rule
names; the recorded column lists each recorded result once; the counts, README, VERDICTS.md and the multiplicity
sentence read the final column. Every test builds its own rows and recorded folders."""

import json
import os

import pytest

from semlm.book import claims as rules
from semlm.book import report
from semlm.book.claims import CLAIMS
from semlm.core.verdicts import INCONCLUSIVE, NOT_REPRODUCED, NOT_RUN, NOT_TESTABLE, REPRODUCED, STATUSES
from semlm.book.recorded import collect_book, readme_verdicts_section, recorded_verdicts
from semlm.book.recorded_runs import RECORDED_DIR


def row(claim, status, recorded=(), planned=None):
    """A claims row; ``recorded``: ``(folder, status, seeds)`` entries; ``planned``: its rule's planned seeds."""
    out = {"id": claim, "paper": claim[0], "claim": "c", "status": status, "ci": None, "reason": "r", "rule": "x",
           "paper_value": 1.0, "published_value": None, "causal_value": 0.5, "profile": "cpu", "seeds": 3,
           "recorded": [{"folder": folder, "folders": [folder], "commit": "abc1234", "commits": ["abc1234"],
                         "status": s, "seeds": seeds, "value_mean": 0.1} for folder, s, seeds in recorded]}
    if planned is not None:
        out["power"] = {"n_planned": planned}
    return out


def finals(rows, root, decisive=None, competent=None):
    """``final`` of each row by claim id, the decisive folders made under ``root``."""
    for folder in (decisive or {}).values():
        (root / folder).mkdir(exist_ok=True)
    return {r["id"]: r["final"] for r in report.final_verdicts(rows, decisive or {}, competent or {}, root)}


def test_a_complete_decisive_recording_is_final_even_where_this_build_decides(tmp_path):
    got = finals([row("A-x", REPRODUCED, [("other", REPRODUCED, 9), ("decisive-a", NOT_REPRODUCED, 5)], planned=5),
                  row("A-y", INCONCLUSIVE, [("decisive-b", REPRODUCED, 8)], planned=5)],
                 tmp_path, decisive={"A-x": "decisive-a", "A-y": "decisive-b"})
    assert got["A-x"] == {"status": NOT_REPRODUCED, "source": "decisive-a", "build_status": REPRODUCED, "flag": True,
                          "seeds": 5, "note": "the claim's registered decisive recording"}
    assert (got["A-y"]["status"], got["A-y"]["source"], got["A-y"]["flag"]) == (REPRODUCED, "decisive-b", False)


def test_an_incomplete_decisive_recording_leaves_this_builds_verdict(tmp_path):
    got = finals([row("A-x", INCONCLUSIVE, [("decisive-a", NOT_REPRODUCED, 3)], planned=5)], tmp_path,
                 decisive={"A-x": "decisive-a"})["A-x"]
    assert (got["status"], got["source"]) == (INCONCLUSIVE, report.THIS_BUILD)
    assert "decisive-a is not complete (3 of 5 planned seeds)" in got["note"]


@pytest.mark.parametrize("build", [s for s in STATUSES if s != NOT_TESTABLE])
@pytest.mark.parametrize("recorded", [REPRODUCED, NOT_REPRODUCED])
def test_a_recorded_verdict_never_replaces_one_this_build_could_give(tmp_path, build, recorded):
    got = finals([row("B-x", build, [("long", recorded, 3)])], tmp_path, competent={"B-x": "long"})["B-x"]
    assert (got["status"], got["source"], got["build_status"]) == (build, report.THIS_BUILD, build)


def test_the_competent_run_stands_in_only_where_this_build_cannot_test_the_claim(tmp_path):
    got = finals([row("B-x", NOT_TESTABLE, [("elsewhere", NOT_REPRODUCED, 9), ("long", REPRODUCED, 3)])], tmp_path,
                 competent={"B-x": "long"})["B-x"]
    assert got == {"status": REPRODUCED, "source": "long", "build_status": NOT_TESTABLE, "flag": False, "seeds": 3,
                   "note": "this build cannot test the claim; the competent recorded run its rule names"}


def test_a_claim_with_no_usable_source_keeps_this_builds_status(tmp_path):
    rows = [row("B-none", NOT_TESTABLE, [("long", REPRODUCED, 3)]),           # no competent run registered
            row("B-elsewhere", NOT_TESTABLE, [("elsewhere", REPRODUCED, 3)]),  # its run holds no verdict
            row("B-weak", NOT_TESTABLE, [("long", NOT_TESTABLE, None)])]      # its run cannot test it either
    got = finals(rows, tmp_path, competent={"B-elsewhere": "long", "B-weak": "long"})
    assert all((f["status"], f["source"]) == (NOT_TESTABLE, report.THIS_BUILD) for f in got.values())
    assert "long holds no verdict that tests the claim" in got["B-weak"]["note"]


@pytest.mark.parametrize("build, decisive, flag", [
    (REPRODUCED, NOT_REPRODUCED, True), (NOT_REPRODUCED, REPRODUCED, True), (INCONCLUSIVE, REPRODUCED, False),
    (REPRODUCED, INCONCLUSIVE, False), (REPRODUCED, REPRODUCED, False)])
def test_the_flag_marks_a_reproduced_against_a_not_reproduced(tmp_path, build, decisive, flag):
    got = finals([row("A-x", build, [("d", decisive, 3)])], tmp_path, decisive={"A-x": "d"})["A-x"]
    assert got["flag"] is flag
    shown = report.claims_table(report.final_verdicts([row("A-x", build, [("d", decisive, 3)])], {"A-x": "d"}, {},
                                                      tmp_path))._repr_html_()
    assert ("(disagree)" in shown) is flag and "this build: " + build in shown


def test_a_decisive_recording_that_does_not_exist_is_one_line_naming_it_and_the_fix(tmp_path):
    with pytest.raises(FileNotFoundError) as error:
        report.final_verdicts([row("A-x", REPRODUCED)], {"A-x": "missing"}, {}, tmp_path)
    message = str(error.value)
    assert "\n" not in message and str(tmp_path / "missing") in message and "does not exist" in message
    assert "take A-x out of semlm.book.claims.DECISIVE_RECORDINGS" in message


def test_a_decisive_recording_without_the_claim_is_one_line_naming_it_and_the_fix(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="A-x: its decisive recording book/recorded/empty holds no verdict for it") \
            as error:
        report.final_verdicts([row("A-x", REPRODUCED, [("other", REPRODUCED, 3)])], {"A-x": "empty"}, {}, tmp_path)
    assert "\n" not in str(error.value) and "DECISIVE_RECORDINGS" in str(error.value)


def test_every_registered_recording_is_a_recorded_folder():
    registered = {**rules.DECISIVE_RECORDINGS, **rules.COMPETENT_RECORDINGS}
    ids = {claim.id for claim in CLAIMS}
    assert set(registered) <= ids
    assert [folder for folder in registered.values() if not (RECORDED_DIR / folder).is_dir()] == []
    assert set(rules.COMPETENT_RECORDINGS) <= {"B-ppl", "B-stickiness", "B-distinct"}  # the claims cpu cannot test


def test_counts_and_the_multiplicity_sentence_read_the_final_column(tmp_path):
    rows = report.final_verdicts([row("A-1", REPRODUCED), row("B-1", NOT_TESTABLE, [("long", NOT_REPRODUCED, 3)]),
                                  row("B-2", INCONCLUSIVE)], {}, {"B-1": "long"}, tmp_path)
    table = report.verdict_summary(rows)
    assert table.loc[NOT_REPRODUCED, "paper B"] == 1 and NOT_TESTABLE not in table.index
    assert report.multiplicity_sentence(rows).startswith(
        "This report decides 2 of 3 claims (reproduced or not reproduced); at 95% per claim, about 0.10 of those "
        "decisions are expected to be wrong by chance alone")
    shown = report.claims_table(rows)._repr_html_()
    assert "this build: not testable at this scale" in shown and "final verdict from:</b> long" in shown
    nine = [row(f"A-{i}", [REPRODUCED, NOT_REPRODUCED][i % 2] if i < 9 else INCONCLUSIVE) for i in range(26)]
    assert "decides 9 of 26 claims" in report.multiplicity_sentence(nine)
    assert "about 0.45 of those decisions" in report.multiplicity_sentence(nine)
    assert "about 0.90 of those" in report.multiplicity_sentence(nine, level=0.90)


# --- recorded folders, written the way `collect-book` writes them ----------------------------------------------

def _intent_build(folder, intent, commit="d", mtime=None):
    """A finished build (``manifest.json``) whose chapter 10 decides A-soft-control on intent - shuffled polarity
    accuracy, one value per training seed (the shuffled control at 0.35 on every seed)."""
    (folder / "metrics").mkdir(parents=True)
    (folder / "metrics" / "01_feature_bank.json").write_text(json.dumps(
        {"cpu_model": "AMD EPYC", "cpu_count": 2, "git_commit": commit * 40, "packages": {}}))
    shuffled = [0.35 + 0.001 * (i % 3) for i in range(len(intent))]
    variants = {v: {"polarity_acc": {"mean": sum(a) / len(a), "ci_low": min(a), "ci_high": max(a), "values": list(a)}}
                for v, a in (("intent", intent), ("shuffled", shuffled), ("baseline", shuffled))}
    (folder / "metrics" / "10_intent_control.json").write_text(json.dumps(
        {"profile": "cpu", "git_commit": commit * 40, "intent": {"variants": variants}}))
    manifest = folder / "manifest.json"
    manifest.write_text(json.dumps({"chapters": {}, "profile": "cpu", "total_wall_seconds": 1.0, "complete": True}))
    if mtime is not None:
        os.utime(manifest, (mtime, mtime))
    return folder


def _seeds():
    """As many seeds as A-soft-control's rule plans (3 where it plans none)."""
    effect = next(claim for claim in CLAIMS if claim.id == "A-soft-control").effect
    return max(getattr(effect, "n_planned", 3) or 3, 3)


def test_recorded_folders_with_the_same_result_are_one_entry_naming_each(tmp_path):
    n = _seeds()
    strong = [0.95 + 0.001 * (i % 3) for i in range(n)]
    for name, commit, intent in (("a", "a", strong), ("b", "b", strong), ("c", "c", [v - 0.01 for v in strong])):
        collect_book(_intent_build(tmp_path / name, intent, commit), tmp_path / "rec", name, "make book")
    (same, other) = recorded_verdicts(tmp_path / "rec")["A-soft-control"]
    assert same["folders"] == ["cpu-book-a", "cpu-book-b"] and same["commits"] == ["a" * 12, "b" * 12]
    assert other["folders"] == ["cpu-book-c"] and other["value_mean"] != same["value_mean"]
    shown = report.claims_table(report.attach_recorded([row("A-soft-control", REPRODUCED)],
                                                       recorded_verdicts(tmp_path / "rec")))._repr_html_()
    assert "cpu-book-a (aaaaaaa), cpu-book-b (bbbbbbb)" in shown and shown.count("cpu-book-c (ccccccc)") == 1


def test_a_collected_build_keeps_a_final_verdict_per_claim_and_counts_it(tmp_path):
    dest = collect_book(_intent_build(tmp_path / "build", [0.95] * _seeds()), tmp_path / "rec", "x", "make book")
    stored = json.loads((dest / "report.json").read_text())
    folders = {path.name for path in (tmp_path / "rec").iterdir()}
    assert [r["id"] for r in stored["claims"]] == [claim.id for claim in CLAIMS]
    for r in stored["claims"]:
        assert r["final"]["source"] == report.THIS_BUILD or r["final"]["source"] in folders
        assert r["final"]["build_status"] == r["status"] and isinstance(r["final"]["flag"], bool)
    assert stored["counts"] == report.verdict_counts(stored["claims"])
    assert sum(sum(counts.values()) for counts in stored["counts"].values()) == len(stored["claims"])
    assert set(stored["summary"]) == {"A", "B"} and "Paper A: of its" in stored["summary"]["A"]
    assert "This report decides " in (dest / "VERDICTS.md").read_text()


def test_the_readme_counts_the_final_column_not_the_latest_builds_own_verdicts(tmp_path, monkeypatch):
    n = _seeds()
    collect_book(_intent_build(tmp_path / "old", [0.35 + 0.001 * (i % 3) for i in range(n)], "o", 1.7e9),
                 tmp_path / "rec", "decisive", "make book")  # no better than the shuffled control
    collect_book(_intent_build(tmp_path / "new", [0.95 + 0.001 * (i % 3) for i in range(n)], "e", 1.8e9),
                 tmp_path / "rec", "latest", "make book")
    own = readme_verdicts_section(tmp_path / "rec")
    # A-soft-control is one of the book's extensions: its own column (paper A, extensions, paper B)
    assert "cpu-book-latest" in own and f"| {REPRODUCED} | 0 | 1 | 0 |" in own and f"| {NOT_REPRODUCED} |" not in own
    assert "This report decides 1 of " in own
    monkeypatch.setattr(rules, "DECISIVE_RECORDINGS", {"A-soft-control": "cpu-book-decisive"})
    final = readme_verdicts_section(tmp_path / "rec")
    assert f"| {NOT_REPRODUCED} | 0 | 1 | 0 |" in final and f"| {REPRODUCED} |" not in final
    assert "This report decides 1 of " in final and "at 95% per claim, about 0.05 of those decisions" in final
    assert f"| {NOT_RUN} |" in final  # the claims no chapter of these builds decides are counted too, as not run


def test_the_readme_command_rewrites_the_section_from_the_recorded_builds(tmp_path, monkeypatch, capsys):
    from semlm.book import recorded

    collect_book(_intent_build(tmp_path / "build", [0.95 + 0.001 * (i % 3) for i in range(_seeds())]),
                 tmp_path / "rec", "latest", "make book")
    monkeypatch.setattr(recorded, "REPO_ROOT", tmp_path)
    (tmp_path / "README.md").write_text("# x\n<!-- recorded-verdicts:start -->\nold\n<!-- recorded-verdicts:end -->\n")
    assert recorded.main(["readme", "--root", str(tmp_path / "rec")]) == 0
    assert "rewritten" in capsys.readouterr().out
    assert (tmp_path / "README.md").read_text() == f"# x\n{readme_verdicts_section(tmp_path / 'rec')}\n"
    assert recorded.main(["readme", "--root", str(tmp_path / "rec")]) == 0
    assert "already up to date" in capsys.readouterr().out
