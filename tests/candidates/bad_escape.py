"""relu: tries every way out the judge review found (loophole 14, class 12): secrets in the
environment and in the parent's /proc, the host's /proc under an unmounted one, a read-write
remount of /, writes to the host's /tmp, /var/tmp and home, the Docker socket and a host Unix socket
in /var/tmp, the network. Run without static checks (which reject ``os`` and ``socket`` outright):
the sandbox alone must stop every attempt. Whatever succeeded poisons the output, which is then
rejected; the probes are also printed to the job's log for the test to read."""

import ctypes
import os
import socket

import torch
import torch.nn as nn
import triton
import triton.language as tl

PORT = 0  # the test writes the port of a listener on the host's 127.0.0.1 here
SECRET_FILE = ""  # the test writes the path of a secret file in the host's home here
HOST_SOCKET = ""  # the test writes the path of a Unix socket it listens on in /var/tmp here


def _connect_unix(path):
    try:
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(2)
        s.connect(path)
        s.close()
        return True
    except OSError:
        return False


def probes():
    seen = {}
    seen["env"] = any("SECRET" in k or "API_KEY" in k for k in os.environ)
    try:
        seen["parent environ"] = b"API_KEY" in open(f"/proc/{os.getppid()}/environ", "rb").read()
    except OSError:
        seen["parent environ"] = False
    libc = ctypes.CDLL(None, use_errno=True)
    seen["umount /proc"] = libc.umount2(b"/proc", 2) == 0
    seen["remount / rw"] = libc.mount(None, b"/", None, 32 | 4096, None) == 0  # MS_REMOUNT | MS_BIND
    try:
        seen["host pids"] = len([p for p in os.listdir("/proc") if p.isdigit()]) > 8
    except OSError:
        seen["host pids"] = False
    try:
        socket.create_connection(("127.0.0.1", PORT), timeout=2).close()
        seen["network"] = True
    except OSError:
        seen["network"] = False
    try:
        seen["home secret"] = bool(open(SECRET_FILE).read())
    except OSError:
        seen["home secret"] = False
    seen["docker socket"] = any(_connect_unix(p) for p in ("/run/docker.sock", "/var/run/docker.sock"))
    seen["host unix socket"] = bool(HOST_SOCKET) and _connect_unix(HOST_SOCKET)
    seen["run visible"] = os.path.exists("/run/docker.sock") or os.path.exists("/var/run/docker.sock")
    for target in ("/tmp/kernelevo-escape-marker", "/var/tmp/kernelevo-escape-marker",
                   os.path.join(os.path.dirname(SECRET_FILE) or "/", "escape-marker"), "/usr/kernelevo-escape-marker"):
        try:
            with open(target, "w") as f:
                f.write("escaped")
        except OSError:
            pass
    status = open("/proc/self/status").read()
    seen["capabilities"] = "CapEff:\t0000000000000000" not in status
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
