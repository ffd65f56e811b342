"""The walk over a candidate's syntax tree behind the static checks (:mod:`static_checks`): what it
imports and aliases, which names it resolves to torch, Triton or harness internals, which kernels it
defines and launches, and each problem found, by check name. It reads the source only; nothing of the
candidate runs.
"""

from __future__ import annotations

import ast

from kernelevo.sandbox.judge import static_names
from kernelevo.sandbox.judge.static_rules import (
    ALLOWED_IMPORT_PREFIXES,
    ALLOWED_IMPORTS,
    DYNAMIC_ATTRIBUTE,
    EVALUATING_ATTRIBUTES,
    FILE_ATTRIBUTES,
    FORBIDDEN_BUILTINS,
    MODULE_ATTRIBUTES,
    MODULE_IDENTITY,
    NN_HOLDERS,
    PLACE_ATTRIBUTES,
    SOURCE_ATTRIBUTES,
    SUBCLASS_ATTRIBUTES,
    TENSOR_HOOKS,
    TORCH_FORBIDDEN,
    TORCH_FORBIDDEN_PREFIXES,
    TORCH_GLUE,
    TRITON_FORBIDDEN_PREFIXES,
    TRITON_FORBIDDEN_WHY,
)

REFUSED_ANYWHERE = (MODULE_ATTRIBUTES | FILE_ATTRIBUTES | PLACE_ATTRIBUTES | SOURCE_ATTRIBUTES | EVALUATING_ATTRIBUTES
                    | static_names.FORMAT_METHODS | {"fn"})
"""Names refused on any object, however reached: as an attribute, by ``getattr`` or by an import."""


