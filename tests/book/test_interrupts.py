"""No process outlives an interrupted run, and nothing half-done is ever served (issue 48).

A small chapter trains two of paper A's synthetic models (long enough to be caught mid-training) in a pool of two
workers, through the real runner, kernel and run cache. It is interrupted at three points, by four signals:

* after the first run record is written: SIGHUP to the runner (the terminal closed);
* during a run, once its first checkpoint exists: SIGTERM to the runner, and, in another build, SIGKILL to one
  training worker (the kernel sees its pool break, and the chapter fails);
* during the HTML build: SIGINT to the runner.

Each time: no process of the run is left 5 s later, no run folder holds a record without its finished weights
(a half-trained run is never served from the cache), no half-built HTML is swapped in, and a rerun's metrics equal
those of a run that was never interrupted.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

SLOW_CHAPTER = '''# %% tags=["parameters"]
profile = "smoke"
seed = 111

# %%
from dataclasses import replace

from semlm import book
from semlm.core import runs
from semlm.fusion.profiles import synthetic_profile
from semlm.fusion.synthetic_experiment import SYNTHETIC, spec_for

chapter = book.open("01_slow", profile=profile, seed=seed)
specs = []
for offset in (0, 1):
    config = synthetic_profile("smoke", seed=seed + offset)
    config = replace(config, train=replace(config.train, epochs=40))
    specs.append(spec_for(config, "fusion"))
records = runs.run_many(SYNTHETIC, specs, runs.RunContext(profile, workers=2, progress=False))
chapter.close({"runs": {f"seed{r.seed}": r.metrics.to_dict() for r in records}})
'''

RUNNER = '''import sys
from pathlib import Path
from semlm.book import runner as book
book.NOTEBOOKS_DIR = Path(sys.argv[1])
sys.exit(book.main(["run", "--profile", "smoke", "--only", "01_slow", "--build-dir", sys.argv[2], *sys.argv[3:]]))
'''


@pytest.fixture(scope="module")
def chapter_dir(tmp_path_factory):
    notebooks = tmp_path_factory.mktemp("notebooks")
    (notebooks / "01_slow.py").write_text(SLOW_CHAPTER)
    return notebooks


def _environment(scratch: Path) -> dict:
    return {**os.environ, "OMP_NUM_THREADS": "1", "TMPDIR": str(scratch)}


def _start(chapter_dir: Path, build: Path, *extra: str) -> subprocess.Popen:
    scratch = build.with_name(build.name + "-tmp")
    scratch.mkdir(parents=True, exist_ok=True)
    # SIGHUP as a terminal delivers it, whatever this test's own launcher did with it (nohup ignores it)
    return subprocess.Popen([sys.executable, "-c", RUNNER, str(chapter_dir), str(build), *extra],
                            env=_environment(scratch), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL))


def _wait_for(runner: subprocess.Popen, condition, what: str, timeout: float = 120.0):
    deadline = time.monotonic() + timeout
    while True:
        found = condition()
        if found:
            return found
        assert runner.poll() is None, f"the run ended before {what}: {runner.communicate()[1][-2000:]}"
        assert time.monotonic() < deadline, f"never reached: {what}"
        time.sleep(0.02)


def _family(runner: subprocess.Popen) -> list[psutil.Process]:
    try:
        return psutil.Process(runner.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _alive(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _building_html(runner: subprocess.Popen) -> bool:
    for process in _family(runner):
        try:
            if "jupyter-book" in " ".join(process.cmdline()):
                return True
        except psutil.Error:  # ended (or a zombie) while we looked
            continue
    return False


def _found(build: Path, pattern: str) -> list[Path]:
    try:
        return sorted((build / "runs").rglob(pattern))
    except FileNotFoundError:  # a folder renamed while we walked (a checkpoint swapped in): look again
        return []


def _records(build: Path) -> list[Path]:
    return _found(build, "record.json")


def _checkpoints(build: Path) -> list[Path]:
    return _found(build, "checkpoint/model.safetensors")


def _workers(runner: subprocess.Popen) -> list[psutil.Process]:
    """The kernel's forked training workers: processes whose parent is a child of the runner (the kernel)."""
    kernels = {child.pid for child in psutil.Process(runner.pid).children()}
    return [process for process in _family(runner) if process.ppid() in kernels]


def _metrics(build: Path) -> dict:
    return json.loads((build / "metrics" / "01_slow.json").read_text())["runs"]


def _finish(runner: subprocess.Popen, family: list[psutil.Process]) -> tuple[int, str]:
    try:
        _, err = runner.communicate(timeout=90)
    finally:
        if runner.poll() is None:
            runner.kill()
    time.sleep(5)
    left = [process.pid for process in family if _alive(process)]
    assert left == [], f"processes of the run outlived it: {left}"
    return runner.returncode, err


def _nothing_half_done(build: Path) -> None:
    for record in _records(build):  # a record is written only once the run is finished
        assert (record.parent / "train" / "final" / "model.safetensors").is_file(), record
    assert not (build / "html").exists(), "a half-built book was swapped in"
    scratch = build.with_name(build.name + "-tmp")
    assert not list(scratch.glob("*.json")), f"kernel connection files left: {list(scratch.iterdir())}"


def _rerun(chapter_dir: Path, build: Path) -> dict:
    runner = _start(chapter_dir, build)
    code, err = _finish(runner, [])
    assert code == 0, err[-2000:]
    return _metrics(build)


@pytest.mark.slow
def test_no_process_outlives_an_interrupted_run(chapter_dir, tmp_path):
    clean = _rerun(chapter_dir, tmp_path / "uninterrupted")
    assert sorted(clean) == ["seed111", "seed112"]

    cases = {  # name: (what to wait for, whom to signal, the signal, the expected exit code)
        "record-sighup": (_records, "runner", signal.SIGHUP, 130),
        "checkpoint-sigterm": (_checkpoints, "runner", signal.SIGTERM, 130),
        "checkpoint-sigkill-worker": (_checkpoints, "worker", signal.SIGKILL, 1),
        "html-sigint": (None, "runner", signal.SIGINT, 130),
    }
    for name, (point, target, signum, expected) in cases.items():
        build = tmp_path / name
        runner = _start(chapter_dir, build, *(["--html"] if point is None else []))
        if point is None:  # the HTML build: jupyter-book runs below the runner
            _wait_for(runner, lambda: _building_html(runner), "the HTML build")
        else:
            _wait_for(runner, lambda: point(build), point.__name__.strip("_"))
        family = _family(runner)
        if target == "runner":
            runner.send_signal(signum)
        else:
            os.kill(_wait_for(runner, lambda: _workers(runner), "the workers")[0].pid, signum)
        code, err = _finish(runner, family)
        assert code == expected, f"{name}: exit {code}: {err[-2000:]}"
        lines = [line for line in err.splitlines() if line.strip()]
        if expected == 130:
            assert lines == ["error: interrupted; the kernel and its workers were stopped"], f"{name}: {err[-2000:]}"
        else:
            assert lines and lines[-1].startswith("error: "), f"{name}: {err[-2000:]}"
        _nothing_half_done(build)
        assert _rerun(chapter_dir, build) == clean, name
        done = json.loads((build / "manifest.json").read_text())["chapters"]["01_slow"]["runs"]
        if point is _records:  # the finished run is loaded, not trained again
            assert done["loaded"] >= 1, (name, done)
        elif point is _checkpoints:  # the interrupted run resumed from its checkpoint
            assert done["resumed"] >= 1, (name, done)
