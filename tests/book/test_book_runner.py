"""The book runner's fast paths: usage errors answer at once, on one line, with exit status 2,
before anything is executed or written. Building the book is tested elsewhere (slow)."""

import os
import re
import subprocess

import pytest
import yaml

from semlm.book import runner as book
from semlm.data.paths import REPO_ROOT


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    return err.strip()


@pytest.fixture
def fake_notebooks(tmp_path, monkeypatch):
    """A notebooks/ folder with two chapters and two files that are not chapters."""
    folder = tmp_path / "notebooks"
    folder.mkdir()
    for name in ("02_beta.py", "01_alpha.py", "01_alpha.ipynb", "notes.md"):
        (folder / name).write_text("# %%\n")
    monkeypatch.setattr(book, "NOTEBOOKS_DIR", folder)
    return folder


def test_unknown_profile_exits_2_with_one_line_listing_profiles(capsys, tmp_path):
    assert book.main(["run", "--profile", "huge", "--build-dir", str(tmp_path / "build")]) == 2
    assert one_error_line(capsys) == "error: unknown profile 'huge'; choose one of: smoke, cpu, paper"
    assert not (tmp_path / "build").exists()


@pytest.mark.parametrize("command", [["run", "--profile", "cpu"], ["plan", "--profile", "cpu"]])
def test_a_bad_cpu_bf16_setting_exits_2_before_anything_runs(command, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("SEMLM_CPU_BF16", "yes")
    args = command + (["--build-dir", str(tmp_path / "build")] if command[0] == "run" else [])
    assert book.main(args) == 2
    assert one_error_line(capsys) == "error: SEMLM_CPU_BF16='yes' is not understood; set it to one of: auto, off (or unset it)"
    assert not (tmp_path / "build").exists()


def test_unknown_chapter_exits_2_with_one_line_listing_chapters(capsys, tmp_path):
    assert book.main(["run", "--profile", "smoke", "--only", "99_nope", "--build-dir", str(tmp_path / "build")]) == 2
    line = one_error_line(capsys)
    assert line.startswith("error: unknown chapter '99_nope'; choose one of: ")
    assert all(chapter in line for chapter in book.list_chapters())
    assert not (tmp_path / "build").exists()


def test_unknown_chapter_message_names_every_chapter_in_order(capsys, fake_notebooks):
    assert book.main(["run", "--profile", "smoke", "--only", "03"]) == 2
    assert one_error_line(capsys) == "error: unknown chapter '03'; choose one of: 01_alpha, 02_beta"


def test_missing_profile_is_a_one_line_usage_error(capsys):
    assert book.main(["run"]) == 2
    assert "--profile" in one_error_line(capsys)


def test_list_chapters_is_the_sorted_stems_of_the_notebooks():
    assert book.list_chapters() == sorted(path.stem for path in (REPO_ROOT / "notebooks").glob("*.py"))


def test_list_chapters_sorts_and_ignores_other_files(fake_notebooks):
    assert book.list_chapters() == ["01_alpha", "02_beta"]


@pytest.mark.parametrize("name", ["01_alpha", "01_alpha.py", "notebooks/01_alpha.py", "01", "01_al"])
def test_only_accepts_a_name_file_name_or_unique_prefix(name, fake_notebooks):
    assert book.resolve_chapter(name, book.list_chapters()) == "01_alpha"


def test_an_ambiguous_prefix_is_a_usage_error(fake_notebooks):
    with pytest.raises(book.BookError, match=r"ambiguous chapter '0'; choose one of: 01_alpha, 02_beta") as info:
        book.resolve_chapter("0", book.list_chapters())
    assert info.value.exit_code == 2


def test_profiles_match_the_library():
    from semlm.profiles import PROFILES

    assert book.PROFILES == PROFILES


def test_chapter_environment_is_offline_absolute_and_restored(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SEMLM_DATA_DIR", "data-here")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    with book.chapter_environment(tmp_path / "build", allow_downloads=False):
        assert os.environ["SEMLM_DATA_DIR"] == str(tmp_path.resolve() / "data-here")
        assert os.environ["SEMLM_RUNS_DIR"] == str(tmp_path / "build" / "runs")
        assert os.environ["HF_HUB_OFFLINE"] == os.environ["TRANSFORMERS_OFFLINE"] == "1"
        assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"  # kernels beside the training processes do not spin
    assert os.environ["SEMLM_DATA_DIR"] == "data-here"
    assert "HF_HUB_OFFLINE" not in os.environ


def test_allow_downloads_leaves_the_hub_variables_alone(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with book.chapter_environment(tmp_path, allow_downloads=True):
        assert "HF_HUB_OFFLINE" not in os.environ


def test_a_failed_build_is_summarised_by_its_error_line():
    log = "Running Sphinx\nTraceback (most recent call last):\n  File \"x.py\", line 1\n" \
          "yaml.parser.ParserError: while parsing a flow node\n  in line 59\n    ^\n====\n"
    assert book._last_meaningful_line(log) == "yaml.parser.ParserError: while parsing a flow node"
    assert book._last_meaningful_line("Sphinx said no\n=====\n") == "Sphinx said no"


def test_the_html_loads_mathjax_from_the_installed_package():
    assert (book.mathjax_dir() / "tex-chtml.js").is_file()


def test_missing_data_directory_exits_2_before_running_anything(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("SEMLM_DATA_DIR", str(tmp_path / "no-such-dir"))
    assert book.main(["run", "--profile", "smoke", "--build-dir", str(tmp_path / "build")]) == 2
    line = one_error_line(capsys)
    assert line.startswith("error: SEMLM_DATA_DIR=") and "is not a directory" in line and "data/README.md" in line
    assert not (tmp_path / "build").exists()


SLEEPY_CHAPTER = '''# %% tags=["parameters"]
profile = "cpu"

# %%
import multiprocessing, os, pathlib, time
pool = multiprocessing.get_context("fork").Pool(2)
pool.map(abs, [1, 2])
pids = [worker.pid for worker in pool._pool] + [os.getpid()]
pathlib.Path(os.environ["SLEEPY_READY"]).write_text(" ".join(map(str, pids)))
time.sleep(300)
'''
RUNNER = '''import sys
from pathlib import Path
from semlm.book import runner as book
book.NOTEBOOKS_DIR = Path(sys.argv[1])
sys.exit(book.main(["run", "--profile", "smoke", "--only", "01_sleepy", "--build-dir", sys.argv[2]]))
'''


@pytest.mark.parametrize("signum", ["SIGTERM", "SIGINT", "SIGHUP"])
def test_killing_the_runner_leaves_no_kernel_or_worker_processes(tmp_path, signum):
    import signal
    import subprocess
    import sys
    import time

    import psutil

    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    (notebooks / "01_sleepy.py").write_text(SLEEPY_CHAPTER)
    ready = tmp_path / "ready"
    scratch = tmp_path / "tmp"  # the kernel's connection file goes here, and must not stay
    scratch.mkdir()
    env = {**os.environ, "SLEEPY_READY": str(ready), "OMP_NUM_THREADS": "1", "TMPDIR": str(scratch)}
    def as_in_a_terminal_job():
        # as a background job (`make test &`): the runner starts with SIGINT ignored, and must still stop on it;
        # SIGHUP as a terminal delivers it, whatever this test's own launcher did with it (nohup ignores it)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_DFL)

    runner = subprocess.Popen([sys.executable, "-c", RUNNER, str(notebooks), str(tmp_path / "build")], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              preexec_fn=as_in_a_terminal_job)
    try:
        deadline = time.monotonic() + 90
        while not ready.exists() or not ready.read_text().strip():
            assert runner.poll() is None, runner.communicate()
            assert time.monotonic() < deadline, "the chapter never started its workers"
            time.sleep(0.2)
        pids = [int(pid) for pid in ready.read_text().split()]
        assert len(pids) == 3 and all(psutil.pid_exists(pid) for pid in pids)
        runner.send_signal(getattr(signal, signum))
        _, err = runner.communicate(timeout=60)
    finally:
        if runner.poll() is None:
            runner.kill()
    assert runner.returncode == 130, err
    assert err.strip() == "error: interrupted; the kernel and its workers were stopped", err[-3000:]

    def alive(pid):
        try:
            return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    deadline = time.monotonic() + 10
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert [pid for pid in pids if alive(pid)] == [], "kernel or pool workers survived the runner"
    assert not list(scratch.glob("*.json")), f"connection files left: {list(scratch.iterdir())}"


def test_only_a_chapter_whose_data_is_missing_fails_at_once_naming_files_and_make_data(capsys, tmp_path, monkeypatch):
    empty = tmp_path / "empty-data"
    empty.mkdir()
    monkeypatch.setenv("SEMLM_DATA_DIR", str(empty))
    assert book.main(["run", "--profile", "smoke", "--only", "05_sst2", "--build-dir", str(tmp_path / "b")]) == 1
    line = one_error_line(capsys)
    assert "sst2/train.tsv" in line and "sst2/dev.tsv" in line and "make data" in line


def test_a_build_without_data_skips_those_chapters_and_says_why_in_the_html(capsys, tmp_path, monkeypatch,
                                                                             fake_notebooks):
    from semlm.data import fetch as data_fetch

    empty = tmp_path / "empty-data"
    empty.mkdir()
    monkeypatch.setenv("SEMLM_DATA_DIR", str(empty))
    monkeypatch.setitem(data_fetch.CHAPTER_DATA, "02_beta", ("wikitext-2/train.txt",))
    executed = []
    monkeypatch.setattr(book, "execute_chapter", lambda chapter, profile, build_dir: executed.append(chapter))
    monkeypatch.setattr(book, "ensure_kernel", lambda: None)
    build = tmp_path / "build"
    (build / "metrics").mkdir(parents=True)
    (build / "metrics" / "02_beta.json").write_text("{}")  # left by an earlier build that had the data
    book.run("smoke", build_dir=build, html=False)
    assert executed == ["01_alpha"]
    out = capsys.readouterr().out
    skip_lines = [line for line in out.splitlines() if line.startswith("skipping")]
    assert len(skip_lines) == 1 and "wikitext-2/train.txt" in skip_lines[0] and "make data" in skip_lines[0]
    assert not (build / "metrics" / "02_beta.json").exists() and (build / "metrics" / "02_beta.json.stale").exists()
    monkeypatch.setattr(book, "toc_pages",
                        lambda path: ("book/intro", ["book/intro", "notebooks/01_alpha", "notebooks/02_beta"]))
    source = book.stage_sources(build)
    page = (source / "notebooks" / "02_beta.md").read_text()
    assert "skipped" in page and "`wikitext-2/train.txt`" in page and "make data" in page
    intro = (source / "book" / "intro.md").read_text()
    assert "Chapters skipped in this build" in intro and "02_beta" in intro
    # once the data are there, the same build directory forgets the skip
    (empty / "wikitext-2").mkdir()
    (empty / "wikitext-2" / "train.txt").write_text("x")  # not the pinned release: refused unless allowed
    with pytest.raises(book.BookError, match="wikitext-2/train.txt in .* differs from the pinned release"):
        book.run("smoke", build_dir=build, html=False)
    book.run("smoke", build_dir=build, html=False, allow_modified_data=True)
    assert book.read_skipped(build) == {} and executed[-2:] == ["01_alpha", "02_beta"]


def test_the_executed_notebook_hides_the_injected_cell_and_shows_one_run_with_line(tmp_path):
    import nbformat

    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell('profile = "cpu"\nseed = 111', metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell('# Parameters\nprofile = "smoke"\n', metadata={"tags": ["injected-parameters"]}),
        nbformat.v4.new_code_cell("print(path)", outputs=[nbformat.v4.new_output(
            "stream", name="stdout", text=f"wrote {REPO_ROOT}/book/_build/metrics/x.json and {tmp_path}/b/runs\n")]),
    ])
    tidy = book.tidy_executed_notebook(notebook, tmp_path / "b")
    assert "remove-cell" in tidy.cells[1].metadata["tags"]
    assert tidy.cells[0].outputs[0]["text"] == "run with: profile=\"smoke\", seed=111\n"
    assert tidy.cells[2].outputs[0]["text"] == "wrote book/_build/metrics/x.json and <build dir>/runs\n"
    # tidying twice keeps one line
    assert len(book.tidy_executed_notebook(tidy, tmp_path / "b").cells[0].outputs) == 1


def test_published_notebooks_are_the_chapters_without_outputs_and_say_how_to_run_them(tmp_path, fake_notebooks):
    import nbformat

    (fake_notebooks / "01_alpha.py").write_text('# %% tags=["parameters"]\nprofile = "cpu"\n\n# %%\nprint(profile)\n')
    book.write_published_notebooks(tmp_path / "html", ["01_alpha"])
    notebook = nbformat.read(tmp_path / "html" / "notebooks" / "01_alpha.ipynb", as_version=4)
    assert notebook.cells[0].cell_type == "markdown" and "make lab" in notebook.cells[0].source
    assert "parameters" in notebook.cells[1].metadata["tags"]
    assert all(not cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code")
    assert notebook.metadata["kernelspec"]["name"] == "python3"


def test_manifest_says_per_chapter_which_models_were_trained_and_which_loaded(tmp_path):
    import json

    from semlm.book.runner import read_manifest, run_entry, update_manifest

    log = tmp_path / "ch.runs.jsonl"
    rows = [{"experiment": "semlm.fusion.synthetic_experiment:SYNTHETIC", "name": n, "seed": 1, "group": "causal", "status": s,
             "train_seconds": 1.0, "device": "cpu"} for n, s in (("baseline", "trained"), ("fusion", "loaded"))]
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    update_manifest(tmp_path, chapter="02_fusion_training", **run_entry("ok", 12.34, log, profile="smoke"))
    update_manifest(tmp_path, chapter="01_feature_bank", **run_entry("ok", 1.0, tmp_path / "absent.jsonl",
                                                                      profile="smoke"))
    manifest = read_manifest(tmp_path)["chapters"]
    assert list(manifest["02_fusion_training"]) == ["profile", "status", "seconds", "runs", "run_list"]
    assert manifest["02_fusion_training"]["seconds"] == 12.3
    assert manifest["02_fusion_training"]["runs"] == {"trained": 1, "resumed": 0, "loaded": 1}
    assert [r["status"] for r in manifest["02_fusion_training"]["run_list"]] == ["trained", "loaded"]
    assert manifest["01_feature_bank"]["runs"] == {"trained": 0, "resumed": 0, "loaded": 0}


def test_cpu_meter_counts_the_cpu_of_child_processes_and_not_idle_waiting():
    import subprocess
    import sys

    from semlm.book.cpumeter import CpuMeter

    busy = "import time\nt = time.process_time()\nwhile time.process_time() - t < 1.5: pass"
    with CpuMeter(interval=0.1) as meter:
        subprocess.run([sys.executable, "-c", busy], check=True)
    assert 1.2 <= meter.cpu_seconds <= meter.wall_seconds + 0.2
    assert 0 < meter.utilisation <= 1.0 / meter.cores + 0.1
    with CpuMeter(interval=0.1) as idle:
        subprocess.run([sys.executable, "-c", "import time; time.sleep(1.0)"], check=True)
    assert idle.cpu_seconds < 0.6


def test_cpu_meter_with_include_self_counts_this_process_from_entry_and_never_stops_it():
    import time

    from semlm.book.cpumeter import CpuMeter

    with CpuMeter(interval=0.1, include_self=True) as meter:
        start = time.process_time()
        while time.process_time() - start < 0.8:
            pass
    assert 0.6 <= meter.cpu_seconds <= meter.wall_seconds + 0.2  # not the CPU this process spent before entry
    assert meter.started_processes() == []


def test_the_build_record_has_total_wall_time_from_scratch_and_utilisation(tmp_path, monkeypatch, fake_notebooks):
    from semlm.book.runner import read_manifest

    monkeypatch.setattr(book, "execute_chapter", lambda chapter, profile, build_dir: None)
    monkeypatch.setattr(book, "ensure_kernel", lambda: None)
    book.run("smoke", only="01_alpha", build_dir=tmp_path, html=False)
    manifest = read_manifest(tmp_path)
    assert manifest["from_scratch"] is True and manifest["total_wall_seconds"] >= 0 and not manifest["complete"]
    assert manifest["chapters_run"] == ["01_alpha"] and manifest["cores"] >= 1 and "utilisation" in manifest
    assert {"profile", "status", "seconds", "cpu_seconds", "cores", "utilisation"} <= set(manifest["chapters"]["01_alpha"])
    (tmp_path / "runs" / "x").mkdir(parents=True)
    (tmp_path / "runs" / "x" / "model.safetensors").write_bytes(b"")
    book.run("smoke", only="01_alpha", build_dir=tmp_path, html=False)
    assert read_manifest(tmp_path)["from_scratch"] is False


def test_a_full_build_forgets_the_training_ahead_of_an_earlier_build(tmp_path, monkeypatch, fake_notebooks):
    from semlm.book.runner import read_manifest, start_training_ahead, update_manifest

    update_manifest(tmp_path, train_ahead={"status": "ok"}, cores=2)
    assert start_training_ahead("smoke", ["01_alpha"], tmp_path) is None
    assert read_manifest(tmp_path) == {"chapters": {}, "cores": 2}


def test_without_a_repository_url_no_button_or_notebook_points_at_a_repository(tmp_path):
    from semlm.book.runner import PUBLISHED_NOTE_NO_URL, staged_config

    config = yaml.safe_load((REPO_ROOT / "_config.yml").read_text())
    staged = staged_config({**config, "repository": {"url": ""}})
    assert not staged["html"]["use_repository_button"] and not staged["html"]["use_issues_button"]
    assert all(not value for key, value in staged["launch_buttons"].items() if key.endswith("_url"))
    assert "http" not in PUBLISHED_NOTE_NO_URL
    with_url = staged_config({**config, "repository": {"url": "https://example.org/book"}})
    assert with_url["launch_buttons"]["colab_url"] == config["launch_buttons"]["colab_url"]


def test_no_placeholder_repository_url_anywhere_in_the_repository():
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO_ROOT, capture_output=True, text=True).stdout.split()
    for name in tracked:
        path = REPO_ROOT / name
        if path.suffix in {".py", ".md", ".yml", ".toml", ".cfg", ".txt"} and path.is_file():
            assert "semlm/" + "semlm-book" not in path.read_text(errors="ignore"), name


def test_readme_has_no_placeholders():
    """Every shell block of the README runs as written: no ``<...>`` token for the reader to fill in."""
    import re

    readme = (REPO_ROOT / "README.md").read_text()
    blocks = re.findall(r"```(?:bash|sh|console)\n(.*?)```", readme, flags=re.S)
    assert blocks
    for block in blocks:
        for line in block.splitlines():
            command = line.split("#", 1)[0]
            assert not re.search(r"<[^<>\s][^<>]*>", command), f"placeholder in a README command: {line!r}"


def test_numpy_scalars_display_plainly_in_chapter_kernels_but_importing_semlm_patches_nothing(tmp_path):
    from pathlib import Path

    import numpy as np
    from IPython.core.interactiveshell import InteractiveShell

    import semlm

    assert "IPython" not in (Path(semlm.__file__).read_text())
    shell = InteractiveShell.instance()
    before = shell.display_formatter.format(np.float64(1.5))[0]["text/plain"]
    with book.chapter_environment(tmp_path, allow_downloads=False):
        startup = Path(os.environ["IPYTHONDIR"]) / "profile_default" / "startup" / "00-semlm-display.py"
    exec(startup.read_text(), {"get_ipython": lambda: shell})
    assert before == "np.float64(1.5)"
    assert shell.display_formatter.format(np.float64(1.5))[0]["text/plain"] == "1.5"
    assert shell.display_formatter.format(np.int64(3))[0]["text/plain"] == "3"


def test_a_student_build_leaves_out_every_solution_and_keeps_the_hints(tmp_path):
    import jupytext

    from semlm.book.runner import NOTEBOOKS_DIR, strip_solutions

    for path in sorted(NOTEBOOKS_DIR.glob("[0-9][0-9]_*.py")):
        notebook = jupytext.read(path)
        text = "\n".join(c.source for c in notebook.cells if c.cell_type == "markdown")
        solutions, hints = text.count("<summary>Solution</summary>"), text.count("<summary>Hint</summary>")
        assert strip_solutions(notebook) == solutions, path.name
        after = "\n".join(c.source for c in notebook.cells if c.cell_type == "markdown")
        assert "<summary>Solution</summary>" not in after and after.count("<summary>Hint</summary>") == hints, path.name
        assert after.count("<details>") == after.count("</details>") == hints, path.name  # the hints still close
    book.write_published_notebooks(tmp_path / "html", ["01_feature_bank"], solutions=False)
    published = (tmp_path / "html" / "notebooks" / "01_feature_bank.ipynb").read_text()
    assert "<summary>Solution" not in published and "<summary>Hint" in published


def test_hints_and_solutions_are_html_details_that_jupyterlab_renders_collapsed():
    """JupyterLab has no MyST: a ``:::{dropdown}`` would show as text there, ``<details>`` collapses in both.
    The blank line after the summary lets the markdown inside render (CommonMark ends the HTML block there)."""
    import jupytext

    from semlm.book.runner import NOTEBOOKS_DIR

    for path in sorted(NOTEBOOKS_DIR.glob("[0-1][0-9]_*.py")):  # the chapters (98 and 99 have no exercises)
        text = "\n".join(c.source for c in jupytext.read(path).cells if c.cell_type == "markdown")
        assert ":::{dropdown}" not in text, path.name
        opened = re.findall(r"^[ \t]*<details><summary>(\w+)</summary>\n(.*)$", text, re.M)
        assert opened and all(rest == "" for _, rest in opened), path.name
        assert len(opened) == text.count("</details>"), path.name


def test_a_student_build_stages_the_executed_notebooks_without_solutions_and_says_so(tmp_path):
    import nbformat

    solution = "<details><summary>Solution</summary>\n\nthe answer\n</details>\n"
    hint = "<details><summary>Hint</summary>\n\na nudge\n</details>\n"
    (tmp_path / "executed").mkdir()
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("1. Try.\n" + hint + solution)]),
                   tmp_path / "executed" / "01_feature_bank.ipynb")
    for solutions in (True, False):
        staged = nbformat.read(book.stage_sources(tmp_path, solutions) / "notebooks" / "01_feature_bank.ipynb", 4)
        text = "\n".join(cell.source for cell in staged.cells)
        assert ("the answer" in text) is solutions and "a nudge" in text
        assert (book.STUDENT_NOTE in text) is not solutions


