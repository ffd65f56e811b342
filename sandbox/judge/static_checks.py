"""Static checks on a candidate's source, run before any of it is imported.

The first line of defence (docs/EVALUATION.md): a candidate must define ``ModelNew``, define and
launch at least one custom kernel (``@triton.jit`` or ``load_inline``), keep out of harness internals
(imports outside an allowlist, dynamic attribute access, dunders, monkeypatching), never hide a
launch behind a broad ``except``, and in strict tasks never call torch to compute. What static
analysis cannot see (tensor methods, operators, aliases built at run time) is caught at run time by
the harness's op recorder.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from kernelevo.sandbox.judge import static_names, static_values
from kernelevo.sandbox.judge.kernel_names import Owned, library_like_names
from kernelevo.sandbox.judge.static_analyzer import Analyzer
from kernelevo.sandbox.judge.static_rules import NATIVE_FORBIDDEN
from kernelevo.sandbox.models import Check


@dataclass
class StaticReport:
    """What the static checks found."""

    checks: list[Check] = field(default_factory=list)
    triton_kernels: list[str] = field(default_factory=list)
    uses_load_inline: bool = False
    cuda_sources: list[str] = field(default_factory=list)
    cpp_sources: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def kinds(self) -> list[str]:
        return (["triton"] if self.triton_kernels else []) + (["cuda"] if self.uses_load_inline else [])

    def first_failure(self) -> str | None:
        return next((f"{c.name}: {c.detail}" for c in self.checks if not c.passed), None)


def _strings(node: ast.AST | None, module_strings: dict[str, ast.AST], depth: int = 0) -> list[str]:
    """String constants an expression evaluates to, following module-level names."""
    if node is None or depth > 4:
        return []
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Name) and node.id in module_strings:
        return _strings(module_strings[node.id], module_strings, depth + 1)
    if isinstance(node, (ast.List, ast.Tuple)):
        return [s for e in node.elts for s in _strings(e, module_strings, depth + 1)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left = _strings(node.left, module_strings, depth + 1)
        right = _strings(node.right, module_strings, depth + 1)
        return ["".join(left + right)] if left and right else []
    return []


MAX_SOURCE_CHARS = 1 << 20
"""A candidate's source longer than this fails its syntax check unread: honest kernels are tens of
kilobytes, and every reader of a source (patterns included) then has a bound on its time."""


def check_candidate(source: str, strict: bool = True) -> StaticReport:
    """Run every static check on ``source``; ``strict`` forbids torch compute. Source nested past what
    the parser or the checks can walk (an expression of thousands of terms), or longer than
    ``MAX_SOURCE_CHARS``, fails its syntax check."""
    if len(source) > MAX_SOURCE_CHARS:
        report = StaticReport()
        report.checks.append(Check(name="syntax", passed=False, detail=f"the source holds {len(source):,} "
                                   f"characters; a candidate holds at most {MAX_SOURCE_CHARS:,}"))
        return report
    try:
        return _check_candidate(source, strict)
    except (RecursionError, MemoryError) as exc:
        report = StaticReport()
        report.checks.append(Check(name="syntax", passed=False, detail="the source is nested too deeply to read "
                                   f"({type(exc).__name__}): write expressions and blocks of ordinary depth"))
        return report


def _check_candidate(source: str, strict: bool) -> StaticReport:
    report = StaticReport()
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        report.checks.append(Check(name="syntax", passed=False, detail=f"syntax error at line {exc.lineno}: {exc.msg}"))
        return report
    except ValueError as exc:  # text Python cannot read as source (a lone surrogate, say)
        report.checks.append(Check(name="syntax", passed=False, detail=f"the source is not readable text: {exc}"))
        return report
    analyzer = Analyzer(strict)
    helpers = static_names.constructor_only(tree)
    analyzer.constructor_helpers = {id(n) for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in helpers}
    analyzer.visit(tree)
    for what, line in static_values.modules_as_values(tree, analyzer.resolve):
        analyzer.flag("no monkeypatching", what, ast.Constant(value=None, lineno=line))
    for name, line in static_names.unbound_uses(tree):
        analyzer.flag("no harness access", f"uses `{name}`, a name this file never binds (put in its module from "
                      "outside)", ast.Constant(value=None, lineno=line))
    for attr, line in analyzer.nn_calls:
        cls = analyzer.nn_compute_attrs[attr]
        analyzer.flag(
            "no torch compute",
            f"calls `self.{attr}` (nn.{cls}) to compute; nn modules may hold parameters, not do the work",
            ast.Constant(value=None, lineno=line),
        )
    report.triton_kernels = analyzer.triton_kernels
    report.uses_load_inline = bool(analyzer.load_inline_calls)
    for call in analyzer.load_inline_calls:
        kwargs = {k.arg: k.value for k in call.keywords if k.arg}
        cuda = _strings(kwargs.get("cuda_sources"), analyzer.module_strings)
        if kwargs.get("cuda_sources") is not None and not cuda:
            analyzer.flag("kernel defined", "the CUDA sources must be strings the checker can read (literals or "
                          "module-level constants, not built at run time): the judge reads its kernel names there",
                          call)
        report.cuda_sources += cuda
        cpp = kwargs.get("cpp_sources", call.args[1] if len(call.args) > 1 else None)
        report.cpp_sources += _strings(cpp, analyzer.module_strings)

    checks = report.checks
    if analyzer.has_model_new and analyzer.model_new_forward:
        checks.append(Check(name="ModelNew", passed=True, detail="defines ModelNew.forward"))
    else:
        what = "ModelNew has no forward method" if analyzer.has_model_new else "no class ModelNew"
        checks.append(Check(name="ModelNew", passed=False,
                            detail=f"{what}: a candidate defines `class ModelNew(nn.Module)` with `forward`"))
    problems = analyzer.problems
    if not report.triton_kernels and not report.uses_load_inline:
        problems.setdefault("kernel defined", []).append(
            "no custom kernel: define one with @triton.jit or torch.utils.cpp_extension.load_inline"
        )
    named = library_like_names(Owned.of(report.triton_kernels, report.cuda_sources))
    if named:
        problems.setdefault("kernel names", []).extend(named)
    native = "\n".join(report.cuda_sources + report.cpp_sources)
    for word, why in NATIVE_FORBIDDEN.items():
        if word in native:
            problems.setdefault("no harness access", []).append(f"the CUDA/C++ sources mention `{word}`: {why}")
    unlaunched = [k for k in report.triton_kernels if k not in analyzer.launched]
    if report.triton_kernels and len(unlaunched) == len(report.triton_kernels) and not report.uses_load_inline:
        problems.setdefault("kernel launched", []).append(
            f"Triton kernel(s) {', '.join(unlaunched)} are defined but never launched (`kernel[grid](...)`)"
        )
    names = ["kernel defined", "kernel launched", "kernel names", "imports", "no harness access", "no monkeypatching",
             "no fallback"]
    names.append("no torch compute" if strict else "torch compute (partial replacement allowed)")
    for name in names:
        found = problems.get(name.split(" (")[0], [])
        if name.startswith("torch compute"):
            checks.append(Check(name="no torch compute", passed=True, detail="the task allows partial replacement"))
            continue
        detail = "; ".join(found[:4]) + (f" (+{len(found) - 4} more)" if len(found) > 4 else "")
        checks.append(Check(name=f"static: {name}", passed=not found, detail=detail or "ok"))
    return report
