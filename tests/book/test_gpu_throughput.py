"""The GPU throughput benchmark's pieces that run without a GPU (the timings themselves need one)."""

from types import SimpleNamespace

import pytest
from torch.autograd import DeviceType

from semlm.book import gpu_throughput
from semlm.book.gpu_throughput import gpu_busy_seconds


def event(start_us, end_us, device=DeviceType.CUDA, annotation=False):
    return SimpleNamespace(time_range=SimpleNamespace(start=start_us, end=end_us), device_type=device,
                           is_user_annotation=annotation)


def test_gpu_busy_time_is_the_union_of_kernel_intervals_only():
    events = [event(0, 100), event(50, 150),            # overlapping kernels (two streams): 0-150 once
              event(300, 400),                          # after an idle gap
              event(0, 1000, device=DeviceType.CPU),     # the host op that launched them: not device time
              event(0, 900, annotation=True)]            # a GPU-side annotation spanning kernels: not a kernel
    assert gpu_busy_seconds(events) == pytest.approx(250e-6)
    assert gpu_busy_seconds([]) == 0.0
    assert gpu_busy_seconds([event(0, 10), event(2, 5)]) == pytest.approx(10e-6)  # nested: counted once


def test_a_padded_vocabulary_applies_the_same_update_on_the_cpu(monkeypatch):
    """The update check of the benchmark, run on the CPU (compilation is CUDA-only, so only the padding acts):
    one micro-batch with the vocabulary padded to 64 rows against the profile's micro-batches, extra rows cut."""
    monkeypatch.setattr(gpu_throughput, "DEVICE", "cpu")
    checks = gpu_throughput.same_update_check("smoke", settings=["compiled with CUDA graphs, padded"])
    assert set(checks) == {"compiled with CUDA graphs, padded (bf16)", "compiled with CUDA graphs, padded (float32)"}
    assert all(value < 1e-5 for value in checks.values()), checks
