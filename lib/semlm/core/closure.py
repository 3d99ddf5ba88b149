"""The code a trained model depends on, computed rather than listed: the runner's cache keys.

:func:`code_closure` starts from some functions or classes (an experiment's ``prepare``,
``build`` and ``fit``, the trainer) and follows every global name their code uses, through the
library (``semlm.*``) only:

* a function or method: its source, then the globals its bytecode names (nested functions,
  lambdas and comprehensions included), the library modules it imports in its body (``from
  semlm.x import helper`` inside a function: ``helper`` is followed like a global), its default
  values and closure cells;
* a class: its source, its library base classes and every method;
* a module named as a value (``runs.Fit``, ``syn.LEXICON``): the attributes of that module the
  code names;
* a table of functions or classes (``LOSS_FORMS``, or a registry a decorator fills, private or
  not): every function and class in it, as the module holds it when the key is computed;
* any other value defined in the library (a constant, a table): its ``repr`` (sets sorted, object
  addresses dropped), so a changed number changes the key. A private mutable global holding no
  code (``_CACHE = {}``) is a per-process cache of data and is left out.

Source is hashed as its syntax tree without docstrings (comments are not in the tree), so editing prose
retrains nothing; a dataclass's execution fields (``field(metadata={"execution": True})``: how a device runs a
recipe, such as ``TrainConfig.compile_on_cuda``) are left out with their defaults, as run descriptions leave
them out (:func:`semlm.core.runs.run_key`). Third-party code (torch, transformers) is not followed: the
runner's keys add the versions of the packages a model's numbers depend on (:func:`semlm.core.runs.run_key`).
Editing any library function the training code can reach changes the training key; editing code
only the evaluation reaches (metrics, generation) changes only the evaluation key, so the runner
re-evaluates a cached model instead of retraining it (:mod:`semlm.core.runs`).
"""

from __future__ import annotations

import ast
import dataclasses
import dis
import hashlib
import importlib
import importlib.util
import inspect
import re
import sys
import textwrap
import types
from typing import Any, Iterable

LIBRARY = "semlm"
_ADDRESS = re.compile(r" at 0x[0-9a-f]+")
_IMPORT_NAME = dis.opmap["IMPORT_NAME"]


def code_text(source: str) -> str:
    """What of ``source`` the keys hash: its syntax tree without docstrings (so without comments either);
    the source itself where it does not parse on its own (a lambda's line, say)."""
    try:
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError:
        return source
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
        if isinstance(node, ast.ClassDef):
            node.body = [item for item in node.body if not _execution_field(item)] or [ast.Pass()]
    return ast.dump(tree)


def _execution_field(node: ast.AST) -> bool:
    """``name: type = field(..., metadata={"execution": True})`` in a class body: how a device runs a recipe, not
    the recipe (:func:`semlm.core.train_config.execution_fields`), so neither it nor its default is in a key."""
    call = getattr(node, "value", None) if isinstance(node, ast.AnnAssign) else None
    if not (isinstance(call, ast.Call) and getattr(call.func, "id", getattr(call.func, "attr", None)) == "field"):
        return False
    for keyword in call.keywords:
        if keyword.arg == "metadata" and isinstance(keyword.value, ast.Dict):
            return any(isinstance(k, ast.Constant) and k.value == "execution" and isinstance(v, ast.Constant)
                       and v.value is True for k, v in zip(keyword.value.keys, keyword.value.values))
    return False


def _execution_names(fn: types.FunctionType) -> frozenset[str]:
    """The execution fields of the dataclass whose generated method ``fn`` is (none for any other function)."""
    owner = fn.__globals__.get(fn.__qualname__.split(".")[0]) if "." in fn.__qualname__ else None
    if not (inspect.isclass(owner) and dataclasses.is_dataclass(owner)):
        return frozenset()
    return frozenset(f.name for f in dataclasses.fields(owner) if f.metadata.get("execution"))


def _defaults(fn: types.FunctionType) -> dict[str, Any]:
    """``{parameter: default}`` of ``fn``, without a dataclass's execution fields."""
    code, skip = fn.__code__, _execution_names(fn)
    positional = code.co_varnames[:code.co_argcount]
    named = dict(zip(positional[len(positional) - len(fn.__defaults__ or ()):], fn.__defaults__ or ()))
    return {name: value for name, value in {**named, **(fn.__kwdefaults__ or {})}.items() if name not in skip}


