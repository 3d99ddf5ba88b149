from dataclasses import replace

import pytest

from semlm.fusion.config import BackboneConfig
from semlm.fusion.model import lm_config
from semlm.fusion.profiles import synthetic_profile
from semlm.profiles import CPU_BF16_VARIABLE, PROFILES, check_parameters


def test_every_profile_builds_at_its_name_and_seed():
    from semlm.fusion.profiles import intent_profile, sst2_profile
    from semlm.idea.profiles import idea_profile, lora_profile, topic_drift_profile

    for name in PROFILES:
        for build in (synthetic_profile, sst2_profile, idea_profile, lora_profile):
            assert (build(name, 7).name, build(name, 7).seed) == (name, 7)
        assert intent_profile(name, 7).synthetic.seed == topic_drift_profile(name, 7).data.seed == 7


def test_a_part_the_authors_run_lacks_is_one_row_of_the_differences():
    from semlm.idea.profiles import lora_profile, profile_differences

    rows = {row["setting"]: row for row in profile_differences(lora_profile("cpu"), lora_profile("paper"))}
    assert rows["book_backbone"] == {"setting": "book_backbone", "this run": "BookBackboneSpec (the book's own)",
                                     "authors' run": None}
    assert not any(key.startswith("book_backbone.") for key in rows) and "seed" not in rows
    assert rows["train.max_steps"]["authors' run"] == 5000


def test_cpu_and_paper_profiles_use_the_papers_scale():
    p = synthetic_profile("cpu")
    assert (p.corpus.n_train, p.corpus.n_val, p.backbone.d_model, p.backbone.n_layers, p.train.epochs) == (8000, 1200, 128, 4, 6)
    assert (p.train.lr, p.train.batch_size, p.train.label_smoothing, p.train.aux_weight, p.train.uniformizer_weight) == (3e-4, 64, 0.02, 0.5, 0.01)


def test_unknown_profile_names_the_choices():
    with pytest.raises(ValueError, match="unknown profile 'gpu'; choose one of: smoke, cpu, paper"):
        synthetic_profile("gpu")


@pytest.mark.parametrize("params, message", [
    ({"seed": "111"}, "parameter seed must be a non-negative int, got '111'"),
    ({"seed": 1.5}, "parameter seed"),
    ({"profile": 3}, "unknown profile 3"),
    ({"workers": 0}, "parameter workers"),
    ({"workers": None}, "parameter workers must be an int >= 1, got None"),
    ({"n_seeds": 0}, "parameter n_seeds must be an int >= 1 or None, got 0"),
    ({"epochs": 3}, "unknown parameter 'epochs'"),
])
def test_wrong_notebook_parameters_get_one_clear_error(params, message):
    with pytest.raises(ValueError, match=message):
        check_parameters(**params)


def test_none_is_the_profiles_own_number_of_seeds_or_steps():
    check_parameters(n_seeds=None, max_steps=None, workers=2, seed=0)


def test_a_topic_drift_profile_names_its_bad_sampling_settings():
    from semlm.idea.profiles import topic_drift_profile

    smoke = topic_drift_profile("smoke")
    for bad in ({"temperature": 0.0}, {"sweep_alphas": (-1.0,)}, {"plain_steps_factor": 0.5}):
        with pytest.raises(ValueError, match="need temperature > 0, sweep_alphas >= 0 and plain_steps_factor >= 1"):
            replace(smoke, **bad)


def test_model_config_rejects_unknown_kind_and_bad_heads():
    with pytest.raises(ValueError, match="unknown model kind 'gpt'"):
        lm_config(BackboneConfig(10), kind="gpt")
    with pytest.raises(ValueError, match="divisible by n_heads"):
        BackboneConfig(10, d_model=30, n_heads=4)


def test_a_model_config_takes_its_dimensions_from_the_profile():
    from semlm.fusion.synthetic_experiment import model_config

    profile = synthetic_profile("smoke")
    config = model_config(profile, "baseline", 41, "published")
    assert profile.backbone.vocab_size is None and type(config).__name__ == "BaselineLMConfig"
    assert config.backbone == replace(profile.backbone, vocab_size=41, causal=False)


