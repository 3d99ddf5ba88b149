"""The library's layers, read from its source, bottom first: ``data``; ``core`` (it imports only ``data``);
``profiles`` and ``reference``; the papers, ``fusion`` and ``idea`` (each imports only ``core``, ``data``,
``profiles``, ``reference`` and itself); the helpers over them (``models``, ``plots``, ``distributed``); the
``book``; the command shims. No module imports from a layer above its own, and no import circle runs through
``lib/semlm``.

Every import statement counts, at module level or inside a function body, and so does a string literal given
to ``importlib.import_module``: a lazy import still ties one module to another."""

from __future__ import annotations

import ast
from pathlib import Path

import semlm

LIBRARY = Path(semlm.__file__).parent
#: what ``core`` may not import: the papers, the book, the profiles, a paper's data
FORBIDDEN_IN_CORE = ("semlm.fusion", "semlm.idea", "semlm.book", "semlm.profiles", "semlm.data.synthetic",
                     "semlm.data.topics", "semlm.data.sst2", "semlm.data.wikitext", "semlm.data.fineweb")


def module_name(path: Path, library: Path = LIBRARY) -> str:
    parts = path.relative_to(library.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def library_modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(LIBRARY.rglob("*.py"))}


def imported_names(path: Path, library: Path = LIBRARY) -> list[tuple[str, int]]:
    """``(module, line)`` for every import in ``path``: ``import a.b`` names ``a.b``; ``from a.b import c``
    names ``a.b`` and ``a.b.c`` (a module or not; callers keep what exists); relative imports resolved;
    ``importlib.import_module("a.b")`` (or ``import_module``, ``__import__``) with a literal names ``a.b``."""
    name = module_name(path, library)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            found.append((base, node.lineno))
            found += [(f"{base}.{alias.name}", node.lineno) for alias in node.names if alias.name != "*"]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if called in ("import_module", "__import__"):
                found.append((node.args[0].value, node.lineno))
    return found


def forbidden(target: str) -> bool:
    return any(target == bad or target.startswith(bad + ".") for bad in FORBIDDEN_IN_CORE)


def test_core_imports_no_paper_or_book_module():
    bad = [f"{path.relative_to(LIBRARY.parent)}:{line} imports {target}"
           for path in sorted((LIBRARY / "core").glob("*.py"))
           for target, line in imported_names(path) if forbidden(target)]
    assert not bad, "core is the bottom layer, but:\n" + "\n".join(bad)


def test_the_layer_check_sees_lazy_and_relative_imports(tmp_path):
    """What the check reads: an import inside a function, a relative import, and importlib with a literal."""
    package = tmp_path / "semlm" / "core"
    package.mkdir(parents=True)
    (package / "probe.py").write_text(
        "import importlib\n"
        "def later():\n"
        "    from semlm.idea.targets import PAD_ID\n"
        "    from ..data import synthetic\n"
        "    return importlib.import_module('semlm.book.claims')\n")
    targets = {target for target, _ in imported_names(package / "probe.py", tmp_path / "semlm")}
    assert {"semlm.idea.targets", "semlm.data.synthetic", "semlm.book.claims"} <= targets
    assert all(forbidden(t) for t in ("semlm.idea.targets", "semlm.data.synthetic", "semlm.book.claims"))
    assert not forbidden("semlm.data.dataset") and not forbidden("semlm.core.records")


