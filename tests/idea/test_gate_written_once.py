"""The gate's expression is written once, in ``IdeaGate`` (issue 51): an AST check over the whole library."""

from __future__ import annotations

import ast
from pathlib import Path

import semlm

LIBRARY = Path(semlm.__file__).resolve().parent
SIGMOID = {"sigmoid", "sigmoid_", "logsigmoid", "softplus"}   # p = sigmoid(z), or log p = z - softplus(z)
LOG = {"log", "log_", "logsigmoid"}
CLAMP = {"clamp", "clamp_", "clip", "clip_"}                  # the floor; clamp_min (a count's guard) is not it


def called(node: ast.AST) -> set[str]:
    """The names of the functions and methods called anywhere in ``node``."""
    names = set()
    for call in ast.walk(node):
        if isinstance(call, ast.Call):
            func = call.func
            names.add(func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", ""))
    return names


def gate_writers(tree: ast.AST, prefix: str = "") -> list[str]:
    """Functions (``Class.method`` or ``function``) that call a sigmoid, a log and a clamp: the gate's pattern."""
    found = []
    for node in ast.walk(tree):
        body = node.body if isinstance(node, (ast.Module, ast.ClassDef)) else []
        for child in body:
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                calls = called(child)
                if calls & SIGMOID and calls & LOG and calls & CLAMP:
                    owner = node.name + "." if isinstance(node, ast.ClassDef) else ""
                    found.append(f"{prefix}{owner}{child.name}")
    return found


def test_the_detector_finds_the_gate_where_it_is_written():
    source = ("def gate(z, alpha, beta):\n    return alpha * torch.log(torch.sigmoid(z) + 1e-8).clamp(min=beta)\n"
              "def in_place(z, buffer, floor):\n    return torch.sigmoid(z, out=buffer).add_(1e-8).log_().clamp_(min=floor)\n"
              "def count(x):\n    return torch.log(x.sum().clamp_min(1.0))\n")
    assert gate_writers(ast.parse(source)) == ["gate", "in_place"]


def test_gate_formula_is_written_once():
    writers = []
    for path in sorted(LIBRARY.rglob("*.py")):
        writers += gate_writers(ast.parse(path.read_text()), f"{path.relative_to(LIBRARY)}:")
    assert writers and all(name.startswith("idea/model.py:IdeaGate.") for name in writers), writers
