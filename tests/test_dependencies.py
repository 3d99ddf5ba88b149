"""pyproject.toml declares what the library imports (issue 34): every third-party package imported anywhere
under lib/semlm is a dependency or in an extra, and the book-only packages stay out of the core install
as long as the models and data loaders import without them."""

import ast
import re
import subprocess
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
LIBRARY = REPO_ROOT / "lib" / "semlm"
# the chapters' packages, imported only inside the functions that need them
BOOK_ONLY = ("papermill", "jupytext", "nbformat", "jupyter_client", "traitlets", "spacy", "vaderSentiment")


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(requirement: str) -> str:
    return _normalise(re.match(r"[A-Za-z0-9._-]+", requirement).group(0))


def imported_packages() -> dict[str, set[str]]:
    """Top-level third-party modules imported under lib/semlm (at any depth), each with its files."""
    found: dict[str, set[str]] = {}
    for path in LIBRARY.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top != "semlm" and top not in sys.stdlib_module_names:
                    found.setdefault(top, set()).add(str(path.relative_to(LIBRARY)))
    return found


def declared() -> tuple[set[str], dict[str, set[str]]]:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    core = {_requirement_name(r) for r in project["dependencies"]}
    extras = {extra: {_requirement_name(r) for r in reqs} for extra, reqs in project["optional-dependencies"].items()}
    return core, extras


def test_every_package_imported_by_the_library_is_declared():
    core, extras = declared()
    everything = core.union(*extras.values())
    distributions = packages_distributions()
    undeclared = {}
    for module, files in imported_packages().items():
        names = {_normalise(d) for d in distributions.get(module, [module])} | {_normalise(module)}
        if not names & everything:
            undeclared[module] = sorted(files)
    assert not undeclared, f"imported under lib/semlm but not in pyproject.toml: {undeclared}"


def test_book_only_packages_are_extras_and_the_models_and_data_import_without_them():
    core, extras = declared()
    assert not {_normalise(name) for name in BOOK_ONLY} & core
    assert {_normalise(name) for name in BOOK_ONLY} <= extras["book"]
    blocked = ", ".join(repr(name) for name in BOOK_ONLY)
    code = (f"import sys\nfor name in ({blocked},): sys.modules[name] = None  # import raises ImportError\n"
            "import semlm.models, semlm.data, semlm.data.fetch, semlm.data.dataset, semlm.core.train\n"
            "import semlm.fusion.sst2_features, semlm.fusion.sst2_experiment, semlm.idea.wikitext_experiment\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]


def test_transformers_lower_bound_is_a_version_5():
    core_requirements = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (transformers,) = [r for r in core_requirements if _requirement_name(r) == "transformers"]
    assert re.fullmatch(r"transformers>=5(\.\d+)*", transformers.replace(" ", ""))
