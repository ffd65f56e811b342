"""``python -m kernelevo.agent.model.arbitrate job.json``, in the sandbox: time each replaced region of
a reassembled network in context, with its kernel and with its original code, and write which kernels
do not win there. Kernel code runs here, so what it writes is advice (it only chooses which kernels the
end-to-end candidate carries); the verdict on that candidate comes from the judge."""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path

from kernelevo.agent.model.runtime import ModelSpec, arbitrate, assemble, build


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    job = json.loads(Path(argv[0]).read_text())
    try:
        spec = ModelSpec.model_validate(job["spec"])
        kernels = {int(k): (v[0], v[1]) for k, v in job["kernels"].items()}
        model, inputs = build(spec, job["device"], seed=0)
        assembled = assemble(model, inputs, job["regions"], kernels)
        _, fresh = build(spec, job["device"], seed=1234)
        slower, after = arbitrate(assembled, fresh, job["device"], sorted(kernels))
        result = {"reverted": {str(i): {"kernel_ms": k, "original_ms": o} for i, (k, o) in slower.items()},
                  "after": after}
    except Exception as exc:
        result = {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()[-2000:]}
    Path(job["result"]).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
