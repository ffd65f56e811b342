"""The agent's tools: write, compile, check, profile and read back kernels; list the population;
read the strategy notes. Each returns concise text the model can act on."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

from kernelevo import prompts
from kernelevo.agent.behaviour import MEASURED
from kernelevo.sandbox.advice.cuda_gate import compile_gate
from kernelevo.sandbox.advice.profiling import describe as describe_profile
from kernelevo.sandbox.judge.static_checks import check_candidate
from kernelevo.sandbox.models import Profile, Verdict
from kernelevo.tasks.task import Task
from kernelevo.tools.edits import EditError, apply_edits, parse_edits


class CandidateStore(Protocol):
    """What the tools need of a run's store (the agent's RunStore satisfies it)."""

    def add_candidate(self, source: str, parent: str | None, strategy: str, cell: str, note: str,
                      generation: int) -> tuple[str, bool]: ...
    def source_path(self, cid: str) -> Path: ...
    def evaluation(self, cid: str, kind: str = "search") -> Verdict | None: ...
    def candidates(self) -> list[dict[str, Any]]: ...


@dataclass
class ToolContext:
    """What one turn of the model may touch."""

    task: Task
    store: CandidateStore
    judge: Callable[[str], Verdict]
    """Judge a stored candidate with the harness (records it; counts against the budget)."""
    budget_left: Callable[[], str | None]
    """None while evaluations remain, else why not."""
    population: Callable[[], str]
    notes: Callable[[], list[str]]
    generation: int = 0
    triton_gate: Callable[[str], dict] | None = None
    """Compile a stored candidate's Triton kernels for the GPU target without running them
    (``Evaluator.triton_gate``); None where no gate is available."""
    profile: Callable[[str], Profile] | None = None
    """Profile a judged candidate (compiler report, Nsight Compute counters where available, diagnosis);
    None where only the verdict's own figures can be shown."""
    inductor_code: Callable[[], str] | None = None
    """The code torch.compile generates for the reference (its kernels and their launches); None where
    it cannot be had."""
    written: list[str] = field(default_factory=list)
    """Candidates written in this turn, in order."""