def _in_library(obj: Any) -> bool:
    module = getattr(obj, "__module__", None) or (obj.__name__ if isinstance(obj, types.ModuleType) else None)
    return isinstance(module, str) and (module == LIBRARY or module.startswith(LIBRARY + "."))


def _names(code: types.CodeType) -> set[str]:
    """Every global or attribute name ``code`` and the code objects nested in it use (closure cells aside)."""
    return set(code.co_names).union(*(_names(c) for c in code.co_consts if isinstance(c, types.CodeType)))


def _body_imports(fn: types.FunctionType) -> list[types.ModuleType]:
    """The library modules ``fn`` (and the code nested in it) imports in its body, imported now if need be
    (running ``fn`` would import them too); relative imports resolve against ``fn``'s package. A code object that
    calls ``import_module`` imports the library modules its string constants name (``"semlm.x.y"``)."""
    modules, codes = [], [fn.__code__]
    while codes:
        code = codes.pop()
        codes += [const for const in code.co_consts if isinstance(const, types.CodeType)]
        if "import_module" in code.co_names:  # importlib.import_module("semlm.x"): a library module named by a string
            for const in code.co_consts:
                try:
                    module = _import(const, 0, fn.__module__) if isinstance(const, str) and "." in const else None
                except (ValueError, TypeError):  # a string that is no module name
                    module = None
                if module is not None:
                    modules.append(module)
        if _IMPORT_NAME not in code.co_code[::2]:  # opcodes sit at even offsets: most code imports nothing
            continue
        pushed: list = []  # an import pushes its level and its from-list before IMPORT_NAME
        for instruction in dis.get_instructions(code):
            if instruction.opname == "IMPORT_NAME":
                level = pushed[-2] if len(pushed) >= 2 and isinstance(pushed[-2], int) else 0
                module = _import(instruction.argval, level, fn.__module__)
                if module is not None:
                    modules.append(module)
            pushed = pushed[-1:] + [instruction.argval] if instruction.opname == "LOAD_CONST" else []
    return modules


def _import(name: str, level: int, importer: str) -> types.ModuleType | None:
    if level:
        package = getattr(sys.modules.get(importer), "__package__", None) or importer.rpartition(".")[0]
        name = importlib.util.resolve_name("." * level + name, package)
    if name != LIBRARY and not name.startswith(LIBRARY + "."):
        return None  # third-party code is keyed by its version (semlm.core.runs.package_versions)
    try:
        return importlib.import_module(name)
    except ImportError:  # an optional import; the run meets the same failure
        return None


def _holds_code(value: Any) -> bool:
    """A table with a function or class in it (a registry), as opposed to a cache of data."""
    items = value.values() if isinstance(value, dict) else value
    return any(inspect.isfunction(item) or inspect.isclass(item) for item in items)


def _stable_repr(value: Any) -> str:
    if isinstance(value, (set, frozenset)):
        return "{" + ", ".join(sorted(_stable_repr(v) for v in value)) + "}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_stable_repr(k)}: {_stable_repr(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return type(value).__name__ + "(" + ", ".join(_stable_repr(v) for v in value) + ")"
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - an odd repr must not break the key
        text = type(value).__qualname__
    return _ADDRESS.sub("", text)


def _plain(value: Any) -> bool:
    """A constant made of numbers, strings and containers of them (its repr is its meaning)."""
    if isinstance(value, (bool, int, float, complex, str, bytes, type(None))):
        return True
    if isinstance(value, dict):
        return all(_plain(k) and _plain(v) for k, v in value.items())
    if isinstance(value, (list, tuple, set, frozenset)):
        return all(_plain(v) for v in value)
    return False


