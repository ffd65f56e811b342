"""``kernelevo export`` of a model run: a module with ``optimize(model)`` that puts the verified
kernels into the user's network, and the run-time half that does it (imported by that module).

The exported file carries each kernel's source and provenance (run, candidate, verdicts). At load
time every kernel checks itself against the original region on random inputs of the captured
shapes; one that fails (or raises) is left out and the original region runs. A region whose inputs
differ in shape or dtype from the captured ones also runs the original code.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch

from kernelevo.agent.model import run as mr
from kernelevo.agent.model.runtime import apply, self_check  # noqa: F401 - where exported modules used to find them
from kernelevo.agent.store import RunStore

TEMPLATE = '''"""Kernels for {title}, found and verified by kernelevo.

Usage:
    from {stem} import optimize
    fast = optimize(model)          # the same model, its optimized regions running these kernels

Run {run} ({created}); end to end on {device}: {summary}.
Needs kernelevo importable at run time. Each kernel checks itself at load time and falls back to the
original region if it fails; inputs of other shapes or dtypes also run the original code.
"""

SPEC = {spec}


def optimize(model, example_inputs=None):
    """``model`` with its optimized regions replaced (a torch.fx GraphModule computing the same function)."""
    from kernelevo.agent.model.runtime import apply

    return apply(model, SPEC, example_inputs)
'''


def export(run_dir: Path, output: Path, keep_slower: bool = False) -> int:
    """Write ``output``; returns how many kernels it carries. A model the harness timed slower than
    eager end to end gets none (its ``optimize`` returns the model as it is) unless ``keep_slower``."""
    state = mr.load_state(run_dir)
    if state is None:
        raise FileNotFoundError(f"{run_dir} is not a model run (no {mr.MODEL_FILE})")
    e2e = state.get("end_to_end") or {}
    kernels = []
    slower = e2e.get("speedup") is not None and e2e["speedup"] < 1 and not keep_slower
    if e2e.get("correct") and not slower:
        for index, r in enumerate(state["regions"]):
            if r["state"] != "optimized" or not r["candidate"]:
                continue
            store = RunStore(Path(r["run_dir"]))
            search, final = store.evaluation(r["candidate"]), store.evaluation(r["candidate"], "final")
            source = store.source_path(r["candidate"]).read_text()
            store.close()
            kernels.append({"index": index, "name": f"{Path(run_dir).name}_{r['name']}_{r['candidate'][:10]}",
                            "region": r["name"], "source": source, "provenance": {
                                "run": str(r["run_dir"]), "candidate": r["candidate"],
                                "search": _brief(search), "final": _brief(final)}})
    config = mr.ModelRunConfig.model_validate(state["config"])
    model, inputs = mr.build(config.spec, "cpu")
    spec = {"regions": [r["nodes"] for r in state["regions"]], "kernels": kernels,
            "model_inputs": [{"shape": list(x.shape), "dtype": str(x.dtype).removeprefix("torch.")}
                             for x in inputs if isinstance(x, torch.Tensor)]}
    summary = (f"{e2e['speedup']:.2f}x against eager, slower: no kernels exported (--keep-slower keeps them)"
               if slower else f"{e2e['speedup']:.2f}x over eager" if e2e.get("speedup") else
               "verified equal to the original" if e2e.get("correct") else "not verified: no kernels exported")
    output.write_text(TEMPLATE.format(title=config.spec.path, stem=output.stem, run=run_dir,
                                      created=state.get("created", time.strftime("%Y-%m-%d")),
                                      device=state.get("device"), summary=summary, spec=repr(spec)))
    del model
    return len(kernels)


def _brief(verdict: Any) -> dict[str, Any] | None:
    if verdict is None:
        return None
    return {"correct": verdict.correct, "runtime_ms": verdict.runtime_ms, "speedup": verdict.speedup,
            "timing": verdict.timing, "device": verdict.device}
