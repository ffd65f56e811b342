"""A small size for task files that declare none (``SMALL``), such as unchanged KernelBench files.

KernelBench problems are sized for a GPU (a 4096 x 393216 input is 6.4 GB); on the CPU interpreter,
and for tracing a reference to recognise it, a few hundred thousand values say as much. The file's
top-level integer literals of 32 or more (``batch_size = 4096``, ``height = width = 128``; kernel
sizes, strides and small counts stay), and those written in place in ``get_inputs`` and
``get_init_inputs`` (``torch.randn(4096, 1024)``, ``return [2048, 4096]``), are halved together (odd
ones kept odd), step by step, until the inputs and parameters and outputs hold at most
:data:`SMALL_VALUES` values. Each step executes the file again
with the new literals, so values derived from them (``bias_shape = (out_channels, 1, 1)``) follow,
and runs the reference on the meta device, which checks every shape without allocating; the search
stops at the first step that fails there (the file keeps the step before, or its own sizes). It is
deterministic, so every process that imports the task finds the same sizes. Halving every size at
once keeps their ratios (``hidden = 4 * dim`` stays consistent).
"""

from __future__ import annotations

import ast
import types
from pathlib import Path

SMALL_VALUES = 1 << 20
"""Input and parameter values of an automatic small size, at most (about 4 MB in fp32)."""
MIN_SIZE = 32
"""Literals below this are kept: kernel sizes, strides, padding, a handful of channels or heads."""
MAX_STEPS = 16


EXTRAS = frozenset({"SMALL", "DTYPE", "ATOL", "RTOL", "ALLOW_PARTIAL", "DESCRIPTION"})
"""kernelevo's own module-level extras (``loader.py``), never sizes."""
_ARITHMETIC = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Pow, ast.LShift)


def _int_of(node: ast.expr) -> int | None:
    """The value of an integer literal or of plain arithmetic on them (``1024 * 2``, ``2**14``)."""
    if isinstance(node, ast.Constant):
        return node.value if type(node.value) is int else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, _ARITHMETIC):
        left, right = _int_of(node.left), _int_of(node.right)
        if left is None or right is None or (isinstance(node.op, (ast.Pow, ast.LShift)) and right > 64):
            return None
        return int(eval(compile(ast.Expression(node), "<size>", "eval"), {"__builtins__": {}}))  # noqa: S307
    return None


def _sizes_of(node: ast.Assign) -> tuple[list[str], list[int] | None, bool]:
    """``(names, values, is_list)`` of a top-level size assignment: one integer, or a list or tuple of
    them (``hidden_sizes = [2000, 2000]``); values None where it is not one."""
    names = [t.id for t in node.targets if isinstance(t, ast.Name)]
    if len(names) != len(node.targets) or any(n.startswith("_") or n in EXTRAS for n in names):
        return names, None, False
    if isinstance(node.value, (ast.List, ast.Tuple)):
        items = [_int_of(e) for e in node.value.elts]
        return names, (items if items and all(i is not None for i in items) else None), True  # type: ignore[return-value]
    value = _int_of(node.value)
    return names, ([value] if value is not None else None), False


def _unpacked(node: ast.Assign) -> list[tuple[str, ast.expr]] | None:
    """``height, width = 128, 96``: each name with its own value expression."""
    if (len(node.targets) == 1 and isinstance(node.targets[0], ast.Tuple) and isinstance(node.value, ast.Tuple)
            and len(node.targets[0].elts) == len(node.value.elts)
            and all(isinstance(t, ast.Name) for t in node.targets[0].elts)):
        return [(t.id, v) for t, v in zip(node.targets[0].elts, node.value.elts)]  # type: ignore[attr-defined]
    return None


def size_literals(tree: ast.Module) -> dict[str, int]:
    """Top-level sizes of :data:`MIN_SIZE` or more; list elements are named ``name[i]``. A name
    assigned more than once is left alone (which value would it be?)."""
    found: dict[str, int] = {}
    assigned: dict[str, int] = {}
    for node in tree.body:
        if not isinstance(node, ast.Assign):
            continue
        for target in ast.walk(ast.Module(body=[ast.Expr(t) for t in node.targets], type_ignores=[])):
            if isinstance(target, ast.Name):
                assigned[target.id] = assigned.get(target.id, 0) + 1
        pairs = _unpacked(node)
        if pairs is not None:
            for name, expr in pairs:
                value = _int_of(expr)
                if value is not None and value >= MIN_SIZE and not name.startswith("_") and name not in EXTRAS:
                    found[name] = value
            continue
        names, values, is_list = _sizes_of(node)
        for i, value in enumerate(values or []):
            if value >= MIN_SIZE:
                found.update({(f"{n}[{i}]" if is_list else n): value for n in names})
    return {k: v for k, v in found.items() if assigned.get(k.split("[")[0], 0) == 1}


INLINE_FUNCTIONS = ("get_inputs", "get_init_inputs")
"""Functions whose integer literals are sizes too: ``torch.randn(4096, 1024)`` written in place,
``return [2048, 4096]`` for the constructor."""