def test_profiles_and_the_book_runner_import_without_torch():
    import subprocess
    import sys

    code = ("import sys; import semlm.profiles, semlm.fusion.profiles, semlm.idea.profiles, semlm.book, "
            "semlm.core.records; "
            "from semlm.core.train_config import TrainConfig; TrainConfig(autocast='bf16'); "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_lab_profile_takes_the_environment_in_an_interactive_kernel(monkeypatch, capsys):
    from semlm.profiles import lab_profile

    monkeypatch.delenv("SEMLM_BUILD_DIR", raising=False)
    monkeypatch.delenv("SEMLM_PROFILE", raising=False)
    assert lab_profile("cpu") == "cpu" and capsys.readouterr().out == ""
    monkeypatch.setenv("SEMLM_PROFILE", "smoke")
    assert lab_profile("cpu") == "smoke"
    assert "SEMLM_PROFILE" in capsys.readouterr().out  # one line says the override applied
    assert lab_profile("smoke") == "smoke" and capsys.readouterr().out == ""


def test_lab_profile_never_overrides_the_book_runner(monkeypatch, tmp_path):
    from semlm.book.runner import chapter_environment
    from semlm.profiles import lab_profile

    monkeypatch.setenv("SEMLM_PROFILE", "smoke")
    with chapter_environment(tmp_path, allow_downloads=False):  # what the book's kernels inherit
        assert lab_profile("cpu") == "cpu"
        assert lab_profile("paper") == "paper"  # a value papermill injected stays


def test_lab_profile_rejects_an_unknown_profile_in_one_line(monkeypatch):
    from semlm.profiles import lab_profile

    monkeypatch.delenv("SEMLM_BUILD_DIR", raising=False)
    monkeypatch.setenv("SEMLM_PROFILE", "tiny")
    with pytest.raises(ValueError, match="SEMLM_PROFILE='tiny' is not a profile; choose one of: smoke"):
        lab_profile("cpu")


def test_the_long_cpu_profile_belongs_to_chapter_6_only():
    from semlm.idea.profiles import idea_profile
    from semlm.profiles import LONG_PROFILES

    config = idea_profile("cpu-long")
    cpu = idea_profile("cpu")
    assert LONG_PROFILES == {"cpu-long": "06_idea_gating"}
    assert config.vocab_size == cpu.vocab_size >= 2048 and config.tokenizer == cpu.tokenizer
    assert config.train.max_steps > cpu.train.max_steps and not config.compare_loss_forms
    assert config.n_seeds >= 3  # B-stickiness needs three training seeds (STICKINESS_MIN_SEEDS)
    check_parameters(extra_profiles=("cpu-long",), profile="cpu-long")
    with pytest.raises(ValueError, match="profile of 06_idea_gating only"):
        check_parameters(profile="cpu-long")
    with pytest.raises(ValueError, match="profile of 06_idea_gating only"):
        synthetic_profile("cpu-long")


@pytest.mark.parametrize("native", [True, False])
def test_paper_a_cpu_profile_trains_in_bf16_only_where_the_cpu_computes_it(monkeypatch, native):
    import semlm.fusion.profiles as profiles
    import semlm.profiles

    monkeypatch.delenv(CPU_BF16_VARIABLE, raising=False)
    monkeypatch.setattr(semlm.profiles, "cpu_computes_bf16", lambda: native)
    expected = "bf16" if native else None
    assert profiles.synthetic_profile("cpu").train.autocast == expected
    assert profiles.sst2_profile("cpu").train.autocast == expected
    assert profiles.intent_profile("cpu").synthetic.train.autocast == expected
    # the paper profile keeps the authors' float32, smoke stays float32 (the tests' numbers do not depend on the CPU)
    assert profiles.synthetic_profile("paper").train.autocast is None
    assert profiles.sst2_profile("paper").train.autocast is None
    assert profiles.synthetic_profile("smoke").train.autocast is None
    # everything else is the paper's configuration
    cpu, paper = profiles.synthetic_profile("cpu"), profiles.synthetic_profile("paper")
    assert (cpu.corpus, cpu.backbone) == (paper.corpus, paper.backbone)
    assert replace(cpu.train, autocast=None) == paper.train


def test_paper_a_bf16_can_be_switched_off_and_a_bad_value_is_named(monkeypatch):
    import semlm.fusion.profiles as profiles
    import semlm.profiles

    monkeypatch.setattr(semlm.profiles, "cpu_computes_bf16", lambda: True)
    monkeypatch.setenv(CPU_BF16_VARIABLE, "off")
    assert profiles.synthetic_profile("cpu").train.autocast is None
    monkeypatch.setenv(CPU_BF16_VARIABLE, "always")
    with pytest.raises(ValueError, match="SEMLM_CPU_BF16='always' is not understood; set it to one of: auto, off"):
        profiles.synthetic_profile("cpu")


def test_a_bf16_run_and_a_float32_run_never_share_a_cache_folder(monkeypatch, tmp_path):
    import semlm.fusion.profiles as profiles
    import semlm.profiles
    from semlm.core.runs import run_folder
    from semlm.fusion.synthetic_experiment import SYNTHETIC, spec_for

    monkeypatch.delenv(CPU_BF16_VARIABLE, raising=False)
    folders = set()
    for native in (True, False):
        monkeypatch.setattr(semlm.profiles, "cpu_computes_bf16", lambda native=native: native)
        folders.add(run_folder(SYNTHETIC, spec_for(profiles.synthetic_profile("cpu"), "fusion"), tmp_path, "cpu", 1))
    assert len(folders) == 2


@pytest.mark.parametrize("native", [True, False])
def test_paper_b_cpu_profiles_train_in_bf16_only_where_the_cpu_computes_it(monkeypatch, native):
    """Chapters 6 and 7 at ``cpu`` (book/recorded/cpu-bf16-idea); ``smoke``, ``cpu-long``, ``paper`` and chapter
    9's topic models (slower in bf16) keep float32 on a CPU (bf16 on a GPU, as the authors)."""
    import semlm.profiles
    from semlm.idea.profiles import idea_profile, topic_drift_profile

    monkeypatch.delenv(CPU_BF16_VARIABLE, raising=False)
    monkeypatch.setattr(semlm.profiles, "cpu_computes_bf16", lambda: native)
    expected = "bf16" if native else "bf16_on_cuda"
    assert idea_profile("cpu").train.autocast == expected
    for profile in ("smoke", "cpu-long", "paper"):
        assert idea_profile(profile).train.autocast == "bf16_on_cuda"
    for profile in ("smoke", "cpu", "paper"):
        assert topic_drift_profile(profile).train.autocast == "bf16_on_cuda"
    monkeypatch.setenv(CPU_BF16_VARIABLE, "off")
    assert idea_profile("cpu").train.autocast == "bf16_on_cuda"


def test_the_cpu_capability_check_answers_a_bool():
    from semlm.profiles import cpu_computes_bf16

    assert isinstance(cpu_computes_bf16(), bool)
