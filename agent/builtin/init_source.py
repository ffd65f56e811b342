"""The reference's constructor as ``ModelNew``'s: the source of ``Model.__init__`` and everything it
needs from its module (imports, constants, helper classes and functions), so that a generated
candidate builds its parameters by running the reference's own code, never a copy of its values."""

from __future__ import annotations

import ast
import dis
import importlib
import inspect
import re
import textwrap
import types
from typing import Any

import torch

from kernelevo.agent.builtin.input_names import MODULE_NAMES
from kernelevo.agent.builtin.program import CannotCover
from kernelevo.sandbox.judge.static_rules import ALLOWED_IMPORTS

SIMPLE = (int, float, str, bool, type(None))
"""Module constants whose value is copied into a candidate as a literal."""


def init_source(cls: type) -> tuple[str, list[str]]:
    """The source of ``cls.__init__`` renamed for ``ModelNew``, and what it needs from its module:
    imports, constants, and the helper classes and functions defined beside it (their own sources,
    with what those need in turn). ``super(Model, self)`` becomes ``super()``."""
    init = cls.__dict__.get("__init__")
    if init is None:
        return "def __init__(self, *args, **kwargs):\n    super().__init__()\n", []
    try:
        source = textwrap.dedent(inspect.getsource(init))
    except (OSError, TypeError) as exc:
        raise CannotCover(f"the reference's __init__ has no readable source ({exc})") from None
    source = re.sub(rf"super\(\s*{cls.__name__}\s*,\s*self\s*\)", "super()", source)
    if set(inspect.getclosurevars(init).nonlocals) - {"__class__"}:
        raise CannotCover("the reference's __init__ uses closure variables")
    heads: list[str] = []
    bodies: list[str] = []
    _collect_needs(init, source, cls.__module__, heads, bodies, {cls.__name__})
    imports = [h for h in heads if h.startswith("import ")]
    return source, imports + [h for h in heads if h not in imports] + ["\n" + b.rstrip() + "\n" for b in bodies]


