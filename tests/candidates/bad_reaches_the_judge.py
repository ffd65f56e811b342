"""relu: reaches for the judge's own files from the candidate's process. Without bubblewrap every job
sees the host's file system, so the judge's jobs can be kept from candidates only by user: this
candidate tries to write the oracle's compile cache (a poisoned inductor cache runs code in the
oracle), to write the run's compile cache or another candidate's part of it (a kernel left there would
be loaded in place of that candidate's own), to list and write the oracle's folder, to replace the task file the oracle imports, to write
the oracle's outbox and the folder of outboxes, to plant files in the folders of other candidates'
processes (the spare that will import the next candidate), to put a link in place of its own log, and
to connect to any channel it finds. Run without
static checks (which reject ``os`` outright): the file permissions alone must stop every attempt.
Whatever succeeded poisons the output; the probes are printed to the job's log for the test to read."""

import ctypes
import glob
import os
import socket

import torch
import torch.nn as nn
import triton
import triton.language as tl


def _writes(folder):
    target = os.path.join(folder, "planted-by-candidate")
    try:
        with open(target, "w") as f:
            f.write("planted")
        return True
    except OSError:
        return False


def _lists(folder):
    try:
        return bool(os.listdir(folder))
    except OSError:
        return False


def _connects(path):
    try:
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(1)
        s.connect(path)
        s.close()
        return True
    except OSError:
        return False


def _relinks_log():
    """Put a link where this process's log is: the judge, reading the log for the verdict, would read
    whatever the link points to."""
    try:
        os.unlink("process.log")
        os.symlink("/etc/hostname", "process.log")
        return True
    except OSError:
        return False


def probes():
    # relative to its folder, <workspace>/jobs/NNNN-worker: the folders above the workspace may be closed
    workspace = os.path.join("..", "..")
    oracles = glob.glob(os.path.join(workspace, "jobs", "*-oracle"))
    seen = {"oracles found": len(oracles)}
    seen["trusted cache written"] = _writes(os.path.join(workspace, "trusted-cache"))
    seen["oracle folder listed"] = any(_lists(o) for o in oracles)
    seen["oracle folder written"] = any(_writes(o) for o in oracles)
    seen["oracle outbox written"] = any(_writes(os.path.join(o, "out")) for o in oracles)
    seen["outboxes written"] = _writes(os.path.join(workspace, "outboxes"))
    # the spare process for the next candidate imports from its own folder: a module planted there
    # (or bytecode for its candidate.py) would run in the next candidate's process
    seen["a worker's folder written"] = any(_writes(w) for w in glob.glob(os.path.join(workspace, "jobs", "*-worker")))
    seen["the log replaced by a link"] = _relinks_log()
    # another process of the same user could attach to this one (the spare that judges the next candidate)
    seen["attachable"] = ctypes.CDLL(None).prctl(3, 0, 0, 0, 0) == 1  # PR_GET_DUMPABLE
    # a compile cache shared with other candidates: an extension or its lock planted for a later one
    caches = [os.environ.get(v, "") for v in ("TORCH_EXTENSIONS_DIR", "TRITON_CACHE_DIR")]
    # a cache of its own: mounted at one path (bubblewrap, Docker) or a folder of the run's cache's
    seen["a shared compile cache"] = not all(c.startswith("/kernelevo-cache") or os.sep + "procs" + os.sep in c
                                             for c in caches)
    # the run's compile cache holds every process's folder and every source's kept one: a kernel left
    # in another's would be loaded in place of that candidate's own
    root = os.path.join(workspace, "cache")
    procs = os.path.join(root, "procs")
    seen["the run's compile cache written"] = _writes(root)
    seen["the processes' caches listed"] = _lists(procs)
    seen["the kept caches listed"] = _lists(os.path.join(root, "kept"))
    # folders of known names (the test makes them, as other candidates' would be)
    seen["another process's cache written"] = _writes(os.path.join(procs, "e" * 32))
    seen["a kept cache written"] = _writes(os.path.join(root, "kept", "f" * 32))
    try:
        os.makedirs(os.path.join(root, "kept", "0" * 32, "triton"))
        seen["a kept cache made"] = True
    except OSError:
        seen["a kept cache made"] = False
    replaced = False
    for oracle in oracles:
        task = os.path.join(oracle, "task.py")
        try:
            os.replace(task, task + ".gone")
            replaced = True
        except OSError:
            pass
    seen["oracle task replaced"] = replaced
    seen["a channel answered"] = any(_connects(p) for p in glob.glob(os.path.join(workspace, "jobs", "*-oracle",
                                                                                   "channel.sock")))
    print("JUDGE-PROBES", seen, flush=True)
    return [v for k, v in seen.items() if k != "oracles found"]


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