def test_bad_command_lines_get_one_line_naming_the_subcommand_before_any_work(tmp_path, capsys):
    """Issue 48's rows 9-14: each a single error line, exit 2, and the hint names the subcommand that failed."""
    from semlm.book.runner import main

    bad = {("plan", "--profile", "smoke", "--train", "--workers", "0"): "`python -m semlm.book plan --help`",
           ("plan", "--profile", "bogus"): "`python -m semlm.book plan --help`",
           ("plan", "--profile", "smoke", "--chapters", "99"): "unknown chapter '99'",
           ("run", "--profile", "smoke", "--build-dir", str(tmp_path / "file")): "is a file, not a folder",
           ("export", str(tmp_path / "missing" / "run"), str(tmp_path / "out")): "does not exist"}
    (tmp_path / "file").write_text("")
    for argv, expected in bad.items():
        assert main(list(argv)) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: ") and expected in err[0], (argv, err)


def test_plan_takes_chapter_prefixes_as_run_only_does(capsys):
    from semlm.book.runner import main

    assert main(["plan", "--profile", "smoke", "--chapters", "06,04_leakage_audit.py"]) == 0
    listed = capsys.readouterr().out
    assert "06_idea_gating" in listed and "04_leakage_audit" in listed and "05_sst2" not in listed


