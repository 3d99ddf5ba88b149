"""Paper A's benchmark helpers: the FLOP count (semlm.book.flops) and the training-variant comparison
(semlm.fusion.bench)."""

import pytest
import torch

from semlm.fusion.bench import TRAINING_VARIANTS, bf16_decision, summarise_training_variants
from semlm.book.flops import nominal_cpu_peak_flops, synthetic_forward_flops_per_position
from semlm.fusion.config import BackboneConfig
from semlm.fusion.model import lm_config, build_model


@pytest.mark.parametrize("kind", ["baseline", "fusion"])
def test_matmul_flops_are_twice_the_linear_weights_plus_the_tied_head(kind):
    backbone = BackboneConfig(vocab_size=41, d_model=32, n_layers=3, n_heads=2, d_ff=48)
    model = build_model(lm_config(backbone, kind=kind))
    weights = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    parts = synthetic_forward_flops_per_position(backbone, 41, kind, 22, context=6)
    assert parts["total"] - parts["attention scores"] == 2 * (weights + 41 * 32)
    assert parts["attention scores"] == 3 * 2 * 2 * 6 * 32


def test_nominal_peak_states_its_formula():
    peak = nominal_cpu_peak_flops()
    assert "FMA" in peak["formula"]
    assert peak["per_core"] is None or peak["per_core"] > 1e9


def _results(shift_bucketed: float, bf16_seconds: float):
    results = {}
    for name in TRAINING_VARIANTS:
        for kind, base in (("baseline", 10.0), ("fusion", 6.0)):
            for seed, noise in zip((1, 2, 3), (-0.2, 0.0, 0.2)):
                ppl = base + noise + (shift_bucketed if name != next(iter(TRAINING_VARIANTS)) else 0.0)
                seconds = bf16_seconds if "bf16" in name else 10.0
                results[name, kind, seed] = {"ppl": ppl, "ppl_seen_only": ppl - 1, "train_seconds": seconds,
                                             "train_cpu_seconds": seconds}
    return results


def test_a_variant_inside_the_reference_interval_is_within_and_a_shifted_one_is_not():
    same = summarise_training_variants(_results(0.1, bf16_seconds=12.0), "smoke")
    bf16 = same["variants"]["bf16 autocast, shuffled batches"]
    assert bf16["within_seed_intervals"] and not bf16["faster"] and bf16["cpu_time_ratio"] == pytest.approx(1.2)
    float32_here = {"profile": "cpu", "autocast": "float32", "cpu_computes_bf16": False, "SEMLM_CPU_BF16": "auto"}
    decision = bf16_decision(same, float32_here)
    assert "off in the cpu profile (this CPU has no native bf16" in decision and "slower" in decision
    shifted = summarise_training_variants(_results(2.0, bf16_seconds=5.0), "smoke")
    bf16 = shifted["variants"]["bf16 autocast, shuffled batches"]
    assert bf16["faster"] and not bf16["within_seed_intervals"]
    assert "outside" in bf16_decision(shifted, float32_here)


def test_missing_runs_are_named():
    results = _results(0.0, 10.0)
    results.pop(next(iter(results)))
    with pytest.raises(ValueError, match="missing 1 runs"):
        summarise_training_variants(results, "smoke")


def test_the_benchmark_reuses_the_builds_models_and_says_so(tmp_path, monkeypatch):
    from semlm.book.bench import run_benchmark

    monkeypatch.setenv("SEMLM_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("SEMLM_METRICS_DIR", str(tmp_path / "metrics"))
    first = run_benchmark("smoke", workers=1, progress=False, variants_profile=None, sparse_decoding=False)
    assert first["training_source"] == "trained here"
    second = run_benchmark("smoke", workers=1, progress=False, variants_profile=None, sparse_decoding=False)
    assert second["training_source"].startswith("the build's run cache")
    assert second["train_seconds"] == first["train_seconds"]
    assert second["wall_seconds"] >= max(second["train_seconds"].values())
    fresh = run_benchmark("smoke", workers=1, progress=False, variants_profile=None, fresh=True, sparse_decoding=False)
    assert fresh["training_source"] == "trained here from an empty run folder"


def test_the_bf16_decision_names_the_state_its_reason_and_the_recorded_evidence():
    same = summarise_training_variants(_results(0.1, bf16_seconds=6.5), "smoke")
    recorded = {**summarise_training_variants(_results(0.1, bf16_seconds=6.5), "cpu"),
                "folder": "book/recorded/cpu-bf16-variants", "date": "2026-11-25", "commit": "abc1234"}
    on = {"profile": "cpu", "autocast": "bf16", "cpu_computes_bf16": True, "SEMLM_CPU_BF16": "auto"}
    decision = bf16_decision(same, on, recorded)
    assert decision.startswith("bf16 autocast for paper A is on in the cpu profile (this CPU computes bf16 natively)")
    assert "at the cpu scale it took 0.65 x the float32 training CPU time (faster)" in decision
    assert "book/recorded/cpu-bf16-variants, 2026-11-25, abc1234" in decision
    assert "this build's check at the smoke scale" in decision
    forced = bf16_decision(None, {**on, "autocast": "float32", "SEMLM_CPU_BF16": "off"})
    assert forced == "bf16 autocast for paper A is off in the cpu profile (SEMLM_CPU_BF16=off)"
    paper = {**on, "profile": "paper", "autocast": "float32"}
    assert "off in the paper profile (float32)" in bf16_decision(None, paper)


def test_bf16_step_time_is_measured_in_a_process_per_onednn_instruction_set_cap():
    from semlm.fusion.bench import emulated_bf16_step_ratios

    timings = emulated_bf16_step_ratios("smoke", isas=("ALL", "AVX2"))
    assert list(timings) == ["ALL", "AVX2"]
    for timing in timings.values():
        assert timing["float32_ms"] > 0 and timing["bf16_ms"] > 0
        assert timing["ratio"] == pytest.approx(timing["bf16_ms"] / timing["float32_ms"])


def test_a_failing_timing_process_is_reported_with_its_cap_and_last_error_line(monkeypatch):
    from semlm.fusion.bench import emulated_bf16_step_ratios

    monkeypatch.setenv("SEMLM_CPU_BF16", "bad")  # makes the child's profile fail: its last line is reported
    with pytest.raises(RuntimeError, match="timing bf16 under ONEDNN_MAX_CPU_ISA=ALL failed: ValueError: SEMLM"):
        emulated_bf16_step_ratios("cpu", isas=("ALL",))


def test_training_variants_train_through_the_run_cache_and_keep_their_recorded_times(tmp_path):
    from semlm.fusion.bench import TRAINING_VARIANT_RUNS, compare_training_variants
    from semlm.fusion.profiles import synthetic_profile

    variants = {"fp32": (0, None), "bucketed": (50, None)}
    first = compare_training_variants(synthetic_profile("smoke"), (111, 112), ("baseline",), workers=1,
                                      variants=variants, runs_dir=tmp_path)
    folders = sorted(p.parent.parent.name for p in (tmp_path / TRAINING_VARIANT_RUNS.name).rglob("record.json"))
    assert folders == ["bucket0-float32"] * 2 + ["bucket50-float32"] * 2
    again = compare_training_variants(synthetic_profile("smoke"), (111, 112), ("baseline",), workers=1,
                                      variants=variants, runs_dir=tmp_path)
    assert again == first  # loaded: the CPU and wall seconds the runs' histories recorded when they trained
    row = first["variants"]["bucketed"]["baseline"]
    assert row["train_cpu_seconds"] > 0 and row["ppl"]["mean"] != first["variants"]["fp32"]["baseline"]["ppl"]["mean"]
