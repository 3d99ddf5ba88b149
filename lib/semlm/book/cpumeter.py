"""How busy a chapter keeps the machine: CPU seconds of this process's tree ÷ (wall seconds × cores).

The runner waits for none of the worker processes a chapter's kernel starts, so ``getrusage(RUSAGE_CHILDREN)``
misses their time: :class:`CpuMeter` samples the process tree with psutil every ``interval`` seconds and keeps each
process's (pid and start time) largest user + system CPU time; what a process spends after its last sample is not
counted, so utilisation errs low.
"""

from __future__ import annotations

import os
import threading
import time

import psutil


class CpuMeter:
    """``with CpuMeter() as meter: ...`` then ``meter.cpu_seconds``, ``meter.wall_seconds``, ``meter.utilisation``;
    ``include_self`` counts this process's own CPU time too (the runner itself: staging, HTML)."""

    def __init__(self, interval: float = 0.5, include_self: bool = False):
        if interval <= 0:
            raise ValueError(f"interval must be > 0 seconds, got {interval}")
        self.interval, self.include_self = interval, include_self
        # the cores this process may run on (its CPU affinity; os.cpu_count() where that is unknown)
        self.cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        #: (pid, start time) -> (the process, the most user + system CPU seconds a sample saw)
        self._seen: dict[tuple[int, float], tuple[psutil.Process, float]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="cpu-meter", daemon=True)
        self._root = psutil.Process()
        self._start = self._end = self.cpu_seconds = 0.0

    def _sample(self) -> None:
        try:
            processes = self._root.children(recursive=True) + ([self._root] if self.include_self else [])
        except psutil.Error:
            return
        for process in processes:
            try:
                with process.oneshot():
                    key = (process.pid, process.create_time())
                    times = process.cpu_times()
                _, seen = self._seen.get(key, (process, 0.0))
                self._seen[key] = (process, max(seen, times.user + times.system))
            except psutil.Error:  # it ended between listing and reading
                continue

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def __enter__(self) -> "CpuMeter":
        self._start = time.perf_counter()
        self._sample()
        # processes already running (this one too, with include_self): only their CPU from now on counts
        self._baseline = {key: seconds for key, (_, seconds) in self._seen.items()}
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._sample()
        self._stop.set()
        self._thread.join()
        self._end = time.perf_counter()
        self.cpu_seconds = sum(seconds - self._baseline.get(key, 0.0) for key, (_, seconds) in self._seen.items())

    def started_processes(self) -> list[psutil.Process]:
        """The processes below this one that started while the meter ran (seen in a sample) and are still alive,
        orphans re-parented away included; psutil keeps each one's start time, so a reused pid is never one."""
        return [process for key, (process, _) in self._seen.items()
                if key not in self._baseline and process.is_running()]

    @property
    def wall_seconds(self) -> float:
        return (self._end or time.perf_counter()) - self._start

    def summary(self) -> dict:
        """``{cpu_seconds, cores, utilisation}``, rounded, for a JSON record."""
        return {"cpu_seconds": round(self.cpu_seconds, 1), "cores": self.cores,
                "utilisation": None if self.utilisation is None else round(self.utilisation, 3)}

    @property
    def utilisation(self) -> float | None:
        """CPU seconds ÷ (wall seconds × cores): 1.0 keeps every core busy the whole time."""
        wall = self.wall_seconds
        return self.cpu_seconds / (wall * self.cores) if wall > 0 else None
