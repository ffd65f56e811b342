"""The Task model: a reference module plus what kernelevo needs to judge replacements for it."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

Size = Literal["small", "full"]

# Elementwise |out - ref| <= atol + rtol * |ref|, by the dtype the task computes in.
_TOLERANCES: dict[str, float] = {
    "float32": 1e-4,
    "float64": 1e-7,
    "bfloat16": 1e-2,
    "float16": 1e-2,
}


def default_tolerance(dtype: str) -> float:
    """The default atol (= rtol) for a task computing in ``dtype``."""
    return _TOLERANCES.get(dtype, 1e-4)


class Task(BaseModel):
    """A loaded task: where its reference lives and how candidates are judged against it."""

    name: str
    """Short name: the built-in task's name, or the file's stem."""
    path: Path
    """The KernelBench-format file (``Model``, ``get_inputs``, ``get_init_inputs``)."""
    builtin: bool = False
    description: str = ""
    size: Size = "full"
    """Which problem size: ``small`` applies the file's ``SMALL`` overrides."""
    size_overrides: dict[str, int | float | bool | str] = Field(default_factory=dict)
    """The module globals replaced for this size (empty for ``full``)."""
    dtype: str | None = None
    """Declared compute dtype (``DTYPE``): floating inputs and parameters are cast to it."""
    atol: float | None = None
    rtol: float | None = None
    scale_atol: bool = True
    """The atol is read in units of an output's mean |value| where that is below 1 (``SCALE_ATOL``; by
    default for the default atol only): an absolute tolerance above the values accepts any small output."""
    allow_partial: bool = False
    """``ALLOW_PARTIAL``: torch may keep part of the work (e.g. a cuDNN convolution)."""
    declared_flops: float | None = None
    declared_bytes: float | None = None
    sha256: str
    """Hash of the file's bytes: caches of baselines and references are keyed by it."""

    def tolerances(self, output_dtype: str) -> tuple[float, float]:
        """(atol, rtol) for an output of ``output_dtype``, honouring the task's own values."""
        default = default_tolerance(self.dtype or output_dtype)
        return (self.atol if self.atol is not None else default, self.rtol if self.rtol is not None else default)