class _Closure:
    def __init__(self, exclude: Iterable[Any] = ()):
        self.parts: dict[str, str] = {}
        self.seen: set[int] = set()
        self.exclude = {id(fn) for fn in exclude}

    def visit(self, obj: Any, names: set[str] | None = None) -> None:
        if callable(obj) and hasattr(obj, "__wrapped__") and not inspect.isclass(obj):
            obj = inspect.unwrap(obj)  # functools.lru_cache, functools.wraps
        if isinstance(obj, (staticmethod, classmethod)):
            obj = obj.__func__
        if isinstance(obj, property):
            for part in filter(None, (obj.fget, obj.fset, obj.fdel)):
                self.visit(part)
            return
        if isinstance(obj, types.ModuleType):
            if _in_library(obj):
                for name in sorted(names or ()):  # only what the code takes from the module
                    if name in vars(obj):
                        self.visit(vars(obj)[name], names)  # a submodule: what the code takes from it
            return
        if id(obj) in self.seen or id(obj) in self.exclude:
            return
        if inspect.isfunction(obj) or inspect.ismethod(obj):
            self.seen.add(id(obj))
            self._function(inspect.unwrap(getattr(obj, "__func__", obj)))
        elif inspect.isclass(obj):
            self.seen.add(id(obj))
            if _in_library(obj):
                self._class(obj)
        elif isinstance(obj, (list, tuple, set, frozenset, dict)):
            self.seen.add(id(obj))
            for item in (obj.values() if isinstance(obj, dict) else obj):
                if inspect.isfunction(item) or inspect.isclass(item):
                    self.visit(item)
        elif _in_library(type(obj)):  # an instance of a library class: its class and its settings
            self.seen.add(id(obj))
            self.visit(type(obj))

    def _function(self, fn: types.FunctionType) -> None:
        if not _in_library(fn):
            return
        try:
            source = code_text(inspect.getsource(fn))
        except (OSError, TypeError):  # no source file (generated or exec'd code): its bytecode and constants
            constants = [c for c in fn.__code__.co_consts if not isinstance(c, types.CodeType)]
            source = fn.__code__.co_code.hex() + _stable_repr(constants)
        self.parts[f"{fn.__module__}:{fn.__qualname__}"] = source
        names = _names(fn.__code__)
        for name in sorted(names):
            if name in fn.__globals__:
                self._value(fn.__globals__[name], f"{fn.__module__}.{name}", names)
        for module in _body_imports(fn):
            self.visit(module, names)
        for cell in fn.__closure__ or ():
            try:
                self._value(cell.cell_contents, f"{fn.__module__}:{fn.__qualname__}<cell>", names)
            except ValueError:  # an empty cell
                pass
        for name, default in _defaults(fn).items():
            self._value(default, f"{fn.__module__}:{fn.__qualname__}<default {name}>", names)

    def _value(self, value: Any, where: str, names: set[str]) -> None:
        if (isinstance(value, (dict, list, set)) and where.rpartition(".")[2].startswith("_")
                and not _holds_code(value)):
            return  # a private mutable global without code is a per-process cache (e.g. prepared data)
        if isinstance(value, types.ModuleType):
            self.visit(value, names)
        elif (inspect.isfunction(value) or inspect.isclass(value) or isinstance(value, (staticmethod, classmethod))
              or (callable(value) and hasattr(value, "__wrapped__"))):
            self.visit(value)
        elif _in_library(type(value)) or _plain(value):
            self.visit(value)
            self.parts[where] = _stable_repr(value)
        elif isinstance(value, (list, tuple, dict, set, frozenset)):
            self.visit(value)  # e.g. a table of functions; a per-process cache of data is not code
            if _holds_code(value):  # which name a registry files each function under
                self.parts[where] = _stable_repr(value)

    def _class(self, cls: type) -> None:
        members = {name: value for name, value in vars(cls).items() if id(value) not in self.exclude}
        whole = len(members) == len(vars(cls))  # else the class without the excluded methods, member by member
        qualified = f"{cls.__module__}:{cls.__qualname__}"
        if whole:
            try:
                self.parts[qualified] = code_text(inspect.getsource(cls))
            except (OSError, TypeError):
                self.parts[qualified] = cls.__qualname__
        for name, value in members.items() if whole else sorted(members.items()):  # the order keys were made in
            if inspect.isfunction(value) or isinstance(value, (staticmethod, classmethod, property)):
                self.visit(value)
            elif not whole and not name.startswith("__"):
                self.parts[f"{qualified}.{name}"] = _stable_repr(value)
        for base in cls.__bases__:
            self.visit(base)


def code_closure(*roots: Any, exclude: Iterable[Any] = ()) -> dict[str, str]:
    """``{"module:qualname": source}`` of the library code ``roots`` can reach (see the module doc).

    ``exclude``: functions to leave out wherever they are met (the ``evaluate`` methods of an experiment's
    class and its bases when the training key is computed); a method of the same name on any other class
    stays in.
    """
    closure = _Closure(exclude)
    for root in roots:
        closure.visit(root)
    return dict(sorted(closure.parts.items()))


def parts_hash(parts: dict[str, str]) -> str:
    """The 12-hex-digit hash of a :func:`code_closure`; equal across processes and sessions."""
    digest = hashlib.sha256()
    for name, source in parts.items():
        digest.update(f"{name}\0{source}\0".encode())
    return digest.hexdigest()[:12]