def _inline_literals(tree: ast.Module) -> list[tuple[str, ast.Constant]]:
    """Integer literals of :data:`MIN_SIZE` or more written inside :data:`INLINE_FUNCTIONS`, each named
    by its function and place in the file (``get_inputs:12:30``)."""
    found = []
    for function in tree.body:
        if not isinstance(function, ast.FunctionDef) or function.name not in INLINE_FUNCTIONS:
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.Constant) and type(node.value) is int and node.value >= MIN_SIZE:
                found.append((f"{function.name}:{node.lineno}:{node.col_offset}", node))
    return found


def module_at(path: Path, name: str, values: dict[str, int]) -> types.ModuleType:
    """The task file executed as module ``name`` with its sizes replaced by ``values``."""
    tree = rewritten(path, values)
    module = types.ModuleType(name)
    module.__file__ = str(path)
    exec(compile(tree, str(path), "exec"), module.__dict__)  # noqa: S102 - the user's own task file
    return module


def rewritten(path: Path, values: dict[str, int]) -> ast.Module:
    """The task file's syntax tree with its sizes replaced by ``values``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in tree.body:
        if not isinstance(node, ast.Assign):
            continue
        pairs = _unpacked(node)
        if pairs is not None:
            node.value.elts = [ast.Constant(values[n]) if n in values else e  # type: ignore[attr-defined]
                               for n, e in pairs]
            continue
        names, old, is_list = _sizes_of(node)
        if old is None or not names:
            continue
        if is_list:
            new = [values.get(f"{names[0]}[{i}]", v) for i, v in enumerate(old)]
            kind = ast.List if isinstance(node.value, ast.List) else ast.Tuple
            node.value = ast.copy_location(kind(elts=[ast.Constant(v) for v in new], ctx=ast.Load()), node.value)
        elif names[0] in values:
            node.value = ast.copy_location(ast.Constant(values[names[0]]), node.value)
    for key, literal in _inline_literals(tree):
        literal.value = values.get(key, literal.value)
    return ast.fix_missing_locations(tree)


def count_values(path: Path, values: dict[str, int]) -> int | None:
    """Values in the inputs, parameters and outputs at ``values``: the reference built and run on the
    meta device, which checks every shape and allocates nothing (None: it fails there)."""
    import torch

    try:
        module = module_at(path, "kernelevo_shrink_probe", values)
        with torch.device("meta"), torch.no_grad():
            model = module.Model(*module.get_init_inputs())
            inputs = module.get_inputs()
            out = model(*inputs)
    except Exception:
        return None
    outputs = out if isinstance(out, (tuple, list)) else [out]
    count = sum(x.numel() for x in [*inputs, *outputs] if isinstance(x, torch.Tensor))
    if isinstance(model, torch.nn.Module):
        count += sum(p.numel() for p in model.parameters()) + sum(b.numel() for b in model.buffers())
    return count


def _halved(values: dict[str, int]) -> dict[str, int]:
    """Each size halved; an odd one to the odd number nearest below its half (8205 -> 4103), so that an
    irregular shape shrinks and stays irregular: its masks and ragged tiles are what a small size must
    still exercise."""
    return {k: (v // 2 if v % 2 == 0 else v // 2 | 1) if v // 2 >= MIN_SIZE // 2 else v for k, v in values.items()}


def automatic_small(path: Path) -> dict[str, int]:
    """The size literals to replace for an automatic small size ({} where none is needed or found).
    The module's constants first; where they cannot bring the file down to :data:`SMALL_VALUES`, the
    literals written in place in ``get_inputs`` and ``get_init_inputs`` with them, kept only if the
    reference then really runs (a literal there may have to match one in ``__init__`` that stays,
    which the meta device does not always check)."""
    try:
        tree = ast.parse(path.read_text(), filename=str(path))
    except SyntaxError:
        return {}
    sizes = size_literals(tree)
    inline = {key: node.value for key, node in _inline_literals(tree)}
    full = count_values(path, {}) if sizes or inline else None
    if full is None or full <= SMALL_VALUES:
        return {}
    found, count = _search(path, sizes) if sizes else ({}, full)
    if count <= SMALL_VALUES or not inline:
        return found
    both, smaller = _search(path, {**sizes, **inline})
    return both if smaller < count and _runs(path, both) else found


def _search(path: Path, sizes: dict[str, int]) -> tuple[dict[str, int], int]:
    """``sizes`` halved together step by step while the reference still runs on the meta device, until
    the file holds at most :data:`SMALL_VALUES` values: the changed literals and the count reached."""
    steps: list[tuple[dict[str, int], int]] = []
    current = sizes
    for _ in range(MAX_STEPS):
        trial = _halved(current)
        count = count_values(path, trial) if trial != current else None
        if count is None:
            break
        steps.append((trial, count))
        current = trial
        if count <= SMALL_VALUES:
            break
    if not steps:
        return {}, count_values(path, {}) or 0
    smallest, count = steps[-1]  # every step ran on the meta device, the last is the smallest
    return {k: v for k, v in smallest.items() if v != sizes[k]}, count


def _runs(path: Path, values: dict[str, int]) -> bool:
    """Does the reference build and run on the CPU at ``values`` (a small size: cheap)?"""
    import torch

    try:
        module = module_at(path, "kernelevo_shrink_check", values)
        with torch.no_grad():
            module.Model(*module.get_init_inputs())(*module.get_inputs())
    except Exception:
        return False
    return True
