"""The end-to-end check of a reassembled network, judged like any task.

The whole network becomes a task file (``Model`` builds the user's network from its spec, ``get_inputs``
draws its example inputs; partial replacement allowed; the model-level tolerance) and the
reassembled network a candidate (``ModelNew`` builds the same network and puts the regions' verified
kernels in). The judge then does what it does for every candidate: secret inputs per call, raw
outputs compared in the oracle, times on its own clock, the kernels turned off must break the output,
and on a GPU the forensic trace. Nothing the kernels' process writes decides the result.

Before that, on a GPU, a sandboxed job (``arbitrate.py``) times each replaced region in the
network with and without its kernel and says which kernels do not win there; that is advice, and
only chooses which kernels go into the candidate.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

from kernelevo.agent.model.runtime import ModelSpec, tolerance
from kernelevo.sandbox.isolation.namespaces import read_no_follow, remove_tree

TASK = '''"""The whole network of a model run, as a task (written by kernelevo)."""

import torch
import torch.nn as nn

from kernelevo.agent.model.runtime import ModelSpec, build, example_inputs

SPEC = ModelSpec.model_validate_json({spec!r})
ALLOW_PARTIAL = True
ATOL, RTOL = {atol!r}, {rtol!r}
SCALE_ATOL = True  # a network's small outputs (probabilities, say) held to their own scale


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.net, _ = build(SPEC, str(torch.get_default_device()), inputs=False)

    def forward(self, *args):
        return self.net(*args)


def get_inputs():
    return example_inputs(SPEC, str(torch.get_default_device()))


def get_init_inputs():
    return []
'''

CANDIDATE = '''"""The network of a model run with its regions' verified kernels (written by kernelevo)."""

import torch
import torch.nn as nn

from kernelevo.agent.model.runtime import ModelSpec, reassemble

SPEC = ModelSpec.model_validate_json({spec!r})
REGIONS = {regions!r}
KERNELS = {kernels!r}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        kernels = {{int(k): tuple(v) for k, v in KERNELS.items()}}
        self.net = reassemble(SPEC, str(torch.get_default_device()), REGIONS, kernels)

    def forward(self, *args):
        return self.net(*args)
