"""A sequence plan's candidate (``sequence.py``): each segment rendered by its own template, its kernels
renamed per segment, one ``ModelNew`` whose ``forward`` calls the segments in order with torch's views
between them."""

from __future__ import annotations

import ast
import re
from typing import Any

from kernelevo.agent.builtin import made_from_sizes
from kernelevo.agent.builtin.sequence import FLOW, KEPT, SHARED_HELPERS


def _blocks(source: str) -> tuple[list[str], list[tuple[str, str]], list[str]]:
    """A rendered candidate split into (imports, top-level blocks as (name, text), ModelNew's methods
    other than ``__init__``); the module docstring is dropped."""
    tree = ast.parse(source)
    lines = source.splitlines()

    def text(node: ast.AST) -> str:
        first = min([node.lineno, *[d.lineno for d in getattr(node, "decorator_list", [])]])
        return "\n".join(lines[first - 1:node.end_lineno])

    imports, blocks, methods = [], [], []
    for i, node in enumerate(tree.body):
        if i == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            imports.append(text(node))
        elif isinstance(node, ast.ClassDef) and node.name == "ModelNew":
            methods += [text(m) for m in node.body if isinstance(m, ast.FunctionDef) and m.name != "__init__"]
        else:
            name = node.name if isinstance(node, ast.FunctionDef) else (
                node.targets[0].id if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
                else ast.dump(node))
            blocks.append((name, text(node)))
    return imports, blocks, methods


def render(plan: Any, strategy: str, params: dict[str, Any], why: str, render_one: Any, header: str) -> str:
    """The candidate: each segment rendered by its template, kernels renamed per segment, one
    ``ModelNew`` whose ``forward`` calls the segments in order."""
    imports: list[str] = []
    blocks: dict[str, str] = {}
    methods: list[str] = []
    calls = []
    for k, seg in enumerate(plan.extra["segments"]):
        choice = (strategy, params, why) if k == plan.extra["lead"] else (seg.strategy, seg.params, seg.why)
        source = render_one(seg.plan, *choice)
        seg_imports, seg_blocks, seg_methods = _blocks(source)
        kernels = [name for name, _ in seg_blocks if name not in SHARED_HELPERS and re.fullmatch(r"\w+", name)
                   and f"def {name}(" in source]
        # methods get names no submodule of the reference has
        renames = {name: f"s{k}_{name}" for name in kernels} | {"forward": f"_kernelevo_segment{k}",
                                                                "_kernelevo_tail": f"_kernelevo_segment{k}_tail"}
        pattern = re.compile(r"\b(" + "|".join(map(re.escape, renames)) + r")\b")

        def rename(text: str, renames: dict[str, str] = renames, pattern: re.Pattern[str] = pattern) -> str:
            return pattern.sub(lambda found: renames[found.group(1)], text)

        imports += [i for i in seg_imports if i not in imports]
        for name, text in seg_blocks:
            key = renames.get(name, name)
            if key not in blocks:  # shared helpers and flags (INTERPRETED, CAST_ROUNDS) once
                blocks[key] = rename(text)
        methods += [rename(m) for m in seg_methods]
        # a kept value viewed again is stored again only where something later reads it
        calls += [v for v in seg.views if not re.fullmatch(rf"{KEPT}\d+ = {FLOW}", v) or
                  _read_later(v.split(" = ")[0], plan, k)]
        calls.append(f"{FLOW} = self._kernelevo_segment{k}({', '.join(seg.passed or seg.inputs)})")
        if _read_later(f"{KEPT}{k}", plan, k + 1):
            calls.append(f"{KEPT}{k} = {FLOW}")
    calls += [v for v in plan.extra.get("tail_views", []) if not re.fullmatch(rf"{KEPT}\d+ = {FLOW}", v)]
    calls = _without_dead_stores(calls)
    if any(f"{made_from_sizes.HELPER}(self," in c for c in calls):
        blocks.setdefault(made_from_sizes.HELPER, made_from_sizes.HELPER_SOURCE)
    forward = [f"def forward(self, {', '.join(plan.inputs)}):", *[f"    {c}" for c in calls],
               f"    return {plan.extra.get('returns', FLOW)}"]
    body = "\n\n\n".join(blocks.values())
    # methods keep the class indentation they were rendered with
    model = ("class ModelNew(nn.Module):\n" + _indent(plan.init.rstrip()) + "\n\n"
             + "\n\n".join([*methods, _indent("\n".join(forward))]) + "\n")
    return header + "\n".join(imports) + "\n\n\n" + body + "\n\n\n" + model


def _read_later(name: str, plan: Any, k: int) -> bool:
    """Does a kernel from segment ``k`` on, or a statement of ``forward`` before one of them or after the
    last (the parts of a chunk of it, say), read the value ``forward`` keeps as ``name``?"""
    segments = plan.extra["segments"][k:]
    statements = [v for s in segments for v in s.views] + list(plan.extra.get("tail_views", []))
    word = re.compile(rf"\b{re.escape(name)}\b")
    return any(name in s.inputs for s in segments) or any(
        word.search(v.split(" = ", 1)[1]) for v in statements if " = " in v) or bool(
        word.search(plan.extra.get("returns", "")))


def _without_dead_stores(calls: list[str]) -> list[str]:
    """``forward``'s statements less each ``KEPT = FLOW`` that the next statement naming the kept value
    overwrites before anything reads it (a value kept, then viewed and kept again): the code a person
    reads says each value once."""
    kept: list[str] = []
    for k, statement in enumerate(calls):
        stored = re.fullmatch(rf"({KEPT}\d+) = {FLOW}", statement)
        if stored and _overwritten_unread(stored.group(1), calls[k + 1:]):
            continue
        kept.append(statement)
    return kept


def _overwritten_unread(name: str, later: list[str]) -> bool:
    word = re.compile(rf"\b{re.escape(name)}\b")
    for statement in later:
        target, _, value = statement.rpartition(" = ")
        if word.search(value):
            return False
        if target.strip() == name:
            return True
        if word.search(target):  # stored some other way (several names at once): keep it, to be safe
            return False
    return False


def _indent(text: str) -> str:
    return "\n".join(("    " + line) if line.strip() else line for line in text.splitlines())
