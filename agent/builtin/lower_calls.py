"""How each call of a reference's graph lowers to the row program: by module type, by function or
method, whatever the reference's names. Mixed into the lowering (``lower._Lowering``), whose methods
(``elementwise``, ``reduce``, ``composite``, ``batch_norm``) build the program's nodes."""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F

from kernelevo.agent.builtin import shape_reads
from kernelevo.agent.builtin.lower_operands import view_of_attribute, viewed_attribute
from kernelevo.agent.builtin.lower_positions import Positions
from kernelevo.agent.builtin.program import CannotCover, Operand
from kernelevo.agent.builtin.rowshapes import adds_a_last_dim
from kernelevo.agent.builtin.vocabulary import (
    BINARY_METHODS,
    BINARY_TARGETS,
    BITWISE_ON_BOOL,
    COMPARE_METHODS,
    COMPARE_TARGETS,
    IDENTITY_MODULES,
    PASS_METHODS,
    POW_EXPONENTS,
    REDUCE_METHODS,
    REDUCE_TARGETS,
    ROW_FUNCTIONS,
    UNARY_METHODS,
    UNARY_MODULES,
    UNARY_TARGETS,
)


@dataclass
class _Lowered:
    """A value already lowered (a module's parameter), passed where fx nodes usually go."""

    name: str


IGNORED = object()
"""Marks fx values that carry no data the kernel needs (``x.dtype``, ``x.shape``)."""



def _name(target: Any) -> str:
    return target if isinstance(target, str) else getattr(target, "__name__", str(target))


