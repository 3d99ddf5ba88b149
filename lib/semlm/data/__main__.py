"""``python -m semlm.data {fetch,verify}``: see :mod:`semlm.data.fetch`."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from semlm.data import fetch as data_fetch
from semlm.data.paths import data_dir


def _summarise(statuses: list[data_fetch.FileStatus], root: Path, failed: list[str] | None = None,
               requested: list[str] | None = None) -> int:
    """A line per file, one summary line, and exit status 1 if a needed file is missing or corrupt.

    After ``fetch`` (``failed``: the files and folders its ``FAILED`` lines name) only the files those lines do not
    explain get a line, a file of a folder named with ``--only`` is needed even if the book treats it as optional,
    and there is no "run `make data`" hint: this is that command."""
    explained = set(failed or ()) | {name.split("/")[0] for name in failed or ()}
    for status in statuses:
        if failed is None:
            print(status.line())
        elif status.state != "ok" and not {status.name, status.name.split("/")[0]} & explained:
            print(f"{status.state:8} {status.name}: not fetched")
    bad = [s for s in statuses if s.state == "corrupt"
           or (s.state == "missing" and (not s.optional or s.name.split("/")[0] in (requested or ())))]
    optional = [s for s in statuses if s.state == "missing" and s not in bad]
    ok = sum(s.state == "ok" for s in statuses)
    print(f"{ok}/{len(statuses)} files verified in {_show(root)}"
          + (f"; {len(optional)} optional file(s) missing" if optional else ""))
    if bad and failed is None:
        print(f"error: {len(bad)} file(s) missing or corrupt: {', '.join(s.name for s in bad)}; "
              f"run `make data`", file=sys.stderr)
    elif bad:
        folders = sorted({s.name.split("/")[0] for s in bad})
        print(f"error: {len(bad)} file(s) not fetched ({', '.join(folders)}); the lines above say why", file=sys.stderr)
    return 1 if bad else 0


def _show(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m semlm.data",
                                     description="Fetch the book's datasets from the hub, or verify them offline.")
    commands = parser.add_subparsers(dest="command", required=True)
    for name, text in (("fetch", "download missing or corrupt files (network), then verify"),
                       ("verify", "check every file against semlm/data/checksums.sha256 (no network)")):
        sub = commands.add_parser(name, help=text, description=text)
        sub.add_argument("--data-dir", type=Path, default=None,
                         help="where the dataset folders are (default: $SEMLM_DATA_DIR, else data/)")
        if name == "fetch":
            sub.add_argument("--only", nargs="+", metavar="FOLDER", choices=list(data_fetch.SOURCES),
                             help=f"only these folders ({', '.join(data_fetch.SOURCES)})")
    args = parser.parse_args(argv)
    root = args.data_dir if args.data_dir is not None else data_dir()
    try:
        if args.command == "verify":
            return _summarise(data_fetch.verify(root), root)
        for name in ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE"):  # this command is the explicit request
            os.environ.pop(name, None)
        failed: list[str] = []

        def echo(line: str) -> None:
            print(line, flush=True)
            if line.startswith("FAILED"):
                failed.append(line.split()[1].rstrip(":"))

        return _summarise(data_fetch.fetch(root, args.only, echo=echo), root, failed, args.only)
    except Exception as error:  # offline, hub unreachable, disk full: one line, not a traceback
        message = " ".join(str(error).split())[:300]
        hint = "" if isinstance(error, (ValueError, FileNotFoundError)) else \
            " (no network? `python -m semlm.data verify` checks what is there)"
        print(f"error: {type(error).__name__}: {message}{hint}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