def import_graph() -> dict[str, set[str]]:
    """``{module: library modules it imports}`` over every ``semlm`` module."""
    modules = library_modules()
    return {name: {target for target, _ in imported_names(path) if target in modules and target != name}
            for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def one_circle(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """A closed path ``a -> b -> ... -> a`` inside one strongly connected component (breadth first)."""
    members, start = set(component), component[0]
    paths = {nxt: [start, nxt] for nxt in graph[start] if nxt in members}
    frontier = list(paths)
    while start not in paths:
        node = frontier.pop(0)
        for nxt in sorted(graph[node] & members):
            if nxt not in paths:
                paths[nxt] = paths[node] + [nxt]
                frontier.append(nxt)
    return paths[start]


def test_cycles_finds_a_circle_and_names_it():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert one_circle(graph, ["a", "b", "c"]) == ["a", "b", "c", "a"]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_in_lib():
    graph = import_graph()
    assert "semlm.core.records" in graph["semlm.book.records"]  # the graph sees the library's imports
    found = cycles(graph)
    assert not found, (f"{len(found)} import circle(s) in lib/semlm, e.g. "
                       f"{' -> '.join(one_circle(graph, found[0]))}; all modules in circles: {found}")


#: The library's layers, bottom first; a module may import only from its own layer or one below. Within
#: ``LAYERS[3]`` each paper is its own package: fusion and idea never import each other.
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"data"}),
    frozenset({"core"}),
    frozenset({"profiles", "reference"}),
    frozenset({"fusion", "idea"}),
    frozenset({"models", "plots", "_auto_registration", "distributed"}),   # shims and helpers over the papers
    frozenset({"book"}),
    frozenset({"bench", "recorded", "sitecheck", ""}),                      # command shims over the book; the package
)
#: what each low layer may import besides itself (the issue's rules, stricter than "any layer below")
ALLOWED = {"core": {"data"}, "fusion": {"core", "data", "profiles", "reference"},
           "idea": {"core", "data", "profiles", "reference"}}


def unit(module: str) -> str:
    """The layer unit of a library module: ``semlm.idea.model`` -> ``idea``; the package itself -> ``""``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def height(name: str) -> int:
    return next(level for level, names in enumerate(LAYERS) if name in names)


def layering_problems(modules: dict[str, Path], library: Path = LIBRARY) -> list[str]:
    """Every import, module-level or in a function, relative or by ``import_module``, that breaks the layer order."""
    problems, seen = [], set()
    for name, path in modules.items():
        src = unit(name)
        for target, line in imported_names(path, library):
            while target not in modules and "." in target:     # ``from a.b import c``: c may be a name, not a module
                target = target.rpartition(".")[0]
            if target not in modules or target == "semlm":     # third party, or ``from semlm import <module>``
                continue
            dst = unit(target)
            where = f"{path.relative_to(library.parent)}:{line} imports {target}"
            if src == dst or (path, line, dst) in seen:  # ``from a import b`` names a and a.b: one problem
                continue
            seen.add((path, line, dst))
            if src in ALLOWED and dst not in ALLOWED[src]:
                problems.append(f"{where} ({src} may import only {', '.join(sorted(ALLOWED[src]))})")
            elif height(dst) > height(src) or (height(dst) == height(src) and src in ALLOWED):
                problems.append(f"{where} (a layer above {src})")
    return problems


def test_every_library_unit_has_a_layer():
    units = {unit(name) for name in library_modules()}
    assert units <= set().union(*LAYERS), f"give these a layer in LAYERS: {sorted(units - set().union(*LAYERS))}"


def test_layering():
    assert not cycles(import_graph()), "import circles: see test_no_import_circle_in_lib"
    problems = layering_problems(library_modules())
    assert not problems, "the layer order is broken:\n" + "\n".join(problems)


def test_the_layering_check_fails_on_each_broken_rule(tmp_path):
    """A paper importing the book or the other paper, core importing the profiles, data importing core: each
    is found, lazy and relative imports included; an import from below is not."""
    root = tmp_path / "semlm"
    files = {"__init__.py": "", "data/__init__.py": "", "core/__init__.py": "", "idea/__init__.py": "",
             "fusion/__init__.py": "", "book/__init__.py": "", "profiles.py": "",
             "data/low.py": "def f():\n    from semlm.core import runs\n",
             "core/runs.py": "from ..profiles import x\nfrom semlm.data import low\n",
             "idea/model.py": "import importlib\nfrom semlm.core import runs\n"
                              "def g():\n    return importlib.import_module('semlm.book.claims')\n",
             "fusion/model.py": "from semlm.idea import model\n",
             "book/claims.py": "from semlm.idea import model\nfrom semlm.fusion import model as fusion\n"}
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    modules = {module_name(path, root): path for path in sorted(root.rglob("*.py"))}
    problems = layering_problems(modules, root)
    assert len(problems) == 4, problems
    for expected in ("data/low.py:2 imports semlm.core", "core/runs.py:1 imports semlm.profiles",
                     "idea/model.py:4 imports semlm.book.claims", "fusion/model.py:1 imports semlm.idea"):
        assert any(p.startswith(f"semlm/{expected}") for p in problems), (expected, problems)
