"""The library's layers, read from its source: ``core`` is the bottom layer (it imports no paper, no book, no
profiles and no paper's data module) and no import circle runs through ``lib/semlm``.

Every import statement counts, at module level or inside a function body, and so does a string literal given
to ``importlib.import_module``: a lazy import still ties one module to another.
"""

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
