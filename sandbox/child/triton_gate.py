"""A fast compile gate for Triton candidates: compile their kernels for a GPU target without a GPU.

Run in the sandbox (``python -m kernelevo.sandbox.child.triton_gate job.json``), because it imports the
candidate. The candidate's ``forward`` runs once on the task's full-size shapes on torch's meta
device (no memory, no data) with Triton's launcher replaced by a recorder; each recorded launch is
then compiled ahead of time (``triton.compile`` for the target, sm_90 unless told otherwise) and its
PTX assembled with ``ptxas -v`` for the register, spill and shared-memory report. Advice for the
model only: a verdict always comes from the harness.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

TORCH_TO_TRITON = {
    "float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64", "int64": "i64", "int32": "i32",
    "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "i1",
}


def _type_of(value: Any) -> str:
    import torch

    if isinstance(value, torch.Tensor):
        return "*" + TORCH_TO_TRITON.get(str(value.dtype).removeprefix("torch."), "fp32")
    if isinstance(value, bool):
        return "i1"
    if isinstance(value, int):
        return "i32" if -(2**31) <= value < 2**31 else "i64"
    if isinstance(value, float):
        return "fp32"
    raise TypeError(f"argument of type {type(value).__name__}")


def _specialise(value: Any, param: Any) -> tuple[str, bool]:
    """How Triton's launcher specialises one argument: its type (or "constexpr" for an integer equal
    to 1) and whether it is marked 16-divisible (tensors, whose allocations are aligned, and integers
    divisible by 16): the marks that let the compiler emit wide loads and drop stride arithmetic.
    Triton's own specialiser where this Triton exposes it, else the same rules written out."""
    specialize = not getattr(param, "do_not_specialize", False)
    align = not getattr(param, "do_not_specialize_on_alignment", False)
    try:
        from triton._C.libtriton import native_specialize_impl
        from triton.backends.compiler import BaseBackend

        kind, key = native_specialize_impl(BaseBackend, value, False, specialize, align)[:2]
        if kind == "constexpr" or (isinstance(kind, str) and kind[:1] in "*iuf" and kind != "constexpr"):
            return kind, key == "D"
    except (ImportError, TypeError, ValueError):
        pass
    if specialize and isinstance(value, int) and not isinstance(value, bool) and value == 1:
        return "constexpr", False
    aligned = not isinstance(value, (float, bool)) and (not isinstance(value, int) or value % 16 == 0)
    return _type_of(value), aligned and specialize and align


def _ptxas_candidates() -> list[str]:
    import triton

    bundled = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
    found = [str(bundled / name) for name in ("ptxas-blackwell", "ptxas") if (bundled / name).exists()]
    found += [p for p in (shutil.which("ptxas"), "/usr/local/cuda/bin/ptxas") if p and Path(p).exists()]
    return list(dict.fromkeys(found))


