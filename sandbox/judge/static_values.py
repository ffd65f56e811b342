"""Modules and classes of the libraries a candidate imports, taken as values.

``a = torch.autograd`` (or ``a, _ = torch.autograd, 0``, ``for m in [torch]``, ``f(torch)``) gives a
module a name the assignment checks see as the candidate's own, and through it the candidate can set
attributes of torch (the op recorder's classes, a comparison) that it could not set by their dotted
names. Kernels and their launches never need a module or a class as a value: they call functions,
read dtypes and constants, name classes in ``isinstance`` and annotations, and subclass ``nn.Module``.
So any other use of a module or a class reached through an import is refused, as is ``type(x)``,
which hands out a tensor's class. This is a static guard for the process that imports the candidate;
what it cannot see (``getattr`` chains are refused elsewhere) stays the run-time checks' to catch.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from collections.abc import Callable, Iterator

EXEMPT_CALLS = {"isinstance", "issubclass"}
"""Builtins that take a class as an argument to test against, nothing more."""


def _value(dotted: str) -> object | None:
    """The object ``dotted`` names (its first part a top-level module), or None if it cannot be read."""
    top, *rest = dotted.split(".")
    try:
        value: object = importlib.import_module(top)
        for part in rest:
            value = getattr(value, part)
    except Exception:  # an attribute that does not exist fails at run time, not here
        return None
    return value


def _exempt(tree: ast.AST) -> set[int]:
    """Ids of the expressions where naming a class is part of the language's own use of it: class
    bases, annotations, and what ``isinstance``/``issubclass`` test against."""
    exempt: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            exempt.update(id(b) for b in node.bases)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            exempt.update(id(a.annotation) for a in [*node.args.args, *node.args.kwonlyargs, *node.args.posonlyargs]
                          if a.annotation is not None)
            if node.returns is not None:
                exempt.add(id(node.returns))
        elif isinstance(node, ast.AnnAssign):
            exempt.add(id(node.annotation))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in EXEMPT_CALLS:
            tested = node.args if node.func.id == "issubclass" else node.args[1:]
            exempt.update(id(n) for a in tested for n in ast.walk(a))
    return exempt


def modules_as_values(tree: ast.AST, resolve: Callable[[ast.AST], str | None]) -> Iterator[tuple[str, int]]:
    """(what, line) for each module or class taken as a value, and each ``type(x)`` (``resolve``: the
    dotted name an expression refers to through the file's imports, or None)."""
    exempt = _exempt(tree)
    inner: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            inner.add(id(node.value))  # dereferenced further: not a value on its own
        elif isinstance(node, ast.Call):
            inner.add(id(node.func))
            if isinstance(node.func, ast.Name) and node.func.id == "type" and len(node.args) == 1:
                yield "`type(...)`, which hands out a class", node.lineno
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Name, ast.Attribute)) or not isinstance(node.ctx, ast.Load) or \
                id(node) in inner or id(node) in exempt:
            continue
        dotted = resolve(node)
        value = _value(dotted) if dotted is not None else None
        if inspect.ismodule(value) or inspect.isclass(value):
            kind = "module" if inspect.ismodule(value) else "class"
            yield f"the {kind} `{dotted}` taken as a value (a name for it could set its attributes)", node.lineno