def _global_names(code: types.CodeType) -> set[str]:
    """The global names ``code`` (and the functions and comprehensions inside it) loads. Not its
    attribute names: ``self.dim = dim`` reads the argument ``dim``, never a module constant ``dim``."""
    names = {ins.argval for ins in dis.get_instructions(code) if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names


def _default_names(source: str) -> set[str]:
    """The names the defaults of the functions in ``source`` read (``group_size=GROUP_SIZE``, in any
    method of a helper class): the enclosing body evaluates them, so no function's own code loads them."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))]
    defaults = [d for f in functions for d in (*f.args.defaults, *f.args.kw_defaults) if d is not None]
    return {n.id for d in defaults for n in ast.walk(d) if isinstance(n, ast.Name)}


def _collect_needs(fn: Any, source: str, module: str, heads: list[str], bodies: list[str], seen: set[str]) -> None:
    """Append to ``heads`` the imports and constants ``fn`` (whose source is ``source``) uses, and to
    ``bodies`` the sources of the classes and functions of ``module`` it uses, recursively."""
    names = _global_names(fn.__code__) | _default_names(source)
    loaded = {name: fn.__globals__[name] for name in names if name in fn.__globals__}
    for name, value in sorted(loaded.items()):
        if name in seen or not re.search(rf"\b{re.escape(name)}\b", source):
            continue  # gone from the rewritten source (the class's own name in super(...)), or done
        seen.add(name)
        if not isinstance(value, types.ModuleType) and (name in MODULE_NAMES or name.endswith("_kernel")):
            raise CannotCover(f"the reference's `{name}` has the name of a definition every generated file holds")
        if isinstance(value, types.ModuleType):
            if name not in ("torch", "nn", "triton", "tl"):
                heads.append(f"import {value.__name__}" if value.__name__ == name
                             else f"import {value.__name__} as {name}")
        elif isinstance(value, SIMPLE) or (isinstance(value, tuple) and all(isinstance(v, SIMPLE) for v in value)):
            heads.append(f"{name} = {value!r}")
        elif isinstance(value, (type, types.FunctionType)) and getattr(value, "__module__", None) == module:
            try:
                helper = textwrap.dedent(inspect.getsource(value))
            except (OSError, TypeError) as exc:
                raise CannotCover(f"the reference's helper `{name}` has no readable source ({exc})") from None
            members = [value] if isinstance(value, types.FunctionType) else _methods(value)
            if _is_module(value):
                helper, kept = _construction_only(helper, _module_text(value))
                members = [m for m in members if m.__name__ in kept]
            for member in members:
                _collect_needs(member, helper, module, heads, bodies, seen)
            bodies.append(helper)
        elif (where := _torch_import(value)) is not None:
            heads.append(f"from {where} import {value.__name__}" + ("" if value.__name__ == name else f" as {name}"))
        else:
            raise CannotCover(f"the reference's __init__ uses `{name}` ({type(value).__name__}), which a generated "
                              "candidate cannot carry")


IMPORT_HOMES = ("torch", "torch.nn", "torch.nn.functional", "torch.nn.init", "torch.nn.utils.parametrizations",
                "math")
"""Where a name imported into the reference (``from torch.nn import Linear``, ``from math import
sqrt``) is looked for when its own module (``torch.nn.modules.linear``) is not one a candidate may import."""


def _torch_import(value: Any) -> str | None:
    """A module the judge lets a candidate import that holds a function or class the reference
    imported by name (``from torch.nn.init import trunc_normal_``, ``from torch.nn import Linear``),
    as that very object; else None. The value's own module first, where it is allowed."""
    where, name = getattr(value, "__module__", None), getattr(value, "__name__", None)
    if not isinstance(name, str) or name.startswith("_"):
        return None  # torch's internals: the judge refuses them
    homes = ([where] if isinstance(where, str) else []) + [h for h in IMPORT_HOMES if h != where]
    for home in homes:
        if home not in ALLOWED_IMPORTS or any(part.startswith("_") for part in home.split(".")):
            continue
        try:
            if getattr(importlib.import_module(home), name, None) is value:
                return home
        except ImportError:
            continue
    return None


def _is_module(value: Any) -> bool:
    return isinstance(value, type) and issubclass(value, torch.nn.Module)


def _module_text(value: Any) -> str | None:
    """The source of the module that defines ``value``, or None where it cannot be read."""
    try:
        return inspect.getsource(inspect.getmodule(value))
    except (OSError, TypeError):
        return None


def _construction_only(source: str, module_text: str | None) -> tuple[str, set[str]]:
    """A helper module's class source without its ``forward`` and the methods only ``forward`` reaches
    (a ``_norm`` it computes with), with the names of the methods kept. ModelNew computes the whole
    forward in its kernels and never calls them, and torch code left in the file would read as torch
    compute to the judge's static checks. A method named anywhere else in the module (the parent's
    constructor calling ``self.s.reset()``, a ``property(_get)`` in the class body, a kept method) stays;
    where the module's text cannot be read, only ``forward`` goes."""
    cls = ast.parse(source).body[0]
    if not isinstance(cls, ast.ClassDef):
        return source, set()
    methods = {f.name: f for f in cls.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
    if "forward" not in methods:
        return source, set(methods)
    lines = source.splitlines()

    def text(f: ast.AST) -> str:
        first = min([f.lineno, *(d.lineno for d in f.decorator_list)]) - 1
        return "\n".join(lines[first:f.end_lineno])

    reached, todo = set(), ["forward"]
    while todo:
        name = todo.pop()
        if name not in reached:
            reached.add(name)
            todo += [n.attr for n in ast.walk(methods[name]) if isinstance(n, ast.Attribute) and n.attr in methods]
    dropped = {"forward"}
    if module_text is not None:
        outside = module_text.replace(source, "") + "\n".join(
            text(f) if name not in reached else "" for name, f in methods.items()) + "\n".join(
            ast.get_source_segment(source, node) or "" for node in cls.body if node not in methods.values())
        dropped |= {name for name in reached if not re.search(rf"\b{re.escape(name)}\b", outside)}
    gone = sorted((methods[name] for name in dropped), key=lambda f: f.lineno)
    for f in reversed(gone):
        first = min([f.lineno, *(d.lineno for d in f.decorator_list)]) - 1
        del lines[first:f.end_lineno]
    while lines and not lines[-1].strip():
        lines.pop()
    indent = " " * gone[0].col_offset
    if len(methods) == len(dropped) and all(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) for n in cls.body):
        lines.append(f"{indent}pass")
    lines.append(f"{indent}# {', '.join(f.name for f in gone)} left out: ModelNew computes the forward in its kernels")
    return "\n".join(lines) + "\n", set(methods) - dropped


def _methods(cls: type) -> list[Any]:
    """The functions of a helper class (plain, static, class methods and properties); its bases must be
    torch's or the class's module's own (whose source the scan cannot follow is refused)."""
    for base in cls.__bases__:
        if base.__module__ not in ("builtins",) and not base.__module__.startswith("torch"):
            raise CannotCover(f"the reference's helper `{cls.__name__}` derives from `{base.__name__}`, which a "
                              "generated candidate cannot carry")
    found = []
    for member in vars(cls).values():
        for fn in (member, getattr(member, "__func__", None), getattr(member, "fget", None),
                   getattr(member, "fset", None)):
            if isinstance(fn, types.FunctionType):
                found.append(fn)
                break
    return found