def test_second_run_in_one_build_folder_waits(tmp_path, capsys):
    """One writer per build folder: while a run holds it, a second one refuses (--no-wait) naming the holder, or
    waits, saying so once, and goes on when the first is done."""
    import threading
    import time as clock

    from semlm.book.runner import BookError, build_lock, run

    build = tmp_path / "build"
    released = threading.Event()

    def first():
        with build_lock(build):
            released.wait(5)

    holder = threading.Thread(target=first)
    holder.start()
    while not (build / ".build.lock.pid").is_file():
        clock.sleep(0.01)
    try:
        with pytest.raises(BookError) as refused:
            run("smoke", only="01", build_dir=build, wait=False)
        assert refused.value.exit_code == 2 and "is being built by process" in str(refused.value)
        threading.Timer(0.3, released.set).start()
        started = clock.monotonic()
        with build_lock(build):
            waited = clock.monotonic() - started
        assert waited >= 0.2 and "waiting: " in capsys.readouterr().out
    finally:
        released.set()
        holder.join()
    assert not (build / ".build.lock.pid").exists()


def test_a_chapter_in_a_log_says_what_it_trained_and_that_it_is_still_running(tmp_path, capsys):
    """In a pipe (CI, nohup) papermill's bar does not show: a line per model from the run log, and a heartbeat."""
    import json
    import threading
    import time as clock

    from semlm.book.runner import _progress

    run_log = tmp_path / "04.runs.jsonl"
    stop = threading.Event()
    watcher = threading.Thread(target=_progress, args=("04_leakage_audit", run_log, clock.perf_counter(), stop, 0.2),
                               daemon=True)
    watcher.start()
    run_log.write_text(json.dumps({"name": "fusion", "seed": 111, "status": "trained", "train_seconds": 12.3}) + "\n")
    clock.sleep(0.6)
    with run_log.open("a") as log:  # written just before the chapter ends: still reported
        log.write(json.dumps({"name": "baseline", "seed": 112, "status": "loaded"}) + "\n")
    stop.set()
    watcher.join()
    out = capsys.readouterr().out
    assert "04_leakage_audit: trained fusion seed 111 (12 s)" in out
    assert "04_leakage_audit: loaded baseline seed 112" in out
    assert "04_leakage_audit: still running" in out and "models done" in out