def _trim(text: str, limit: int = 1200) -> str:
    return text if len(text) <= limit else text[: limit // 2] + "\n...\n" + text[-limit // 2:]


def describe_triton_gate(result: dict) -> str:
    """The Triton gate's report in a few lines: per kernel, registers, spills and access width, or the
    compiler's error."""
    target = result.get("target", "the GPU")
    if not result.get("kernels"):
        return f"Triton compile for {target}: FAILED: {_trim(result.get('error') or 'no result', 1500)}"
    lines = []
    for k in result["kernels"]:
        shape = ", ".join(f"{n}={v}" for n, v in k.get("constexprs", {}).items())
        if k.get("ok"):
            detail = k.get("resources") or "compiled"
            if k.get("shared_bytes"):
                detail += f", {k['shared_bytes']} bytes of shared memory"
            if k.get("load_bits"):
                detail += f", global loads up to {k['load_bits']} bits wide"
                if k["load_bits"] < 128:
                    detail += " (no 16-byte vector loads)"
            lines.append(f"Triton {k['kernel']} ({shape}) for {target}: ok, {detail}")
        else:
            lines.append(f"Triton {k['kernel']} ({shape}) for {target}: FAILED:\n{_trim(k.get('error', ''), 1500)}")
    return "\n".join(lines)


def _verdict_figures(verdict: Verdict) -> str:
    """What the verdict alone says about speed: times, roofline, telemetry, its diagnosis."""
    parts = [f"time {verdict.runtime_ms:.4g} ms ({verdict.timing})"]
    if verdict.timing == "cuda-events":
        parts.append(f"eager {verdict.reference_runtime_ms:.4g} ms")
        if verdict.compile_runtime_ms:
            parts.append(f"torch.compile {verdict.compile_runtime_ms:.4g} ms")
        if verdict.noise_pct is not None:
            parts.append(f"noise {verdict.noise_pct:.1f}%")
    else:
        parts.append("CPU interpreter: no GPU profile here")
    if verdict.diagnosis:
        parts.append(f"diagnosis: {verdict.diagnosis}")
    return "; ".join(parts)


def summarize_verdict(cid: str, verdict: Verdict) -> str:
    """A verdict in a few lines: accepted with its figures, or the failing check and why."""
    if not verdict.correct:
        failed = next((c for c in verdict.checks if not c.passed), None)
        where = f" (check `{failed.name}`)" if failed else ""
        return f"{cid[:10]} REJECTED{where}: {_trim(verdict.reason or 'no reason given')}"
    line = f"{cid[:10]} ACCEPTED: {verdict.runtime_ms:.4g} ms"
    if verdict.timing == "cpu-interpreter":
        return line + f" under the CPU interpreter (reference {verdict.reference_runtime_ms:.4g} ms); not a speedup"
    if verdict.speedup:
        line += f", {verdict.speedup:.2f}x over eager ({verdict.reference_runtime_ms:.4g} ms)"
    if verdict.speedup_vs_compile:
        line += f", {verdict.speedup_vs_compile:.2f}x over torch.compile"
    if verdict.roofline_fraction:
        line += f"; {100 * verdict.roofline_fraction:.0f}% of the {verdict.bound}-bound roofline"
    return line


class WriteArgs(BaseModel):
    source: str = Field(description="The whole candidate file: imports, kernels and class ModelNew.")
    strategy: str = Field(description="A short name for the idea, e.g. 'online-softmax' or 'vec4-grid-stride'.")
    parent: str | None = Field(default=None, description="The candidate id this one improves on, if any.")


class CandidateArgs(BaseModel):
    candidate: str = Field(description="A candidate id (or its first 8+ characters).")


class NoArgs(BaseModel):
    pass


class EditArgs(BaseModel):
    candidate: str = Field(description="The candidate to start from (its id or first 8+ characters).")
    edits: str = Field(description="One or more blocks: '<<<<<<< SEARCH', lines copied exactly from the "
                       "candidate's source, '=======', their replacement, '>>>>>>> REPLACE'.")
    strategy: str = Field(description="A short name for the idea behind the change.")


SOURCE_LIMIT = 24000
"""Characters of a source shown to the model at once (a candidate file is far smaller)."""


class KernelTools:
    """The tools of one turn, bound to its context (the store, the judge, the budget)."""

    def __init__(self, ctx: ToolContext) -> None:
        self.ctx = ctx

    def resolve(self, prefix: str) -> str | None:
        matches = [c["id"] for c in self.ctx.store.candidates() if c["id"].startswith(prefix.strip())]
        return matches[0] if len(prefix.strip()) >= 6 and len(matches) == 1 else None

    def write_kernel(self, source: str, strategy: str, parent: str | None = None) -> str:
        parent_id = self.resolve(parent) if parent else None
        strict = not self.ctx.task.allow_partial
        report = check_candidate(source, strict=strict)
        name = strategy.strip()[:40]
        cid, new = self.ctx.store.add_candidate(source, parent_id, name or "unnamed", f"{name}|{MEASURED}",
                                                '{"why": "written by the model"}', self.ctx.generation)
        if cid not in self.ctx.written:
            self.ctx.written.append(cid)
        if not new:
            judged = self.ctx.store.evaluation(cid)
            return f"identical to candidate {cid[:10]}" + (
                f", already judged: {summarize_verdict(cid, judged)}" if judged else " (not judged yet)")
        status = "static checks pass" if report.passed else f"static checks FAIL: {report.first_failure()}"
        return f"saved as candidate {cid[:10]} ({len(source.splitlines())} lines); {status}"

    def compile_kernel(self, candidate: str) -> str:
        cid = self.resolve(candidate)
        if cid is None:
            return f"no candidate {candidate!r}: use an id returned by write_kernel"
        source = self.ctx.store.source_path(cid).read_text()
        report = check_candidate(source, strict=not self.ctx.task.allow_partial)
        lines = ["static checks pass" if report.passed else f"static checks FAIL: {report.first_failure()}"]
        if report.uses_load_inline:
            with tempfile.TemporaryDirectory() as tmp:
                gate = compile_gate(report.cuda_sources, Path(tmp))
            lines.append(f"nvcc: {'ok' if gate.passed else 'FAILED'}: {_trim(gate.detail, 1500)}")
        if report.triton_kernels:
            if self.ctx.triton_gate is None or not report.passed:
                lines.append(f"Triton kernels {', '.join(report.triton_kernels)} compile at their first launch, "
                             "inside check_kernel")
            else:
                lines.append(describe_triton_gate(self.ctx.triton_gate(cid)))
        return "\n".join(lines)

    def check_kernel(self, candidate: str) -> str:
        cid = self.resolve(candidate)
        if cid is None:
            return f"no candidate {candidate!r}: use an id returned by write_kernel"
        judged = self.ctx.store.evaluation(cid)
        if judged is not None:
            return "already judged: " + summarize_verdict(cid, judged)
        spent = self.ctx.budget_left()
        if spent:
            return f"not judged: {spent}"
        verdict = self.ctx.judge(cid)
        if verdict.correct:
            return summarize_verdict(cid, verdict)
        failed = next((c.name for c in verdict.checks if not c.passed), "unknown")
        guidance = prompts.render("repair", id=cid[:10], reason=_trim(verdict.reason or "no reason given", 300),
                                  check=failed)
        return summarize_verdict(cid, verdict) + "\n\n" + guidance

    def profile_kernel(self, candidate: str) -> str:
        cid = self.resolve(candidate)
        verdict = self.ctx.store.evaluation(cid) if cid else None
        if verdict is None:
            return f"no judged candidate {candidate!r}: check_kernel it first"
        if not verdict.correct:
            return summarize_verdict(cid, verdict)
        if self.ctx.profile is not None:
            try:
                return describe_profile(self.ctx.profile(cid))
            except Exception as exc:  # the profile is advice: say what failed, keep the turn going
                return f"profiling failed ({type(exc).__name__}: {_trim(str(exc), 300)}); " + _verdict_figures(verdict)
        return _verdict_figures(verdict)

    def read_result(self, candidate: str) -> str:
        cid = self.resolve(candidate)
        verdict = self.ctx.store.evaluation(cid) if cid else None
        if verdict is None:
            return f"no judged candidate {candidate!r}"
        lines = [summarize_verdict(cid, verdict)]
        lines += [f"{'pass' if c.passed else 'FAIL'} {c.name}: {_trim(c.detail, 300)}" for c in verdict.checks]
        return "\n".join(lines)

    def read_source(self, candidate: str) -> str:
        cid = self.resolve(candidate)
        if cid is None:
            return f"no candidate {candidate!r}: use an id from list_population or write_kernel"
        verdict = self.ctx.store.evaluation(cid)
        head = summarize_verdict(cid, verdict) if verdict else f"candidate {cid[:10]} (not judged yet)"
        return head + "\n\n" + _trim(self.ctx.store.source_path(cid).read_text(), SOURCE_LIMIT)

    def edit_kernel(self, candidate: str, edits: str, strategy: str) -> str:
        cid = self.resolve(candidate)
        if cid is None:
            return f"no candidate {candidate!r}: use an id from list_population or write_kernel"
        try:
            source = apply_edits(self.ctx.store.source_path(cid).read_text(), parse_edits(edits))
        except EditError as exc:
            return f"edit not applied: {exc}"
        return "edited; " + self.write_kernel(source, strategy, parent=cid)

    def read_torch_compile_code(self) -> str:
        if self.ctx.inductor_code is None:
            return "torch.compile's code is not available in this run"
        try:
            text = self.ctx.inductor_code()
        except Exception as exc:  # advice: say why, keep the turn going
            return f"torch.compile's code could not be had: {_trim(str(exc), 400)}"
        return _trim(text, SOURCE_LIMIT)

    def list_population(self) -> str:
        return self.ctx.population()

    def read_notes(self) -> str:
        notes = self.ctx.notes()
        return "\n".join(f"- {n}" for n in notes) if notes else "no notes yet"


def make_tools(ctx: ToolContext) -> list[BaseTool]:
    """The tools bound to one turn's context."""
    tools = KernelTools(ctx)
    specs = [
        (tools.write_kernel, "write_kernel", "Save a complete candidate file; returns its id and the static checks.",
         WriteArgs),
        (tools.compile_kernel, "compile_kernel", "Cheap gate: static checks, and nvcc with register/spill report for "
         "CUDA sources.", CandidateArgs),
        (tools.check_kernel, "check_kernel", "Ask the harness to judge a candidate (spends one evaluation).",
         CandidateArgs),
        (tools.profile_kernel, "profile_kernel", "Profile a judged candidate: roofline, GPU telemetry, registers and "
         "spills, Nsight Compute counters (DRAM/SM throughput, occupancy, stall reasons) and a diagnosis.",
         CandidateArgs),
        (tools.read_result, "read_result", "Every harness check of a judged candidate.", CandidateArgs),
        (tools.read_source, "read_source", "A candidate's source file, with its verdict.", CandidateArgs),
        (tools.edit_kernel, "edit_kernel", "Derive a new candidate from an existing one by SEARCH/REPLACE edits (saves "
         "it like write_kernel, with that one as parent); cheaper than rewriting the whole file.", EditArgs),
        (tools.read_torch_compile_code, "read_torch_compile_code", "The code torch.compile generates for the "
         "reference (inductor's kernels and the wrapper that launches them): the baseline to beat, and its "
         "fusions and launch configurations to learn from. Made once per run.", NoArgs),
        (tools.list_population, "list_population", "The elites and the strategies tried so far.", NoArgs),
        (tools.read_notes, "read_notes", "Strategy notes from earlier generations.", NoArgs),
    ]
    return [StructuredTool.from_function(func=f, name=n, description=d, args_schema=a) for f, n, d, a in specs]