'''


def local_spec(spec: ModelSpec, folder: Path) -> ModelSpec:
    """``spec`` with its files copied into ``folder`` (the sandboxes read that folder, nothing else)."""
    folder.mkdir(parents=True, exist_ok=True)
    local = spec.model_copy()
    for field_name in ("path", "inputs", "init"):
        value = getattr(spec, field_name)
        if value:
            file_text, _, attr = value.partition(":")
            copy = folder / f"{field_name}_{Path(file_text).name}"
            shutil.copyfile(file_text, copy)
            setattr(local, field_name, f"{copy}:{attr}" if attr else str(copy))
    return local


def write_files(spec: ModelSpec, regions: list[list[str]], kernels: dict[str, list[str]], folder: Path,
                dtype_name: str | None) -> tuple[Path, Path]:
    """The network's task file and the reassembled candidate, in ``folder``."""
    import torch

    atol, rtol = tolerance(getattr(torch, dtype_name) if dtype_name else torch.float32)
    task, candidate = folder / "network.py", folder / "reassembled.py"
    task.write_text(TASK.format(spec=spec.model_dump_json(), atol=atol, rtol=rtol))
    candidate.write_text(CANDIDATE.format(spec=spec.model_dump_json(), regions=regions, kernels=kernels))
    return task, candidate


def arbitrate(evaluator: Any, spec: ModelSpec, regions: list[list[str]], kernels: dict[str, list[str]],
              folder: Path, timeout_s: float) -> dict[str, Any]:
    """The sandboxed in-context timing (advice): ``{"reverted": {index: times}, "after": {piece: ms}}``."""
    job_dir = evaluator.job_dir("arbitrate")
    job = {"spec": spec.model_dump(mode="json"), "regions": regions, "kernels": kernels,
           "device": evaluator.device, "result": str(job_dir / "arbitration.json")}
    (job_dir / "job.json").write_text(json.dumps(job))
    cache = evaluator.caches.scratch()  # the kernels of many sources: compiled here, kept nowhere
    run_spec = evaluator.spec("", job_dir, timeout_s, trusted=False, channel=False, gpu_lock=True,
                              readable=[folder], compile_cache=cache,
                              cmd=[sys.executable, "-m", "kernelevo.agent.model.arbitrate", str(job_dir / "job.json")])
    try:
        outcome = evaluator.sandbox.run(run_spec)
    finally:
        remove_tree(cache)
    try:
        return json.loads(read_no_follow(job_dir / "arbitration.json"))
    except (OSError, ValueError):
        tail = " | ".join(outcome.log_tail.strip().splitlines()[-4:])
        return {"error": f"the in-context timing did not finish (exit code {outcome.returncode}): {tail}"}


def judge_network(evaluator: Any, task_path: Path, candidate: Path, folder: Path,
                  kernels: dict[str, list[str]]) -> dict[str, Any]:
    """The verdict on the reassembled network, as the end-to-end result of a model run (``kernels``: the
    regions' verified sources the candidate carries as text; their kernels are its own on the GPU)."""
    from kernelevo.sandbox.exit_codes import EXIT_ENVIRONMENT
    from kernelevo.sandbox.judge.evaluate import EvalError
    from kernelevo.tasks import load_task

    task = load_task(str(task_path), "full")
    try:
        verdict = evaluator.run_in_sandbox(task, candidate, [], readable=[folder],
                                           owned_sources=[source for source, _ in kernels.values()])
    except EvalError as exc:
        if exc.exit_code == EXIT_ENVIRONMENT:  # the machine cannot judge now: the run waits for it, not fails
            raise
        return {"correct": False, "reason": f"the original network could not be measured: {exc}"}
    result: dict[str, Any] = {
        "correct": verdict.correct, "reason": verdict.reason, "max_abs_error": verdict.max_abs_error,
        "timing": verdict.timing, "assurance": verdict.assurance, "checks": len(verdict.checks),
        "wrong_output": verdict.wrong_output,
        "eager_ms": verdict.reference_runtime_ms, "optimized_ms": verdict.runtime_ms}
    if verdict.timing == "cuda-events" and verdict.speedup is not None:
        result["speedup"] = verdict.speedup
        if verdict.compile_runtime_ms:
            result.update(compile_ms=verdict.compile_runtime_ms, vs_compile=verdict.speedup_vs_compile)
        if verdict.speedup < 1:
            result["note"] = "slower than eager: `kernelevo export` writes no kernels for it unless --keep-slower"
    return result


def exact_choices(regions: list[dict[str, Any]], kept: dict[str, list[str]]
                  ) -> tuple[dict[str, list[str]], dict[str, str | None]]:
    """For a network whose outputs disagreed with the original's although each kernel agreed on its own
    region: each kept region's fastest correct kernel that is as exact as eager (``AS_EXACT_AS_EAGER``),
    or none. A network can amplify a region's rounding (attention over large logits turns a small
    error in a projection into a different softmax); a kernel that allowed itself three bf16 products
    per fp32 one is within the precision rule alone, and may not be inside it. A region whose kernel's
    precision is unknown (no float64 reference: half-precision outputs) keeps it.

    Returns the kernels to judge again and, per kept region, the candidate now chosen (None: the
    region keeps its original code)."""
    from kernelevo.agent.store import RunStore

    chosen: dict[str, list[str]] = {}
    choice: dict[str, str | None] = {}
    for index, kernel in kept.items():
        region = regions[int(index)]
        store = RunStore(Path(region["run_dir"]))
        try:
            current = _verdict(store, region["candidate"])
            if current is None or current.precision_ratio is None:
                chosen[index], choice[index] = kernel, region["candidate"]
                continue
            timed = [(v.runtime_ms, item["id"]) for item in store.candidates()
                     if (v := _verdict(store, item["id"])) is not None and _as_exact(v)]
            best = min(timed, default=None)
            choice[index] = best[1] if best else None
            if best:
                chosen[index] = [store.source_path(best[1]).read_text(), f"{region['name']}_{best[1][:10]}"]
        finally:
            store.close()
    return chosen, choice


def _verdict(store: Any, candidate: str) -> Any:
    return store.evaluation(candidate, "final") or store.evaluation(candidate)


def _as_exact(verdict: Any) -> bool:
    """Correct, no slower than eager where timed on a GPU, and as exact as eager."""
    from kernelevo.sandbox.judge.rules import AS_EXACT_AS_EAGER

    slower = verdict.timing == "cuda-events" and verdict.speedup is not None and verdict.speedup < 1
    return (verdict.correct and verdict.runtime_ms is not None and not slower
            and verdict.precision_ratio is not None and verdict.precision_ratio <= AS_EXACT_AS_EAGER)