def _number(value: Any, what: str) -> float:
    """A constant the kernel's text holds; a value computed at run time (a number passed to
    forward) cannot be one."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise CannotCover(f"{what} is not a constant number")
    return float(value)



class CallLowering:
    """The dispatch of one graph call to what it computes (see the module)."""

    def call(self, node: torch.fx.Node) -> None:
        """One call of the reference's graph, lowered by what it computes."""
        target, args, kwargs = node.target, list(node.args), dict(node.kwargs)
        if node.op == "call_module":
            return self._module_call(node, target, args)
        name, method = _name(target), node.op == "call_method"
        handlers = (self.position_call, self._structural_call, self._logic_call, self._pointwise_call, self._row_call)
        for handler in handlers:
            if handler(node, target, name, method, args, kwargs):
                return None
        raise CannotCover(f"no template for `{name}`")

    def _module_call(self, node: torch.fx.Node, target: Any, args: list[Any]) -> None:
        """A submodule of the reference: what it computes, by its type."""
        sub = self.gm.get_submodule(str(target))
        if isinstance(sub, nn.Embedding) and args and isinstance(args[0], torch.fx.Node) and \
                isinstance(self.values.get(args[0].name), Positions):
            return self.position_lookup(node, sub, self.values[args[0].name])
        if isinstance(sub, IDENTITY_MODULES):
            self.values[node.name] = self.arg(args[0])
            return
        if type(sub) in UNARY_MODULES:
            return self.elementwise(node, UNARY_MODULES[type(sub)], args[:1])
        if isinstance(sub, nn.GELU):
            return self.elementwise(node, "gelu_tanh" if sub.approximate == "tanh" else "gelu", args[:1])
        if isinstance(sub, nn.LeakyReLU):
            return self.elementwise(node, "leaky_relu", [args[0], sub.negative_slope])
        if isinstance(sub, nn.ELU):
            return self.elementwise(node, "elu", [args[0], float(sub.alpha)])
        if isinstance(sub, nn.Softplus):
            return self.elementwise(node, "softplus", [args[0], float(sub.beta), float(sub.threshold)])
        if isinstance(sub, nn.Hardtanh):  # nn.ReLU6 is one too, matched above
            return self.elementwise(node, "clamp", [args[0], float(sub.min_val), float(sub.max_val)])
        if isinstance(sub, (nn.Softmax, nn.LogSoftmax)):
            kind = "softmax" if isinstance(sub, nn.Softmax) else "log_softmax"
            return self.composite(node, kind, args[0], {"dim": sub.dim})
        if isinstance(sub, nn.LayerNorm):
            return self.composite(node, "layer_norm", args[0], self._norm_params(node, sub, ("weight", "bias")))
        if isinstance(sub, nn.modules.batchnorm._BatchNorm):
            return self.batch_norm(node, sub, args[0])
        if isinstance(sub, nn.PReLU):
            return self.prelu(node, sub, args[0])
        if type(sub).__name__ == "RMSNorm" and hasattr(sub, "normalized_shape"):
            return self.composite(node, "rms_norm", args[0], self._norm_params(node, sub, ("weight",)))
        raise CannotCover(f"no template for the module `{target}` ({type(sub).__name__})")

    def _structural_call(self, node: torch.fx.Node, target: Any, name: str, method: bool, args: list[Any],
                         kwargs: dict[str, Any]) -> bool:
        """Reads of a value's metadata, chunks of the input, items of a tuple: no computation."""
        traced = shape_reads.traced_value(target, name, method, args, kwargs, self.values, self.full)
        if traced is not shape_reads.NOT_A_SHAPE_READ:
            self.values[node.name] = traced
            return True
        if target is getattr and args[1] in ("dtype", "shape", "device"):
            self.values[node.name] = IGNORED
            return True
        if self.input_view(node):
            return True
        if viewed_attribute(node) is not None and self.values.get(args[0].name) is args[0]:
            self.attribute(node.name, *view_of_attribute(self.gm, node))  # a module's tensor seen in another shape
            return True
        if (method and name == "chunk") or (not method and target is torch.chunk):
            if isinstance(args[0], torch.fx.Node) and args[0].name == self.main and self.main_chunks > 1:
                self.values[node.name] = self.values[self.main]
                return True
            raise CannotCover("chunk of something other than the first input")
        if adds_a_last_dim(node) and isinstance(args[0], torch.fx.Node) and args[0].name in self.unsqueezed:
            self.values[node.name] = self.values[args[0].name]  # checked in placeholder: a [..., 1] column
            return True
        if target in (operator.getitem,) or (target is getattr and args[1] in ("values", "indices")):
            value = self.values.get(args[0].name) if isinstance(args[0], torch.fx.Node) else None
            index = args[1]
            if isinstance(value, tuple):
                if index in ("values", "indices"):
                    index = 0 if index == "values" else 1
                self.values[node.name] = value[index]
                return True
            raise CannotCover(f"`{node.name}` indexes a tensor; the templates cover whole tensors")
        return False

    def _logic_call(self, node: torch.fx.Node, target: Any, name: str, method: bool, args: list[Any],
                    kwargs: dict[str, Any]) -> bool:
        """Comparisons, logic on truth values, and selections by them (``where``, ``masked_fill``)."""
        op = COMPARE_METHODS.get(name) if method else COMPARE_TARGETS.get(target)
        if op is None and not method and target in BITWISE_ON_BOOL:
            op = BITWISE_ON_BOOL[target]
            if not self._truth_values(args[:2]):
                raise CannotCover(f"`{name}` of integers (bitwise arithmetic) is not covered")
        if op is not None:
            other = args[1] if len(args) > 1 else kwargs.get("other")
            self.elementwise(node, op, [args[0], other])
            return True
        if (method and name == "logical_not") or (not method and target in (torch.logical_not, operator.invert)):
            if not self._truth_values(args[:1]):
                raise CannotCover(f"`{name}` of integers (bitwise arithmetic) is not covered")
            self.elementwise(node, "logical_not", args[:1])
            return True
        if not method and target is torch.where:
            if len(args) + len(kwargs) != 3:
                raise CannotCover("torch.where with one argument (the positions where it holds) is not covered")
            condition = kwargs.get("condition", args[0])
            a = kwargs.get("input", args[1] if len(args) > 1 else None)
            b = kwargs.get("other", args[2] if len(args) > 2 else None)
            self.elementwise(node, "where", [condition, a, b])
            return True
        if method and name == "where":  # x.where(condition, other)
            self.elementwise(node, "where", [args[1], args[0], args[2] if len(args) > 2 else kwargs.get("other")])
            return True
        if (method and name == "masked_fill") or (not method and target is torch.masked_fill):
            value = args[2] if len(args) > 2 else kwargs.get("value")
            self.elementwise(node, "where", [args[1], value, args[0]])
            return True
        return False

    def _truth_values(self, args: list[Any]) -> bool:
        """Are the tensors among ``args`` booleans (numbers may be anything)?"""
        for a in args:
            if isinstance(a, torch.fx.Node):
                tm = a.meta.get("tensor_meta")
                if tm is None or tm.dtype != torch.bool:
                    return False
        return True

    def _pointwise_call(self, node: torch.fx.Node, target: Any, name: str, method: bool, args: list[Any],
                        kwargs: dict[str, Any]) -> bool:
        """Elementwise ops, clamps and casts."""
        if (method and name in UNARY_METHODS) or (not method and target in UNARY_TARGETS):
            op = UNARY_METHODS[name] if method else UNARY_TARGETS[target]
            if op == "leaky_relu":
                slope = kwargs.get("negative_slope", args[1] if len(args) > 1 else 0.01)
                self.elementwise(node, op, [args[0], slope])
                return True
            if op == "elu":
                alpha = kwargs.get("alpha", args[1] if len(args) > 1 else 1.0)
                self.elementwise(node, op, [args[0], _number(alpha, "alpha")])
                return True
            if op == "softplus":
                beta = kwargs.get("beta", args[1] if len(args) > 1 else 1.0)
                threshold = kwargs.get("threshold", args[2] if len(args) > 2 else 20.0)
                self.elementwise(node, op, [args[0], _number(beta, "beta"), _number(threshold, "threshold")])
                return True
            self.elementwise(node, op, args[:1])
            return True
        if not method and target is torch.xlogy and len(args) == 2 and args[0] is args[1]:
            self.elementwise(node, "xlogx", args[:1])  # x log x, 0 at 0: the entropy term of a KL divergence
            return True
        if not method and target is F.hardtanh:
            lo = kwargs.get("min_val", args[1] if len(args) > 1 else -1.0)
            hi = kwargs.get("max_val", args[2] if len(args) > 2 else 1.0)
            self.elementwise(node, "clamp", [args[0], _number(lo, "min_val"), _number(hi, "max_val")])
            return True
        if not method and target is F.gelu:
            approximate = kwargs.get("approximate", "none")
            self.elementwise(node, "gelu_tanh" if approximate == "tanh" else "gelu", args[:1])
            return True
        if (method and name in BINARY_METHODS) or (not method and target in BINARY_TARGETS):
            op = BINARY_METHODS[name] if method else BINARY_TARGETS[target]
            if kwargs.get("alpha", 1) != 1 or kwargs.get("rounding_mode") is not None:
                raise CannotCover(f"`{name}` with alpha or rounding_mode")
            other = args[1] if len(args) > 1 else kwargs.get("other", kwargs.get("exponent"))
            if op == "pow":
                if not isinstance(other, (int, float)) or float(other) not in POW_EXPONENTS:
                    raise CannotCover(f"pow with exponent {other!r}; the templates cover {sorted(POW_EXPONENTS)}")
                self.elementwise(node, POW_EXPONENTS[float(other)], [args[0]])
                return True
            self.elementwise(node, op, [args[0], other])
            return True
        if target in (operator.sub, operator.truediv) or (not method and target in (torch.rsub,)):
            raise CannotCover(f"no template for `{name}`")
        if (method and name in ("clamp", "clip", "clamp_min", "clamp_max")) or (
                not method and target in (torch.clamp, torch.clip)):
            lo = kwargs.get("min", args[1] if len(args) > 1 and name != "clamp_max" else None)
            hi = kwargs.get("max", args[2] if len(args) > 2 else (args[1] if name == "clamp_max" else None))
            value = args[0]
            if lo is None and hi is None:
                raise CannotCover("clamp without bounds")
            for bound in (lo, hi):
                if bound is not None and not isinstance(bound, (int, float)):
                    raise CannotCover("clamp with tensor bounds")
            self.elementwise(node, "clamp", [value, -math.inf if lo is None else lo, math.inf if hi is None else hi])
            return True
        if (method and name in PASS_METHODS) or (not method and target is torch.Tensor.contiguous):
            src = self.arg(args[0])
            dtype, low = self.rounding(node)
            if isinstance(src, float):  # a number (a tensor made in forward): cast as torch would cast it
                if dtype == "bool" or not hasattr(torch, dtype):
                    raise CannotCover(f"a number made in forward cast to {dtype}")
                self.values[node.name] = float(torch.tensor(src, dtype=torch.float64).to(getattr(torch, dtype)).item())
                return True
            if self.node(src).dtype == dtype:
                self.values[node.name] = src
            else:  # to a truth value: non-zero is true; to an integer: toward zero, as torch converts
                op = "to_bool" if dtype == "bool" else "trunc" if dtype.startswith(("int", "uint")) else "cast"
                self.values[node.name] = self.add(op, [src], self.level(src), dtype, low)
                if src in self.rowflat:  # a value reduced without keepdim broadcasts as one after a cast
                    self.rowflat.add(self.values[node.name])
                self.cast_of_positions(src, self.values[node.name], dtype)
            return True
        return False

    def _row_call(self, node: torch.fx.Node, target: Any, name: str, method: bool, args: list[Any],
                  kwargs: dict[str, Any]) -> bool:
        """Norms, reductions, softmax and the normalizations over the row."""
        if (method and name == "norm") or (not method and target in (torch.norm, torch.linalg.vector_norm)):
            self._norm(node, args, kwargs, vector=not method and target is torch.linalg.vector_norm)
            return True
        if (method and name in REDUCE_METHODS) or (not method and target in REDUCE_TARGETS):
            kind = REDUCE_METHODS[name] if method else REDUCE_TARGETS[target]
            dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
            keepdim = bool(kwargs.get("keepdim", args[2] if len(args) > 2 else False))
            if kwargs.get("dtype") is not None:
                raise CannotCover(f"`{kind}` with a dtype argument is not covered")
            if kind in ("max", "min") and dim is None:  # the largest (smallest) value, NaN if any is
                kind = "amax" if kind == "max" else "amin"
            if kind in ("max", "min") and isinstance(dim, torch.fx.Node):  # torch.min(a, b): elementwise
                self.elementwise(node, "maximum" if kind == "max" else "minimum", [args[0], dim])
                return True
            extra = {"unbiased": kwargs.get("unbiased", True), "correction": kwargs.get("correction")}
            self.reduce(node, kind, args[0], dim, keepdim, extra)
            return True
        if (method and name in ("softmax", "log_softmax")) or (not method and target in ROW_FUNCTIONS):
            kind = name if method else ROW_FUNCTIONS[target]
            if kind in ("softmax", "log_softmax"):
                dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
                self.composite(node, kind, args[0], {"dim": dim, "dtype": kwargs.get("dtype")})
                return True
            shape = shape_reads.constant(kwargs.get("normalized_shape", args[1] if len(args) > 1 else None),
                                         self.values)
            positions = ("weight", "bias", "eps") if kind == "layer_norm" else ("weight", "eps")
            extra = {"normalized_shape": shape}
            for i, what in enumerate(positions):
                extra[what] = kwargs.get(what, args[2 + i] if len(args) > 2 + i else None)
            self.composite(node, kind, args[0], extra)
            return True
        return False

    def _norm(self, node: torch.fx.Node, args: list[Any], kwargs: dict[str, Any], vector: bool) -> None:
        """``torch.norm``, ``Tensor.norm`` and ``torch.linalg.vector_norm`` over one dimension, p in 1, 2, inf."""
        order = kwargs.get("ord" if vector else "p", args[1] if len(args) > 1 else (2 if vector else "fro"))
        dim = kwargs.get("dim", args[2] if len(args) > 2 else None)
        keepdim = bool(kwargs.get("keepdim", args[3] if len(args) > 3 else False))
        if order == "fro" and (dim is None or not isinstance(dim, (list, tuple)) or len(dim) <= 2):
            order = 2  # the Frobenius norm of a vector, a matrix or a whole tensor is its values' 2-norm
        if order not in (1, 2, math.inf) or kwargs.get("dtype") is not None:
            raise CannotCover(f"norm with p={order!r}{' and a dtype' if kwargs.get('dtype') else ''} "
                              "(covered: any order of a float input without a dtype option)")
        return self.reduce(node, "norm", args[0], dim, keepdim, {"p": float(order)})

    def _norm_params(self, node: torch.fx.Node, sub: nn.Module, names: tuple[str, ...]) -> dict[str, Any]:
        shape = tuple(sub.normalized_shape)
        extra: dict[str, Any] = {"normalized_shape": shape, "eps": sub.eps}
        if shape and tuple(self.main_shape or ())[-len(shape):] == shape:
            # normalised over the last len(shape) dimensions: laid out with those as the columns first
            self.require_span(list(range(-len(shape), 0)), f"{type(sub).__name__} over {list(shape)}")
        for what in names:
            param = getattr(sub, what, None)
            if param is None:
                continue
            if self.logical(tuple(param.shape), result=False) != (self.cols,):
                raise CannotCover(f"{type(sub).__name__}.{what} is not one value per column")
            operand = Operand(name=f"p{len(self.operands)}", source=f"self.{node.target}.{what}", kind="col")
            self.operands.append(operand)
            extra[what] = _Lowered(self.add("load", [operand.name, 0], "col", *self.rounding_of(param)))
        return extra


