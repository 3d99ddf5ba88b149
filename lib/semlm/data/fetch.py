"""Get the real datasets into the layout the loaders read, and check them against pinned hashes.

    python -m semlm.data fetch  [--data-dir D] [--only FOLDER ...]   # network: Hugging Face hub
    python -m semlm.data verify [--data-dir D]                       # offline: SHA-256 of every file

``make data`` runs ``fetch``. Every file's SHA-256 is committed in ``semlm/data/checksums.sha256``
(``sha256sum -c`` format, computed from the copies the book was built with); ``fetch`` writes a
file only through a temporary name and keeps it only when its hash matches, so a half-written
or different file never takes the place of a good one. ``verify`` reads nothing from the
network and names the fix for every missing or corrupt file.

The files are rebuilt from the hub with ``datasets``, written byte for byte in the layout of
the original releases (GLUE's ``sentence<TAB>label`` TSV, PTB trees one per line, WikiText's
`` \\n`` blank lines). The FineWeb-Edu sample is a fixed 281-document draw that the hub cannot
re-create (its stream order changes); it is a file of a public GitHub repository at a pinned
commit, fetched from there and checked against the same kind of hash.

:data:`CHAPTER_DATA` says which files each chapter reads; the book runner and the tests use
it to skip what cannot run, with one line naming the missing files and ``make data``.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

from semlm.data.paths import data_dir

CHECKSUMS = Path(__file__).with_name("checksums.sha256")  # package data: works outside the repository too
FIX = "run `make data` (python -m semlm.data fetch) or set SEMLM_DATA_DIR to a folder that has it"

_WIKITEXT2 = ("wikitext-2/train.txt", "wikitext-2/valid.txt", "wikitext-2/test.txt")
#: The data files each chapter reads (chapters not listed read none). Optional files
#: (``sst-phrases``) are left out: the chapter runs without them and says so.
CHAPTER_DATA: dict[str, tuple[str, ...]] = {
    "05_sst2": ("sst2/train.tsv", "sst2/dev.tsv"),
    "06_idea_gating": _WIKITEXT2,
    "07_xray_and_sweeps": _WIKITEXT2,
    "08_lora_4bit_idea_gating": (*_WIKITEXT2, "fineweb-edu-sample/fineweb_edu.txt"),
}

FINEWEB_COMMIT = "5ee83f7be7f3fc9b46920fd72a08cd29854cd9e7"
FINEWEB_URL = (f"https://raw.githubusercontent.com/Rahulrayy/attention-sinks-quant/{FINEWEB_COMMIT}"
               "/data/fineweb_edu.txt")


# --- writers: hub rows -> the bytes of the original release -------------------------------------


def glue_tsv(rows: Iterable[dict], test: bool = False) -> bytes:
    """GLUE SST-2: ``sentence<TAB>label`` rows (or ``index<TAB>sentence`` for the unlabelled test split).

    The sentences are written as the hub stores them (lower-cased, PTB-tokenised, with GLUE's
    trailing space); the hub's test labels (-1) are dropped as in GLUE's own test file.
    """
    if test:
        lines = ["index\tsentence\n"] + [f"{row['idx']}\t{row['sentence']}\n" for row in rows]
    else:
        lines = ["sentence\tlabel\n"] + [f"{row['sentence']}\t{int(row['label'])}\n" for row in rows]
    return "".join(lines).encode("utf-8")


def ptb_trees(rows: Iterable[dict]) -> bytes:
    """SST phrase trees: one PTB-format tree per line (the ``ptb_tree`` column of ``stanfordnlp/sst``, config ``ptb``)."""
    return "".join(f"{row['ptb_tree'].strip()}\n" for row in rows).encode("utf-8")


def wikitext_lines(rows: Iterable[dict], newline: str = "\n") -> bytes:
    """WikiText as released: the hub keeps each line with its newline and turns a blank line
    (`` \\n`` in the release) into ``""``; undo that, ending lines with ``newline``."""
    out = []
    for row in rows:
        text = row["text"]
        out.append(" \n" if not text else text if text.endswith("\n") else text + "\n")
    return "".join(out).replace("\n", newline).encode("utf-8")


# --- what each folder holds and where it comes from -------------------------------------------------


Loader = Callable[..., object]


@dataclass(frozen=True)
class Source:
    """One data folder: its files, where they come from, and how to write them."""

    folder: str
    files: tuple[str, ...]
    origin: str                                   # printed by fetch and verify
    hub: tuple[str, str | None] | None = None     # (repository, config) for datasets.load_dataset
    splits: dict[str, str] = field(default_factory=dict)   # file name -> hub split
    write: Callable[[str, list], bytes] | None = None      # (file name, rows) -> bytes
    url: str | None = None                        # a plain download (no hub copy)


SOURCES: dict[str, Source] = {s.folder: s for s in (
    Source("sst2", ("train.tsv", "dev.tsv", "test.tsv"),
           "GLUE SST-2 (Socher et al. 2013; Wang et al. 2018), hub nyu-mll/glue config sst2",
           hub=("nyu-mll/glue", "sst2"), splits={"train.tsv": "train", "dev.tsv": "validation", "test.tsv": "test"},
           write=lambda name, rows: glue_tsv(rows, test=name == "test.tsv")),
    Source("sst-phrases", ("train.txt", "dev.txt", "test.txt"),
           "Stanford Sentiment Treebank PTB trees (Socher et al. 2013), hub stanfordnlp/sst config ptb",
           hub=("stanfordnlp/sst", "ptb"), splits={"train.txt": "train", "dev.txt": "validation", "test.txt": "test"},
           write=lambda name, rows: ptb_trees(rows)),
    Source("wikitext-2", ("train.txt", "valid.txt", "test.txt"),
           "WikiText-2 v1, tokenised (Merity et al. 2016), hub Salesforce/wikitext config wikitext-2-v1",
           hub=("Salesforce/wikitext", "wikitext-2-v1"),
           splits={"train.txt": "train", "valid.txt": "validation", "test.txt": "test"},
           write=lambda name, rows: wikitext_lines(rows)),
    Source("wikitext-2-raw", ("wiki.valid.raw", "wiki.test.raw"),
           "WikiText-2 raw v1 (Merity et al. 2016), hub Salesforce/wikitext config wikitext-2-raw-v1, CRLF line endings",
           hub=("Salesforce/wikitext", "wikitext-2-raw-v1"),
           splits={"wiki.valid.raw": "validation", "wiki.test.raw": "test"},
           write=lambda name, rows: wikitext_lines(rows, newline="\r\n")),
    Source("fineweb-edu-sample", ("fineweb_edu.txt",),
           "281 FineWeb-Edu documents (HuggingFaceFW/fineweb-edu, sample-10BT, ODC-By 1.0) as committed in "
           f"github.com/Rahulrayy/attention-sinks-quant (data/fineweb_edu.txt, commit {FINEWEB_COMMIT[:12]}); "
           "not re-creatable from the hub's stream",
           url=FINEWEB_URL),
)}


def read_checksums(path: str | Path | None = None) -> dict[str, str]:
    """``{"folder/file": sha256}`` from a ``sha256sum``-format file (default: ``semlm/data/checksums.sha256``)."""
    path = Path(path) if path is not None else CHECKSUMS
    if not path.is_file():
        raise FileNotFoundError(f"missing {path}; it is part of the repository (reinstall semlm, or git checkout lib/semlm/data/checksums.sha256)")
    sums = {}
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        digest, _, name = line.partition("  ")
        if len(digest) != 64 or not name:
            raise ValueError(f"{path}:{number}: expected '<sha256>  <folder/file>', got {line!r}")
        sums[name.strip()] = digest.lower()
    return sums


def sha256_of(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# --- verify -----------------------------------------------------------------------------------


@dataclass
class FileStatus:
    name: str          # folder/file
    state: str         # "ok", "missing", "corrupt"
    origin: str
    optional: bool
    detail: str = ""

    def line(self) -> str:
        if self.state == "ok":
            return f"ok       {self.name}  <- {self.origin}"
        return f"{self.state:8} {self.name}{' (optional)' if self.optional else ''}: {self.detail}"


def verify(root: str | Path | None = None, checksums: dict[str, str] | None = None) -> list[FileStatus]:
    """The state of every pinned file under ``root`` (default: :func:`semlm.data.paths.data_dir`); no network."""
    root = Path(root) if root is not None else data_dir()
    checksums = read_checksums() if checksums is None else checksums
    statuses = []
    for name, expected in checksums.items():
        origin = getattr(SOURCES.get(name.split("/", 1)[0]), "origin", "unknown source")
        # optional: a file no chapter needs in order to run (``sst-phrases`` only adds capitalised words to chapter 5)
        optional = not any(name in files for files in CHAPTER_DATA.values())
        actual = sha256_of(root / name) if (root / name).is_file() else None
        if actual is None:
            statuses.append(FileStatus(name, "missing", origin, optional, f"not in {root}; {FIX}"))
        elif actual != expected:
            statuses.append(FileStatus(name, "corrupt", origin, optional,
                                       f"sha256 {actual[:12]}… differs from the pinned {expected[:12]}…; delete it "
                                       f"and run `make data` (the file is not the release the book uses)"))
        else:
            statuses.append(FileStatus(name, "ok", origin, optional))
    return statuses


def missing_files(files: Iterable[str], root: str | Path | None = None) -> list[str]:
    """Those of ``files`` (``folder/file``) not present under ``root``; presence only (cheap)."""
    root = Path(root) if root is not None else data_dir()
    return [name for name in files if not (root / name).is_file()]


def missing_for_chapters(chapters: Sequence[str], root: str | Path | None = None) -> dict[str, list[str]]:
    """``{chapter: [missing files]}`` for the chapters of ``chapters`` that cannot run."""
    return {chapter: missing for chapter in chapters if (missing := missing_files(CHAPTER_DATA.get(chapter, ()), root))}


def differing_for_chapters(chapters: Sequence[str], root: str | Path | None = None,
                           checksums: dict[str, str] | None = None) -> list[str]:
    """The files the ``chapters`` read that are present but whose SHA-256 differs from the pinned one."""
    root = Path(root) if root is not None else data_dir()
    checksums = read_checksums() if checksums is None else checksums
    names = dict.fromkeys(name for chapter in chapters for name in CHAPTER_DATA.get(chapter, ()))
    return [name for name in names
            if (root / name).is_file() and name in checksums and sha256_of(root / name) != checksums[name]]


# --- fetch ------------------------------------------------------------------------------------


HUB_URL = "https://huggingface.co"


def _load_hub(repository: str, config: str | None, split: str):
    """The hub rows of one split, quietly: no progress bars, and no warning per retry (one failure,
    one line, printed by :func:`fetch`)."""
    import logging

    import datasets

    datasets.disable_progress_bars()
    for name in ("datasets", "huggingface_hub", "fsspec", "urllib3"):
        logging.getLogger(name).setLevel(logging.ERROR)
    return datasets.load_dataset(repository, config, split=split)


def reachable(url: str, timeout: float = 5.0) -> str:
    """``""`` if ``url``'s host answers within ``timeout`` seconds, else the reason in a few words."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    try:
        with urllib.request.urlopen(f"{parts.scheme}://{parts.netloc}/", timeout=timeout):  # noqa: S310
            return ""
    except urllib.error.HTTPError:
        return ""  # the host answered (a 4xx/5xx on its front page still means it is reachable)
    except (OSError, ValueError) as error:
        return f"{parts.netloc} unreachable ({type(getattr(error, 'reason', error)).__name__})"


