"""Modules and classes of torch and of Triton's runtime, taken as values.

``a = torch.autograd`` (or ``a, _ = torch.autograd, 0``, ``for m in [torch]``, ``f(torch)``) gives a
module a name the assignment checks see as the candidate's own, and through it the candidate can set
attributes of torch (the op recorder's classes, a comparison) that it could not set by their dotted
names. Kernels and their launches never need such a value: they call functions, read dtypes and
constants, name classes in annotations, ``isinstance`` and ``except`` clauses, and subclass
``nn.Module``. So any other use of a module or a class of ``torch`` or ``triton`` is refused, but for
``triton.language`` and its submodules (kernel code aliases them: ``libdevice = tl.math``), as is
``type(x)`` outside a comparison or a formatted message, which hands out a tensor's class. Names are
looked up only in torch and triton: nothing else the candidate names is imported here. This is a
static guard for the process that imports the candidate; what it cannot see stays the run-time
checks' to catch.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from collections.abc import Callable, Iterator

EXEMPT_CALLS = {"isinstance", "issubclass", "getattr", "hasattr"}
"""Builtins that take a module or class to test against or read from, nothing more."""
GUARDED = ("torch", "triton")
KERNEL_NAMESPACES = ("triton.language",)
"""Modules kernel code aliases; their attributes are only Triton's device-side language."""


def _value(dotted: str) -> object | None:
    """The object ``dotted`` names in torch or triton (imported here if they are not yet: the judge's
    own dependencies); None for any other name (nothing a candidate names is imported)."""
    top, *rest = dotted.split(".")
    if top not in GUARDED:
        return None
    try:
        value: object | None = importlib.import_module(top)
    except ImportError:  # a machine without Triton: its names are not values here
        return None
    try:
        for part in rest:
            if value is None:
                return None
            value = inspect.getattr_static(value, part, None)
    except Exception:  # noqa: BLE001 (an attribute that cannot be read is not refused here)
        return None
    return value


def _subtrees(nodes: list[ast.AST | None]) -> set[int]:
    return {id(n) for root in nodes if root is not None for n in ast.walk(root)}


def _exempt(tree: ast.AST) -> set[int]:
    """Ids of the expressions where naming a module or class is the language's own use of it: class
    bases, annotations (whole), ``except`` clauses, the arguments of ``isinstance``/``getattr``, and
    ``type(x)`` compared or formatted into a message."""
    exempt: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            exempt |= _subtrees([*node.bases])
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = node.args
            arguments = [*a.args, *a.kwonlyargs, *a.posonlyargs, a.vararg, a.kwarg]
            exempt |= _subtrees([x.annotation for x in arguments if x is not None])
            exempt |= _subtrees([getattr(node, "returns", None)])
        elif isinstance(node, ast.AnnAssign):
            exempt |= _subtrees([node.annotation])
        elif isinstance(node, ast.ExceptHandler):
            exempt |= _subtrees([node.type])
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in EXEMPT_CALLS:
            exempt |= _subtrees(list(node.args))
        elif isinstance(node, (ast.FormattedValue, ast.Compare)):  # they give a string or a bool
            exempt |= _subtrees([node])
    return exempt


def modules_as_values(tree: ast.AST, resolve: Callable[[ast.AST], str | None]) -> Iterator[tuple[str, int]]:
    """(what, line) for each module or class of torch or triton taken as a value, and each ``type(x)``
    that is not compared or formatted (``resolve``: the dotted name an expression refers to through the
    file's imports, or None)."""
    exempt = _exempt(tree)
    inner: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            inner.add(id(node.value))  # dereferenced further: not a value on its own
        elif isinstance(node, ast.Call):
            inner.add(id(node.func))
            if isinstance(node.func, ast.Name) and node.func.id == "type" and len(node.args) == 1 and \
                    id(node) not in exempt:
                yield "`type(...)`, which hands out a class", node.lineno
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Name, ast.Attribute)) or not isinstance(node.ctx, ast.Load) or \
                id(node) in inner or id(node) in exempt:
            continue
        dotted = resolve(node)
        if dotted is None or any(dotted == k or dotted.startswith(f"{k}.") for k in KERNEL_NAMESPACES):
            continue
        value = _value(dotted)
        if inspect.ismodule(value) or inspect.isclass(value):
            kind = "module" if inspect.ismodule(value) else "class"
            yield f"the {kind} `{dotted}` taken as a value (a name for it could set its attributes)", node.lineno
