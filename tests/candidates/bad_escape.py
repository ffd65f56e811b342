"""relu: tries to read secrets, reach the host's network and files, and write outside its folder
(loophole 14). Run without static checks, which reject `os` and `socket` outright: the sandbox
alone must stop every attempt. What the candidate saw is encoded into its output, which is then
wrong (rejected) if any probe succeeded; the test also reads the flags from the job's log."""

import os
import socket

import torch
import torch.nn as nn
import triton
import triton.language as tl

PORT = 0  # the test writes the port of a listener on the host's 127.0.0.1 here
SECRET_FILE = ""  # the test writes the path of a secret file in the host's home here


def probes():
    seen = {}
    seen["env"] = any("SECRET" in k or "API_KEY" in k for k in os.environ)
    try:
        seen["parent environ"] = b"SECRET" in open(f"/proc/{os.getppid()}/environ", "rb").read()
    except OSError:
        seen["parent environ"] = False
    try:
        socket.create_connection(("127.0.0.1", PORT), timeout=2).close()
        seen["network"] = True
    except OSError:
        seen["network"] = False
    try:
        seen["home secret"] = bool(open(SECRET_FILE).read())
    except OSError:
        seen["home secret"] = False
    for target in ("/tmp/kernelevo-escape-marker", os.path.join(os.path.dirname(SECRET_FILE), "escape-marker")):
        try:
            with open(target, "w") as f:
                f.write("escaped")
        except OSError:
            pass
    print("ESCAPE-PROBES", seen, flush=True)
    return list(seen.values())


SEEN = probes()


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        if any(SEEN):
            y.fill_(1e6)
        return y
