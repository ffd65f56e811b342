"""The templates whose outputs gather input values by their coordinates, tried in turn on a graph:
lookups by index (:mod:`embedding`), gathers along a dim (:mod:`take_along`), sliding blocks as
columns (:mod:`unfold`), rearrangements (:mod:`rearrange`) and resampling
(:mod:`resample`). Each found plan comes back as the fields of a ``recognize.Plan``."""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.fx

from kernelevo.agent.builtin import embedding, rearrange, resample, take_along, unfold, view_copy


def plan_fields(gm: torch.fx.GraphModule, inputs: list[Any], shapes: list[tuple[int, ...]], names: list[str],
                full: torch.nn.Module | None) -> dict[str, Any] | None:
    """``kind``, ``rows``, ``cols``, ``ops`` and ``extra`` of the first gathering template that covers
    ``gm`` (``shapes``: the tensor inputs' shapes at the size being optimised), else None."""
    rows, cols = (math.prod(shapes[0][:-1]), shapes[0][-1]) if shapes[0] else (1, 1)
    lookup = embedding.recognise(gm, inputs)
    if lookup is not None:
        width = embedding.table_width(full, lookup.table) or \
            tuple(gm.graph.find_nodes(op="output"))[0].args[0].meta["tensor_meta"].shape[-1]
        index_shape = shapes[names.index(lookup.input)] if len(shapes) == len(names) else shapes[0]
        return {"kind": "embedding", "rows": math.prod(index_shape), "cols": width, "ops": ["embedding"],
                "extra": {"embedding": lookup}}
    along = take_along.recognise(gm, inputs)
    if along is not None:
        index_shape = shapes[names.index(along.index)] if len(shapes) == len(names) else shapes[-1]
        return {"kind": "take_along", "rows": math.prod(index_shape[:-1]), "cols": index_shape[-1],
                "ops": ["gather"], "extra": {"take_along": along}}
    columns = unfold.recognise(gm, inputs)
    if columns is not None:
        return {"kind": "unfold", "rows": rows, "cols": cols, "ops": ["unfold"], "extra": {"unfold": columns}}
    moved = rearrange.recognise(gm, inputs, full)
    if moved is not None:
        return {"kind": "rearrange", "rows": rows, "cols": cols, "extra": {"rearrange": moved},
                "ops": [moved.op] + (moved.epilogue.ops if moved.epilogue else [])}
    resampling = resample.recognise(gm, inputs, full)
    if resampling is not None:
        return {"kind": "resample", "rows": rows, "cols": cols, "extra": {"resample": resampling},
                "ops": [resampling.mode] + (resampling.epilogue.ops if resampling.epilogue else [])}
    return None


def describe(plan: Any) -> str | None:
    """One line for a plan of a gathering template (``recognize.Plan``), else None."""
    extra = plan.extra
    if plan.kind == "embedding":
        lookup = extra["embedding"]
        return f"{embedding.describe(lookup)}: {plan.rows} rows of {plan.cols}, {lookup.out_dtype}"
    if plan.kind == "take_along":
        along = extra["take_along"]
        return f"{take_along.describe(along)}: {plan.rows} x {plan.cols} outputs, {along.out_dtype}"
    described = {"unfold": unfold.describe, "rearrange": rearrange.describe, "resample": resample.describe,
                 "view_copy": view_copy.describe}
    if plan.kind in described:
        return f"{described[plan.kind](extra[plan.kind])}, {plan.dtype}"
    return None
