"""Which names a candidate's source may not reach: attributes refused on any object
(``refused_attribute``, ``private``), and the ways around the attribute checks of ``static_checks.py``:
names it never binds (planted in its module from outside: Triton's interpreter copies its own
globals, ``inspect`` among them, into a kernel's module), fields of format strings
(``"{0.__globals__}".format(f)`` reads attributes), and dunder keys of subscripts
(``scope["__builtins__"]``). Pure functions of the parsed source."""

from __future__ import annotations

import ast
import builtins
import string

from kernelevo.sandbox.judge.static_rules import (
    ALLOWED_DUNDERS,
    EVALUATING_ATTRIBUTES,
    FILE_ATTRIBUTES,
    MODULE_ATTRIBUTES,
    PLACE_ATTRIBUTES,
    PRIVATE_ALLOWED,
    SOURCE_ATTRIBUTES,
)

FORMAT_METHODS = {"format", "format_map"}


def bound_names(tree: ast.AST) -> set[str]:
    """Every name the source binds anywhere (a superset of what any one scope sees): assignments,
    definitions, parameters, imports, handlers, ``global``/``nonlocal`` and match captures."""
    names: set[str] = set(dir(builtins))
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            names.update(node.names)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            names.add(node.rest)
    return names


def unbound_uses(tree: ast.AST) -> list[tuple[str, int]]:
    """(name, line) of each name read that the source never binds and Python does not provide."""
    bound = bound_names(tree)
    return [(node.id, node.lineno) for node in ast.walk(tree)
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in bound]


def format_problem(call: ast.Call) -> str | None:
    """Why a ``str.format``/``format_map`` call may reach attributes, or None: a format string the
    checker cannot read, or a field that reads an attribute or an item (``{0.x}``, ``{0[k]}``)."""
    func = call.func
    if not isinstance(func, ast.Attribute) or func.attr not in FORMAT_METHODS:
        return None
    if not (isinstance(func.value, ast.Constant) and isinstance(func.value.value, str)):
        return f"`.{func.attr}` of a string the checker cannot read (its fields could read any attribute)"
    try:
        fields = _fields(func.value.value)
    except ValueError:
        return f"`.{func.attr}` of a malformed format string"
    reaching = [f for f in fields if "." in f or "[" in f]
    return f"the format field `{{{reaching[0]}}}` reads an attribute or an item" if reaching else None


def _fields(text: str, depth: int = 0) -> list[str]:
    """Every field name of a format string, those nested in format specs too."""
    out = []
    for _, field, spec, _ in string.Formatter().parse(text):
        if field is not None:
            out.append(field)
        if spec and depth < 2:
            out += _fields(spec, depth + 1)
    return out


def dunder_key(node: ast.Subscript) -> str | None:
    """The key of ``x["__name__"]``-like subscripts, else None."""
    key = node.slice
    if isinstance(key, ast.Constant) and isinstance(key.value, str) and key.value.startswith("__") and \
            key.value.endswith("__"):
        return key.value
    return None


def refused_attribute(node: ast.Attribute) -> str | None:
    """Why an attribute read is refused on any object (the first reason), or None. Assignments are left
    to the monkeypatching check, dunders aside. ``self`` is no exception: any function may name its
    parameter ``self`` and be handed a module."""
    attr = node.attr
    if attr.startswith("__") and attr.endswith("__") and attr not in ALLOWED_DUNDERS:
        return f"reaches `{attr}`, an object internal"
    if not isinstance(node.ctx, ast.Load):
        return None
    if attr in MODULE_ATTRIBUTES:
        return f"reaches the module `{attr}` through an attribute"
    if attr in SOURCE_ATTRIBUTES:
        return f"`.{attr}` reads where code came from (the judge's job folder)"
    if attr in EVALUATING_ATTRIBUTES:
        return f"`.{attr}` evaluates strings as code the checker cannot see"
    if attr in PLACE_ATTRIBUTES:
        return f"`.{attr}` asks where or as whom the process runs; a kernel has no use for it"
    if attr in FILE_ATTRIBUTES:
        return f"`.{attr}` touches files; candidates compute, they do not read or write files"
    if attr == "fn":  # a jitted function's Python body, run as plain Python on any object
        return "`.fn` runs a kernel's body as plain Python"
    if private(attr):
        return (f"reaches `{attr}`, a private attribute (a library's internals; name your own attributes "
                "without a leading underscore: any function may be handed a module as its `self`)")
    return None


def private(name: str) -> bool:
    """A single-underscore name no library defines is not private to one: the built-in strategist's
    generated methods are named ``_kernelevo_...``."""
    return name.startswith("_") and not name.startswith(("__", "_kernelevo")) and name not in PRIVATE_ALLOWED


def constructor_only(tree: ast.Module) -> set[str]:
    """Module-level functions that only a constructor calls: named in an ``__init__`` and nowhere else
    in the file (a table of positions a reference's helper builds). Like ``__init__`` itself they run
    before any input exists, so the work they do cannot be the task's."""
    inside: set[int] = set()
    called: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "__init__":
            for sub in ast.walk(node):
                inside.add(id(sub))
                if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name):
                    called.add(sub.func.id)
    elsewhere = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in inside}
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and not n.decorator_list}
    return (called & defined) - elsewhere
