"""relu: a correct kernel whose process answers the judge's `finish` request with a number the judge
cannot take: JSON `Infinity` as its count of new threads (``int(inf)`` raises OverflowError), or, with
MODE "deep", a reply nested 200,000 levels deep (the JSON parser's RecursionError). Either, escaping
the session, would end the judge and the search with it; each must be the candidate's failure."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

MODE = "deep"


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


_main = torch.hub.sys.modules["__main__"]
_honest_finish = _main.HANDLERS["finish"]


def _finish(worker, msg):
    reply = _honest_finish(worker, msg)
    if MODE == "inf":
        reply.update({"new_threads": float("inf")})
        return reply
    worker.channel.sock.sendall(b"")  # the deep reply is sent raw below
    body = b"[" * 200000 + b"]" * 200000
    raw = b'{"ok": true, "x": ' + body + b"}"
    worker.channel.sock.sendall(len(raw).to_bytes(4, "big") + raw)
    return reply


_main.HANDLERS.update({"finish": _finish})


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y