def _bound_names(target: ast.AST | None) -> list[str]:
    """The names an assignment target binds: ``a``, and each name of ``a, (b, *c)``."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Starred):
        return _bound_names(target.value)
    if isinstance(target, (ast.Tuple, ast.List)):
        return [name for element in target.elts for name in _bound_names(element)]
    return []


def _root_name(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


class Analyzer(ast.NodeVisitor):
    """Walks a candidate's tree once; ``problems`` holds what each check found."""


    def __init__(self, strict: bool) -> None:
        self.strict = strict
        self.aliases: dict[str, str] = {}
        self.problems: dict[str, list[str]] = {}
        self.triton_kernels: list[str] = []
        self.called_names: set[int] = set()
        """The ids of ``getattr``-like names in call position (checked there, not as values)."""
        self.main_guards: set[int] = set()
        """The ids of ``__name__`` in ``__name__ == "__main__"`` (allowed there alone)."""
        self.launched: set[str] = set()
        self.load_inline_calls: list[ast.Call] = []
        self.nn_compute_attrs: dict[str, str] = {}
        self.nn_calls: list[tuple[str, int]] = []
        self.module_strings: dict[str, ast.AST] = {}
        self.scopes: list[set[str]] = [set()]
        self.in_kernel = 0
        self.in_constructor = False
        """In an ``__init__`` (or a function only it calls), not in a function or lambda it defines:
        torch there builds parameters and tables before any input exists, so strict tasks allow it."""
        self.class_inits: set[int] = set()
        """The ids of ``__init__`` methods defined directly in the body of a module class."""
        self.module_classes: set[str] = set()
        self.constructor_helpers: set[int] = set()
        """The ids of module-level functions only an ``__init__`` calls."""
        self.has_model_new = False
        self.model_new_forward = False

    def flag(self, check: str, message: str, node: ast.AST) -> None:
        self.problems.setdefault(check, []).append(f"line {getattr(node, 'lineno', '?')}: {message}")

    def resolve(self, node: ast.AST) -> str | None:
        """The dotted name an expression refers to, through import aliases, or None."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        base = self.aliases.get(node.id)
        if base is None:
            return None
        dotted = ".".join([base, *reversed(parts)]).split(".")
        # torch's modules hold torch itself (``torch.nn.init.torch.load``): the name from its last entry
        last = max((k for k, part in enumerate(dotted) if part == "torch"), default=0)
        return ".".join(dotted[last:])

    # imports --------------------------------------------------------------------------------
    def _check_module(self, module: str, node: ast.AST) -> None:
        if module.startswith(TRITON_FORBIDDEN_PREFIXES):
            self.flag("no harness access", f"`{module}`: {TRITON_FORBIDDEN_WHY}", node)
        elif module not in ALLOWED_IMPORTS and not module.startswith(ALLOWED_IMPORT_PREFIXES):
            self.flag("imports", f"import of `{module}` is not allowed in candidates", node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._check_module(alias.name, node)
            if alias.asname:
                self.aliases[alias.asname] = alias.name
            else:
                top = alias.name.split(".")[0]
                self.aliases[top] = top
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level:
            self.flag("imports", "relative imports are not allowed in candidates", node)
        self._check_module(module, node)
        for alias in node.names:
            if alias.name == "*":
                self.flag("imports", f"`from {module} import *` hides what is used", node)
                continue
            full = f"{module}.{alias.name}"
            if alias.name in REFUSED_ANYWHERE:  # the same names the attribute checks refuse, taken by an import
                self.flag("no harness access", f"imports `{full}`, which the checks refuse on any object", node)
            if full.startswith(TRITON_FORBIDDEN_PREFIXES):
                self.flag("no harness access", f"`{full}`: {TRITON_FORBIDDEN_WHY}", node)
            if full.startswith("torch."):
                rest = full[len("torch."):]
                if rest.startswith(TORCH_FORBIDDEN_PREFIXES) or alias.name.startswith("_"):
                    self.flag("no harness access", f"imports `{full}`, a torch internal the harness relies on", node)
                else:
                    self._check_torch_name(full, node, call=False)
            self.aliases[alias.asname or alias.name] = full
        self.generic_visit(node)

    # definitions ----------------------------------------------------------------------------
    def _is_jit_decorator(self, dec: ast.AST) -> bool:
        target = dec.func if isinstance(dec, ast.Call) else dec
        name = self.resolve(target) or ""
        return name in {"triton.jit", "triton.autotune", "triton.heuristics", "triton.runtime.jit.jit"}

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        is_kernel = any(self._is_jit_decorator(d) for d in node.decorator_list)
        if is_kernel:
            self.triton_kernels.append(node.name)
        for dec in node.decorator_list:
            self.visit(dec)
        params = {a.arg for a in node.args.args + node.args.kwonlyargs + node.args.posonlyargs}
        if node.args.vararg:
            params.add(node.args.vararg.arg)
        if node.args.kwarg:
            params.add(node.args.kwarg.arg)
        local = params | {
            name for n in ast.walk(node) for t in getattr(n, "targets", [getattr(n, "target", None)])
            for name in _bound_names(t)
        }
        self.scopes.append(local)
        self.in_kernel += is_kernel
        was = self.in_constructor
        self.in_constructor = id(node) in self.class_inits or id(node) in self.constructor_helpers
        if node.name in TENSOR_HOOKS:
            self.flag("no harness access", f"defines `{node.name}`: a tensor subclass's hook runs torch where the "
                      "op records see only the op it intercepts", node)
        for stmt in node.body:
            self.visit(stmt)
        self.in_constructor = was
        self.in_kernel -= is_kernel
        self.scopes.pop()

    def visit_Lambda(self, node: ast.Lambda) -> None:
        was, self.in_constructor = self.in_constructor, False  # a lambda kept by __init__ runs later
        self.generic_visit(node)
        self.in_constructor = was

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        # a module's constructor (a class of torch.nn, or of a module class of this file) builds
        # parameters and tables; any other class may be built inside forward
        bases = [self.resolve(b) or (b.id if isinstance(b, ast.Name) else "") for b in node.bases]
        if any(b.startswith("torch.nn.") or b in self.module_classes for b in bases):
            self.module_classes.add(node.name)
            self.class_inits |= {id(f) for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"}
        for base in node.bases:
            if self.resolve(base) == "torch.Tensor":
                self.flag("no harness access", f"`{node.name}` subclasses torch.Tensor: its dispatch can run torch "
                          "where the op records see only glue", node)
        if node.name == "ModelNew":
            self.has_model_new = True
            self.model_new_forward = any(
                isinstance(s, ast.FunctionDef) and s.name == "forward" for s in node.body
            )
        self.generic_visit(node)

    # assignments: monkeypatching, nn modules, source strings --------------------------------
    def _check_target(self, target: ast.AST, node: ast.AST) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self._check_target(element, node)
            return
        if isinstance(target, (ast.Attribute, ast.Subscript)):
            root = _root_name(target)
            if root == "self" or (root is not None and root in self.scopes[-1] and root not in self.aliases):
                return
            what = ast.unparse(target)
            self.flag("no monkeypatching", f"assigns to `{what}`, which the candidate does not own", node)

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._check_target(target, node)
            if len(self.scopes) == 1 and isinstance(target, ast.Name):
                self.scopes[0].add(target.id)
                self.module_strings[target.id] = node.value
            if isinstance(target, ast.Attribute) and _root_name(target) == "self":
                self._note_nn_module(target.attr, node.value)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._check_target(node.target, node)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_target(node.target, node)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            self._check_target(target, node)
        self.generic_visit(node)

    def _note_nn_module(self, attr: str, value: ast.AST) -> None:
        if isinstance(value, ast.Call):
            name = self.resolve(value.func) or ""
            if name.startswith("torch.nn.") and name.count(".") == 2:
                cls = name.rsplit(".", 1)[1]
                if cls not in NN_HOLDERS:
                    self.nn_compute_attrs[attr] = cls

    # expressions ------------------------------------------------------------------------------
    def visit_Attribute(self, node: ast.Attribute) -> None:
        why = static_names.refused_attribute(node)
        if why is None and node.attr in static_names.FORMAT_METHODS and id(node) not in self.called_names:
            why = f"`.{node.attr}` taken as a value (its format fields could read any attribute)"
        if why is None and node.attr in SUBCLASS_ATTRIBUTES:
            why = f"`.{node.attr}` makes a tensor subclass, whose hooks run torch where the op records see only glue"
        if why is not None:
            self.flag("no harness access", why, node)
        name = self.resolve(node)
        if name and name.startswith("torch.") and name[len("torch."):] in TORCH_FORBIDDEN:
            # refused however it is reached: called by name, or taken as a value and called later
            self.flag("no harness access", f"`{name}`: {TORCH_FORBIDDEN[name[len('torch.'):]]}", node)
        if name and name.startswith(TRITON_FORBIDDEN_PREFIXES):
            self.flag("no harness access", f"`{name}`: {TRITON_FORBIDDEN_WHY}", node)
        if name and name.startswith("torch.") and not self.in_kernel:
            rest = name[len("torch."):]
            if rest.startswith(TORCH_FORBIDDEN_PREFIXES) and not rest.startswith("nn."):
                self.flag("no harness access", f"uses `{name}`, a torch internal the harness relies on", node)
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if (key := static_names.dunder_key(node)) is not None:
            self.flag("no harness access", f"reaches `[{key!r}]`, an object internal", node)
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        """``__name__ == "__main__"`` reads the same in the judge's process and a user's import."""
        if isinstance(node.left, ast.Name) and node.left.id == "__name__" and len(node.ops) == 1 and \
                isinstance(node.ops[0], (ast.Eq, ast.NotEq)) and isinstance(node.comparators[0], ast.Constant) \
                and node.comparators[0].value == "__main__":
            self.main_guards.add(id(node.left))
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in FORBIDDEN_BUILTINS and node.id not in self.aliases:
            self.flag("no harness access", f"`{node.id}` {FORBIDDEN_BUILTINS[node.id]}", node)
        if node.id in DYNAMIC_ATTRIBUTE and node.id not in self.aliases and id(node) not in self.called_names:
            self.flag("no harness access", f"`{node.id}` passed around as a value hides what it reaches", node)
        if node.id == "__builtins__":
            self.flag("no harness access", "reaches `__builtins__`", node)
        if node.id in MODULE_IDENTITY and id(node) not in self.main_guards:
            self.flag("no harness access", f"reads `{node.id}`, which tells how and where the module was "
                      "imported (only `if __name__ == \"__main__\":` is allowed)", node)
        self.generic_visit(node)

    def _check_torch_name(self, name: str, node: ast.AST, call: bool) -> None:
        rest = name[len("torch."):]
        if rest in TORCH_FORBIDDEN:
            self.flag("no harness access", f"`{name}`: {TORCH_FORBIDDEN[rest]}", node)
            return
        if not call or not self.strict or self.in_kernel or self.in_constructor:
            return
        if rest.startswith("nn.functional.") or rest.startswith(("linalg.", "fft.", "special.", "ops.")):
            self.flag("no torch compute", f"`{name}` computes in torch; this task is strict", node)
        elif "." not in rest and rest not in TORCH_GLUE and rest[:1].islower():
            self.flag("no torch compute", f"`{name}` computes in torch; this task is strict", node)
        elif rest.startswith("Tensor.") and rest.split(".", 1)[1] not in TORCH_GLUE:
            self.flag("no torch compute", f"`{name}` computes in torch; this task is strict", node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = self.resolve(func)
        if (problem := static_names.format_problem(node)) is not None:
            self.flag("no harness access", problem, node)
        if isinstance(func, ast.Attribute) and func.attr in static_names.FORMAT_METHODS:
            self.called_names.add(id(func))  # read by format_problem here, not as a value
        if isinstance(func, ast.Name) and func.id in DYNAMIC_ATTRIBUTE:
            self.called_names.add(id(func))
            self._check_dynamic_attr(func.id, node)
        if name and name.startswith("torch."):
            self._check_torch_name(name, node, call=True)
            if name.endswith("cpp_extension.load_inline"):
                self.load_inline_calls.append(node)
            elif name.endswith("cpp_extension.load"):
                self.flag("kernel defined", "use load_inline: sources must travel inside the candidate", node)
        if isinstance(func, ast.Subscript) and isinstance(func.value, ast.Name):
            self.launched.add(func.value.id)
        if (
            self.strict
            and not self.in_kernel
            and isinstance(func, ast.Attribute)
            and _root_name(func) == "self"
        ):
            target = func.value if func.attr in {"forward", "__call__"} else func
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
                if target.value.id == "self" and target.attr in self.nn_compute_attrs:
                    self.nn_calls.append((target.attr, node.lineno))
        self.generic_visit(node)

    def _check_dynamic_attr(self, builtin: str, node: ast.Call) -> None:
        args = node.args
        literal = len(args) >= 2 and isinstance(args[1], ast.Constant) and isinstance(args[1].value, str)
        if builtin == "setattr":
            if not (args and isinstance(args[0], ast.Name) and args[0].id == "self" and literal):
                self.flag("no monkeypatching", "`setattr` on something other than `self`", node)
            return
        if not literal:
            self.flag("no harness access", f"`{builtin}` with a computed name hides what is reached", node)
        elif args[1].value.startswith("__"):
            self.flag("no harness access", f"`{builtin}` reaches `{args[1].value}`", node)
        elif args[1].value in REFUSED_ANYWHERE or static_names.private(args[1].value):
            what = "the module " if args[1].value in MODULE_ATTRIBUTES else ""
            self.flag("no harness access", f"`{builtin}` reaches {what}`{args[1].value}`, which the checks refuse",
                      node)
        elif args and (resolved := self.resolve(args[0])) and resolved.startswith("torch"):
            self._check_torch_name(f"{resolved}.{args[1].value}", node, call=True)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.MatMult) and self.strict and not self.in_kernel and not self.in_constructor:
            self.flag("no torch compute", "`@` multiplies tensors in torch; this task is strict", node)
        self.generic_visit(node)

    def visit_Try(self, node: ast.Try) -> None:
        for handler in node.handlers:
            if self._is_broad(handler.type):
                caught = ast.unparse(handler.type) if handler.type else "everything"
                self.flag(
                    "no fallback",
                    f"`except {caught}` could hide a failed launch behind a fallback; catch specific errors",
                    handler,
                )
        self.generic_visit(node)

    visit_TryStar = visit_Try  # type: ignore[assignment]

    def _is_broad(self, node: ast.AST | None) -> bool:
        if node is None:
            return True
        if isinstance(node, ast.Tuple):
            return any(self._is_broad(e) for e in node.elts)
        return isinstance(node, ast.Name) and node.id in {"Exception", "BaseException"}
