"""The book's runs can be listed (and trained) before any chapter runs: semlm.book.plan."""

import pytest

from semlm.book import plan
from semlm.book.runner import main as book_main
from semlm.book.runner import list_chapters
from semlm.fusion.synthetic_experiment import fusion_training_runs
from semlm.fusion.profiles import synthetic_profile


def test_every_chapter_that_trains_is_listed_once_and_runs_are_not_repeated():
    planned = plan.book_runs("smoke")
    chapters = [entry.chapter for entry in planned]
    assert len(set(chapters)) == len(chapters)
    assert set(chapters) | set(plan.DEPENDENT) >= {c for c in list_chapters() if c[:2] in
                                                  {"02", "04", "05", "06", "07", "08", "09", "10"}}
    keys = [plan.trained_model(e.experiment, s) for e in planned for s in e.specs]
    assert len(keys) == len(set(keys))


def test_chapter_10_lists_only_the_models_it_trains_itself():
    from semlm.fusion import intent_experiment as ie

    chapter10 = next(e for e in plan.book_runs("smoke") if e.chapter == "10_intent_control")
    assert chapter10.specs and {s.name for s in chapter10.specs} == set(ie.TRAINED) - set(ie.SHARED)


def test_the_plan_lists_exactly_what_the_chapter_declares():
    chapter2 = next(e for e in plan.book_runs("smoke") if e.chapter == "02_fusion_training")
    assert list(chapter2.specs) == fusion_training_runs(synthetic_profile("smoke", plan.DEFAULT_SEED))
    audit = next(e for e in plan.book_runs("smoke") if e.chapter == "04_leakage_audit")
    assert not set(map(repr, audit.specs)) & set(map(repr, chapter2.specs))  # chapter 4 re-uses chapter 2's models


def test_plan_command_prints_the_runs_per_chapter(capsys):
    assert book_main(["plan", "--profile", "smoke"]) == 0
    out = capsys.readouterr().out
    assert "02_fusion_training" in out and "total" in out and "later:" in out


@pytest.mark.needs_data(*plan.CHAPTERS)  # the step counts of the data chapters' runs read their data
def test_the_schedule_takes_the_chapters_in_order_and_the_longest_runs_of_each_first():
    planned = plan.book_runs("smoke")
    assert [e.chapter for e in planned] == list(plan.CHAPTERS)
    jobs = plan.schedule(planned)
    assert len(jobs) == sum(len(e.specs) for e in planned)
    position = {chapter: i for i, chapter in enumerate(plan.CHAPTERS)}
    owner = {(id(e.experiment), s): e.chapter for e in planned for s in e.specs}
    chapters = [position[owner[(id(experiment), spec)]] for experiment, spec in jobs]
    assert chapters == sorted(chapters)
    for entry in planned:
        steps = [experiment.total_steps(spec) or 0 for experiment, spec in jobs if (id(experiment), spec) in
                 {(id(entry.experiment), s) for s in entry.specs}]
        assert steps == sorted(steps, reverse=True), entry.chapter


def test_plan_of_some_chapters_takes_run_prefixes_and_lists_only_their_later_runs(capsys):
    assert book_main(["plan", "--profile", "smoke", "--chapters", "02"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("02_fusion_training") and "later:" not in out
    assert plan.describe([], ["08_lora_4bit_idea_gating"]).count("later:") == 1
    assert " 1 run\n" in plan.describe([plan.ChapterRuns("x", plan.book_runs("smoke")[0].experiment,
                                                          plan.book_runs("smoke")[0].specs[:1])]) + "\n"


def test_plan_refuses_a_chapter_without_runs(capsys):
    assert book_main(["plan", "--profile", "smoke", "--chapters", "01_feature_bank"]) == 2
    assert "declare no runs" in capsys.readouterr().err


def test_the_runner_starts_no_training_ahead_for_chapters_without_runs(tmp_path):
    from semlm.book.runner import start_training_ahead

    assert start_training_ahead("smoke", ["01_feature_bank", "03_controllable_decoding"], tmp_path) is None
