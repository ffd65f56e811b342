"""Parameter sets of one built-in template side by side (not a test; needs a GPU).

Renders the built-in policy's seed for a task with each ``--set`` override, checks every variant
against the reference on fresh inputs, and times eager, torch.compile and each variant the same way
(`triton.testing.do_bench`, median, after a warm-up), so that one template parameter is measured by
itself rather than through a search. ``--edit`` rewrites one line of the task's source first (a
shape the built-in tasks do not have, such as rows of 4100).

Usage:
  python bench/param_ab.py softmax --edit 'rows, cols = 32768, 16384=>rows, cols = 32768, 4100' \\
      --set VEC=1 --set VEC=4
  python bench/param_ab.py attention --seed 2 --set TMA=false --set TMA=true --out ab.json
  python bench/param_ab.py row_sum --edit 'rows, cols = 65536, 16384=>rows, cols = 32, 8388608' \
      --set seed=0 --set seed=2      # the split seed against the looped one
  python bench/param_ab.py level2/1_Conv2D_ReLU_BiasAdd.py --set strategy=implicit_gemm \
      --set strategy=tap_major,CHANNELS_LAST=true   # two templates' first seeds
  python bench/param_ab.py level1/75_conv_transposed_2D_...py --set seed=0 --file edited.py
      # a candidate written by hand (a render changed to try an idea) beside the seed
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any


def parse_set(text: str) -> dict[str, Any]:
    """``"VEC=4,TMA=true"`` -> ``{"VEC": 4, "TMA": True}`` (values read as JSON, else kept as text)."""
    out: dict[str, Any] = {}
    for part in filter(None, text.split(",")):
        name, _, value = part.partition("=")
        try:
            out[name.strip()] = json.loads(value)
        except json.JSONDecodeError:
            out[name.strip()] = value
    return out


def variant_of(offered: list, override: dict[str, Any], default_seed: int) -> tuple[str, dict, str] | None:
    """(strategy, params, why) of one ``--set``: ``seed=N`` picks another of the policy's seeds,
    ``strategy=NAME`` that strategy's first; the other names override its parameters."""
    wanted = override.pop("strategy", None)
    index = override.pop("seed", default_seed)
    if wanted is not None:
        index = next((i for i, (s, _, _) in enumerate(offered) if s == wanted), None)
        if index is None:
            print(f"no seed of strategy {wanted!r}: {sorted({s for s, _, _ in offered})}", file=sys.stderr)
            return None
    strategy, params, why = offered[index]
    return strategy, dict(params, **override), why


def task_file(name: str, edit: str | None, scratch: Path) -> str:
    """The task to load: the built-in or file ``name``, with ``OLD=>NEW`` applied to its source."""
    if not edit:
        return name
    from kernelevo.tasks import load_task

    source = Path(load_task(name).path).read_text()
    old, _, new = edit.partition("=>")
    if old not in source:
        raise SystemExit(f"--edit: {old!r} is not in the task's source")
    path = scratch / f"{Path(name).stem}_edited.py"
    path.write_text(source.replace(old, new, 1))
    return str(path)


def checked(task: Any, path: Path, inputs: list, expected: Any, label: str, device: str) -> tuple[Any, float | None]:
    """The candidate at ``path`` built and run once: (its callable, or None where it failed or is outside
    the task's tolerance; its max error). Reported, not judged: the judge's precision rule is the real
    test; a wrong variant is not timed."""
    import torch

    from kernelevo.tasks.loader import instantiate_candidate

    try:  # one variant that fails to compile or launch (shared memory, say) is its own row's end
        fn = instantiate_candidate(task, path, device)
        got = fn(*inputs)
    except Exception as exc:
        print(f"failed ({type(exc).__name__}: {str(exc)[:200]}): {label}", file=sys.stderr, flush=True)
        return None, None
    atol, rtol = task.tolerances(str(expected.dtype).removeprefix("torch."))
    same = got.shape == expected.shape and torch.allclose(got, expected, rtol=rtol, atol=atol)
    error = float((got.double() - expected.double()).abs().max()) if got.shape == expected.shape else None
    print(f"max error {error} ({'within' if same else 'OUTSIDE'} the task's tolerance): {label}",
          file=sys.stderr, flush=True)
    return (fn if same else None), error


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("task")
    parser.add_argument("--seed", type=int, default=0, help="which of the policy's seeds (default: the first)")
    parser.add_argument("--set", action="append", default=[],
                        help="NAME=VALUE[,NAME=VALUE]: one variant; seed=N starts it from another seed")
    parser.add_argument("--edit", help="OLD=>NEW: a one-line change to the task's source")
    parser.add_argument("--file", action="append", default=[], type=Path,
                        help="a candidate file to check and time beside the variants (repeatable)")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--device", default="cuda", help="cpu: a smoke test under TRITON_INTERPRET=1 (no timings)")
    args = parser.parse_args()

    import torch
    import triton.testing

    # as the judge measures: fp32 convolutions and matmuls in IEEE fp32, not TF32
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    from kernelevo.agent.builtin.policy import seeds
    from kernelevo.agent.builtin.recognize import recognise
    from kernelevo.agent.builtin.templates import render
    from kernelevo.tasks.loader import instantiate, load_task

    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp, torch.no_grad():
        scratch = Path(tmp)
        task = load_task(task_file(args.task, args.edit, scratch))
        plan = recognise(task)
        offered = seeds(plan)
        model, inputs = instantiate(task, device=args.device)
        expected = model(*inputs)
        timed = {"eager": model}
        if args.device == "cuda":
            timed["torch.compile"] = torch.compile(model)
        errors: dict[str, float | None] = {}
        candidates: list[tuple[str, Path]] = []
        for i, text in enumerate(args.set or ([] if args.file else [""])):
            picked = variant_of(offered, parse_set(text), args.seed)
            if picked is None:
                continue
            strategy, variant, why = picked
            path = scratch / f"variant{i}.py"
            path.write_text(render(plan, strategy, variant, why))
            candidates.append((f"{strategy} {json.dumps(variant, sort_keys=True)}", path))
        candidates += [(f"file {path}", path) for path in args.file]
        for label, path in candidates:
            fn, error = checked(task, path, inputs, expected, label, args.device)
            errors[label] = error
            if fn is not None:
                timed[label] = fn
        for label, fn in timed.items():
            fn(*inputs)
            if args.device != "cuda":
                print(f"correct: {label}")
                continue
            ms = triton.testing.do_bench(lambda fn=fn: fn(*inputs), warmup=100, rep=500, return_mode="median")
            rows.append({"callable": label, "ms": ms, "max_error": errors.get(label)})
            print(f"{ms:8.4f} ms  {label}", flush=True)
    if not rows:
        return
    eager = rows[0]["ms"]
    for row in rows:
        row["vs_eager"] = eager / row["ms"]
    result = {"task": args.task, "edit": args.edit, "plan": plan.describe(), "rows": rows}
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