def test_a_value_the_profile_changes_is_a_line_in_the_runners_log(tmp_path, monkeypatch, capfd):
    """smoke caps n_seeds: the chapter's notice reaches the kernel's own stderr (raw papermill's terminal) and the run
    log, from which the runner prints it in a log and keeps it in the manifest; run counts ignore it."""
    import json
    import threading
    import time as clock

    from semlm.book.chapter import Chapter
    from semlm.book.runner import _progress, run_entry

    run_log = tmp_path / "04.runs.jsonl"
    monkeypatch.setenv("SEMLM_RUN_LOG", str(run_log))
    Chapter("04_leakage_audit", "smoke", 111).notice("smoke profile: 3 seeds requested, 2 used")
    assert "04_leakage_audit: smoke profile: 3 seeds requested, 2 used" in capfd.readouterr().err
    with run_log.open("a") as log:
        log.write(json.dumps({"name": "fusion", "seed": 111, "status": "trained", "train_seconds": 1.0}) + "\n")
    entry = run_entry("ok", 1.0, run_log)
    assert entry["runs"]["trained"] == 1 and len(entry["run_list"]) == 1
    assert entry["notices"] == ["smoke profile: 3 seeds requested, 2 used"]
    stop = threading.Event()
    watcher = threading.Thread(target=_progress, args=("04_leakage_audit", run_log, clock.perf_counter(), stop, 0.2),
                               daemon=True)
    watcher.start()
    clock.sleep(0.5)
    stop.set()
    watcher.join()
    assert "  04_leakage_audit: smoke profile: 3 seeds requested, 2 used" in capfd.readouterr().out


