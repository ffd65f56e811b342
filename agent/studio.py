"""The optimizer graph for LangGraph's own tools (``langgraph.json``): built over a fresh run folder
with the built-in policy on the built-in softmax task at the small size."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from kernelevo.agent.budget import Budget
from kernelevo.agent.builtin.policy import BuiltinPolicy
from kernelevo.agent.graph import Runtime, build_graph
from kernelevo.agent.store import RunStore
from kernelevo.sandbox.judge.evaluate import EvalConfig, Evaluator
from kernelevo.tasks import load_task


def make_graph(config: Any = None):  # noqa: ANN201 - a compiled LangGraph graph
    """A compiled optimizer graph over a temporary run (LangGraph's server adds its own checkpointer)."""
    run_dir = Path(tempfile.mkdtemp(prefix="kernelevo-studio-"))
    task = load_task("softmax", "small")
    policy = BuiltinPolicy()
    policy.prepare(task)
    evaluator = Evaluator(EvalConfig(workdir=run_dir / "work", compile_cache=run_dir / "cache"))
    final = Evaluator(EvalConfig(workdir=run_dir / "final", compile_cache=run_dir / "cache", seed_offset=1000))
    runtime = Runtime(task=task, store=RunStore(run_dir), policy=policy, budget=Budget(max_evals=6),
                      evaluator=evaluator, final_evaluator=final)
    return build_graph(runtime).compile()