def _download(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=120) as response:  # noqa: S310 (a pinned https URL)
        return response.read()


def _write_checked(path: Path, data: bytes, expected: str | None) -> str:
    """Write ``data`` to ``path`` through a temporary file; keep it only if its SHA-256 is ``expected``."""
    actual = hashlib.sha256(data).hexdigest()
    if expected is not None and actual != expected:
        return (f"sha256 of the rebuilt file is {actual[:12]}…, not the pinned {expected[:12]}…; "
                f"not written (the source changed; see data/README.md for the pinned copies)")
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.replace(temporary, path)
    finally:  # a failed write (disk full, interrupted) leaves no temporary file behind
        if os.path.exists(temporary):
            os.unlink(temporary)
    return ""


def fetch(root: str | Path | None = None, folders: Sequence[str] | None = None,
          load: Loader | None = None, download: Callable[[str], bytes] | None = None,
          checksums: dict[str, str] | None = None, echo: Callable[[str], None] = print,
          probe: Callable[[str], str] | None = None) -> list[FileStatus]:
    """Fetch every file of ``folders`` (default: all) that is missing or corrupt under ``root``.

    Each folder is tried on its own: a host that does not answer a quick probe, or a failing
    download, costs that folder one ``FAILED`` line and the others still come. ``load(repository,
    config, split)`` returns the hub rows (``datasets.load_dataset``), ``download(url)`` the bytes
    of a plain file and ``probe(url)`` says why a host is unreachable (``""`` if it answers); all
    three are parameters so the tests run offline. Returns the final state of every file of those
    folders (a failed one is "missing" or "corrupt" there).
    """
    root = Path(root) if root is not None else data_dir()
    checksums = read_checksums() if checksums is None else checksums
    load, download, probe = load or _load_hub, download or _download, probe or reachable
    folders = list(SOURCES) if folders is None else list(folders)
    for folder in folders:
        if folder not in SOURCES:
            raise ValueError(f"unknown data folder {folder!r}; choose from: {', '.join(SOURCES)}")
    before = {s.name: s for s in verify(root, checksums)}
    probed: dict[str, str] = {}
    for folder in folders:
        source = SOURCES[folder]
        todo = [name for name in source.files if getattr(before.get(f"{folder}/{name}"), "state", None) != "ok"]
        for name in (name for name in source.files if name not in todo):
            echo(f"ok       {folder}/{name} (already there, sha256 matches)")
        if not todo:
            continue
        host = source.url or HUB_URL
        if host not in probed:
            probed[host] = probe(host)
        if probed[host]:
            echo(f"FAILED   {folder}: {probed[host]}; nothing fetched (check the network, then run `make data` again)")
            continue
        for name in todo:
            key = f"{folder}/{name}"
            try:
                data = _fetch_one(source, name, key, load, download, echo)
                problem = _write_checked(root / key, data, checksums.get(key))
            except Exception as error:  # noqa: BLE001 - one line per failed file, the others go on
                problem = f"{type(error).__name__}: {' '.join(str(error).split())[:200]}"
            if problem:
                echo(f"FAILED   {key}: {problem}")
    wanted = {f"{folder}/{name}" for folder in folders for name in SOURCES[folder].files}
    return [status for status in verify(root, checksums) if status.name in wanted]


def _fetch_one(source: Source, name: str, key: str, load: Loader, download: Callable[[str], bytes],
               echo: Callable[[str], None]) -> bytes:
    if source.url is not None:
        echo(f"fetch    {key} <- {source.url}")
        return download(source.url)
    repository, config = source.hub
    split = source.splits[name]
    echo(f"fetch    {key} <- datasets.load_dataset({repository!r}, {config!r}, split={split!r})")
    return source.write(name, list(load(repository, config, split)))