def resources(ptx: str, arch: str) -> dict[str, Any]:
    """Registers, spills and shared memory from ``ptxas -v`` on ``ptx``: the first ptxas that accepts
    this PTX version (Triton's own, then the system's). ``{"resources": text, "registers": n,
    "spill_bytes": n}``; only ``{"resources": ""}`` if no ptxas does."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "k.ptx"
        path.write_text(ptx)
        for ptxas in _ptxas_candidates():
            done = subprocess.run([ptxas, f"-arch={arch}", "-v", str(path), "-o", str(Path(tmp) / "k.cubin")],
                                  capture_output=True, text=True, timeout=120)
            if done.returncode == 0:
                break
        else:
            return {"resources": ""}
    text = done.stdout + done.stderr
    regs = re.search(r"Used (\d+) registers", text)
    spill = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", text)
    parts: list[str] = []
    report: dict[str, Any] = {}
    if regs:
        parts.append(f"{regs.group(1)} registers")
        report["registers"] = int(regs.group(1))
    if spill:
        parts.append(f"{spill.group(1)} bytes spill stores" if int(spill.group(1)) else "no spills")
        report["spill_bytes"] = int(spill.group(1)) + int(spill.group(2))
    report["resources"] = ", ".join(parts)
    return report


def _record_launches(candidate: Path, task_path: Path, size: str, dtype: str | None) -> list[tuple[Any, dict, dict]]:
    import torch
    from triton.runtime.jit import JITFunction

    from kernelevo.sandbox.child.importing import import_candidate
    from kernelevo.tasks.loader import import_task_module

    launches: list[tuple[Any, dict, dict]] = []

    def record(self: Any, *args: Any, grid: Any, warmup: Any = False, **kwargs: Any) -> None:
        names = list(self.arg_names)
        bound = dict(zip(names, args))
        bound.update({k: v for k, v in kwargs.items() if k in names})
        options = {k: v for k, v in kwargs.items() if k not in names}
        launches.append((self, bound, options))

    JITFunction.run = record  # type: ignore[method-assign]
    module = import_task_module(task_path, size)
    cand = import_candidate(candidate)
    torch.manual_seed(0)
    with torch.device("meta"), torch.no_grad():
        model = cand.ModelNew(*module.get_init_inputs())
        inputs = list(module.get_inputs())
        if dtype:
            model = model.to(getattr(torch, dtype))
            inputs = [x.to(getattr(torch, dtype)) if isinstance(x, torch.Tensor) and x.is_floating_point() else x
                      for x in inputs]
        model(*inputs)
    return launches


_GLOBAL_ACCESS = re.compile(r"\b(ld|st)\.global((?:\.[\w:]+)*)")


def access_widths(ptx: str) -> dict[str, int]:
    """The widest global load and store in ``ptx``, in bits (``ld.global.v4.b32`` is 128): where the
    compiler could not prove alignment, it falls back to 32 bits or fewer per access."""
    widest = {"load_bits": 0, "store_bits": 0}
    for op, suffix in _GLOBAL_ACCESS.findall(ptx):
        parts = suffix.split(".")
        lanes = next((int(x[1:]) for x in parts if re.fullmatch(r"v\d", x)), 1)
        bits = next((int(x[1:]) for x in parts if re.fullmatch(r"[bfsu]\d+", x)), 0)
        name = "load_bits" if op == "ld" else "store_bits"
        widest[name] = max(widest[name], lanes * bits)
    return widest


def gate(candidate: Path, task_path: Path, size: str, dtype: str | None, capability: int = 90) -> dict[str, Any]:
    """Compile every kernel ``candidate`` launches; a report per distinct launch."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    try:
        launches = _record_launches(candidate, task_path, size, dtype)
    except Exception as exc:
        return {"ok": False, "kernels": [], "error": "forward failed before any kernel compiled: "
                + "".join(traceback.format_exception_only(type(exc), exc)).strip()}
    if not launches:
        return {"ok": False, "kernels": [], "error": "forward launched no Triton kernel"}
    arch = f"sm_{capability}a" if capability >= 90 else f"sm_{capability}"
    reports, seen = [], set()
    for fn, bound, options in launches:
        constexprs, signature, attrs = {}, {}, {}
        for i, (param, name) in enumerate(zip(fn.params, fn.arg_names)):
            value = bound.get(name, param.default if hasattr(param, "default") else None)
            if param.is_constexpr:
                signature[name] = "constexpr"
                constexprs[name] = value
                continue
            kind, aligned = _specialise(value, param)
            if kind == "constexpr":  # as the launcher does: an integer argument equal to 1 is a constant
                signature[name] = "constexpr"
                constexprs[name] = value
                continue
            signature[name] = kind
            if aligned:
                attrs[(i,)] = [["tt.divisibility", 16]]
        key = (fn.__name__, json.dumps(signature), json.dumps(constexprs, default=str), json.dumps(options))
        if key in seen:
            continue
        seen.add(key)
        report: dict[str, Any] = {"kernel": fn.__name__, "constexprs": {k: str(v) for k, v in constexprs.items()}}
        try:
            target = GPUTarget("cuda", capability, 32)
            launch = {k: v for k, v in options.items() if k in ("num_warps", "num_stages")}
            try:
                source = ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
                compiled = triton.compile(source, target=target, options=launch)
            except (TypeError, KeyError, AttributeError):  # a Triton whose attrs take another form
                compiled = triton.compile(ASTSource(fn=fn, signature=signature, constexprs=constexprs),
                                          target=target, options=launch)
            report.update(ok=True, **resources(compiled.asm["ptx"], arch), **access_widths(compiled.asm["ptx"]),
                          shared_bytes=int(getattr(compiled.metadata, "shared", 0) or 0))
        except Exception as exc:
            report.update(ok=False, error="".join(traceback.format_exception_only(type(exc), exc)).strip())
        reports.append(report)
    return {"ok": all(r["ok"] for r in reports), "kernels": reports, "target": arch}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    job = json.loads(Path(argv[0]).read_text())
    try:
        result = gate(Path(job["candidate"]), Path(job["task"]), job["size"], job.get("dtype"),
                      int(job.get("capability", 90)))
    except Exception as exc:  # the gate itself could not run (e.g. a Triton without AOT support)
        result = {"ok": False, "kernels": [], "error": f"the gate could not run: {exc}", "unavailable": True}
    Path(job["result"]).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