def test_modified_data_is_refused_before_the_build_folder_is_made(tmp_path, monkeypatch):
    data = tmp_path / "data"
    (data / "wikitext-2").mkdir(parents=True)
    for name in ("train.txt", "valid.txt", "test.txt"):
        (data / "wikitext-2" / name).write_text("not the release")
    monkeypatch.setenv("SEMLM_DATA_DIR", str(data))
    with pytest.raises(book.BookError, match=r"wikitext-2/train.txt, .* differ from the pinned release.*make data"):
        book.run("smoke", only="06", build_dir=tmp_path / "build", html=False)
    assert not (tmp_path / "build").exists()


def test_a_run_no_chapter_asks_for_is_marked_unused():
    def run(name, status="loaded", model=None):
        return {"experiment": "e", "group": "g", "name": name, "seed": 1, "status": status,
                **({"model": model} if model else {})}

    manifest = {"train_ahead": {"run_list": [run("a", "trained"), run("b", "trained"), run("orphan", "trained")]},
                "chapters": {"02_x": {"run_list": [run("a"), run("c", "trained")]},
                             "04_y": {"run_list": [run("a"), run("b")]},
                             "10_z": {"run_list": [run("shared", model=["e", "g", "c", 1])]}}}
    unused = book.mark_used(manifest)
    assert [r["name"] for r in unused] == ["orphan"]
    ahead = {r["name"]: r["used_by"] for r in manifest["train_ahead"]["run_list"]}
    assert ahead == {"a": ["02_x", "04_y"], "b": ["04_y"], "orphan": []}
    # a chapter's own model, and one another chapter shares under its owner's name
    assert manifest["chapters"]["02_x"]["run_list"][1]["used_by"] == ["02_x", "10_z"]
