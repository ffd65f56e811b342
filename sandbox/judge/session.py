"""One judgement, driven from the trusted side: the oracle and the candidate's process talk only to
this session, which picks the inputs, keeps the clock and writes down what it saw.

The seeds of every input set are drawn here, per evaluation, and revealed to the candidate's
process only in the request of the call that uses them, after ``ModelNew`` is built: an
``__init__`` cannot know them, and every timed call gets values no earlier call saw, so no cache can
answer it. The candidate's outputs go to the oracle as raw bytes and are compared there. Outputs of
timed calls are checked too: after each timed call the session decides, at random, whether to ask
for its output, so the candidate cannot tell in advance which calls are looked at. The session's own
clock runs around every call; ``timing.py`` holds the candidate's reported times to it.
"""

from __future__ import annotations

import random
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from kernelevo.sandbox import wire
from kernelevo.sandbox.isolation import confinement
from kernelevo.sandbox.isolation.process import take_lock
from kernelevo.sandbox.isolation.protocol import Job
from kernelevo.sandbox.judge import device_memory, telemetry
from kernelevo.sandbox.judge.correctness import CorrectnessCalls
from kernelevo.sandbox.judge.disk import DISK_ROOM_BYTES, free_space, has_room
from kernelevo.sandbox.judge.plan import CONNECT_TIMEOUT_S, Plan, Stop, hello, oracle_asker, trace_line
from kernelevo.sandbox.judge.record import Record
from kernelevo.sandbox.judge.reported import reported_count
from kernelevo.sandbox.judge.timed_calls import TimedCalls

__all__ = ["Plan", "Session", "Stop", "oracle_asker"]

WORKER_DEATH_GRACE_S = 2.0
"""How long a candidate process whose channel closed may take to exit, so that how it died is seen."""
WORKER_REAP_S = 10.0
"""How long the judge waits for a killed candidate process to be reaped."""
FORENSIC_EXIT_GRACE_S = 5.0
"""How long a process under ncu may take to exit after its session: ncu writes its log then."""


DISK_ROOM_PER_FOOTPRINT = 4
"""A full disk during a session is the candidate's doing where the session began with ``DISK_ROOM_BYTES``
free and this many times the task's eager footprint (the most files of inputs and outputs one session
holds at once is a few tensors of the task's)."""


DEVICE_PHASE = "starting CUDA"
"""The round trip, before the candidate is named, in which the worker starts CUDA: what fails in it
is the judge's doing."""


class Session(CorrectnessCalls, TimedCalls):
    """Drives one oracle and one candidate process through a judgement."""

    def __init__(self, plan: Plan, oracle: Job, worker: Job, device_lock: Path | None) -> None:
        self.plan, self.oracle, self.worker, self.device_lock = plan, oracle, worker, device_lock
        self.record = Record(device=plan.device)
        self.rng = random.SystemRandom()  # what it draws the candidate may see: no state to rebuild
        self._keys = 0
        self.reference_bytes = 0
        """The largest total of the reference's outputs the oracle has reported (timed checks above the
        sampling size are drawn differently)."""
        self._worker_broke = False
        self._held: Any = None
        self.free_at_start = free_space(plan.worker_outbox)

    def ask(self, job: Job, who: str, phase: str, message: dict[str, Any]) -> dict[str, Any]:
        job.phase = phase
        timeout = max(job.remaining(), 0.01)
        if who == "oracle":
            timeout = min(timeout, self.plan.oracle_timeout_s)
        sent = time.monotonic()
        try:
            reply = job.channel(CONNECT_TIMEOUT_S).request(message, timeout=timeout, finite=who == "worker")
        except wire.ChannelError as exc:
            self._worker_broke |= who == "worker" and not isinstance(exc, wire.ChannelTimeout)
            raise Stop(who, phase, str(exc), broken=True) from None
        trace_line("KERNELEVO_SESSION_TRACE", {"who": who, "phase": phase, "op": message.get("op"),
                                              "s": round(time.monotonic() - sent, 4)})
        if who == "oracle":
            # the candidate's process waits while the oracle works (a float64 reference made on the host
            # can take minutes at a task's real size): that time is not the candidate's
            self.worker.extend(time.monotonic() - sent)
        if who == "oracle" and not reply.get("ok"):
            raise Stop("oracle", phase, str(reply.get("error")), bool(reply.get("task_error")),
                       out_of_memory=reply.get("out_of_memory"), disk_full=bool(reply.get("disk_full")))
        return reply

    def expect(self, phase: str, message: dict[str, Any]) -> dict[str, Any]:
        """The oracle's expected outputs for one input set (``message``: key, seed, variant, ...)."""
        reply = self.ask(self.oracle, "oracle", phase, {"op": "expect", **message})
        sizes = [o.get("bytes") for o in reply.get("outputs", []) if isinstance(o, dict)]
        if sizes and all(isinstance(b, int) for b in sizes):  # the oracle's own figures
            self.reference_bytes = max(self.reference_bytes, sum(sizes))
        return reply

    def key(self) -> str:
        self._keys += 1
        return f"k{self._keys}"

    def tolerance(self, dtype: str) -> dict[str, float]:
        atol, rtol = self.plan.task.tolerances(dtype)
        return {"atol": atol, "rtol": rtol, "scale_atol": self.plan.task.scale_atol}

    def run(self) -> Record:
        began = time.monotonic()
        try:
            for job, who in ((self.oracle, "oracle"), (self.worker, "worker")):
                hello(job, who)
            self.record.phases["starting the processes"] = round(time.monotonic() - began, 4)
            # held until close() has ended the candidate's process: none of its threads may use the
            # GPU while another judgement holds it
            self._held = self._gpu()
            self._held.__enter__()
            self._phases(began)
        except Stop as stop:
            self._stopped(stop)
        except (KeyError, TypeError, ValueError, AttributeError, ArithmeticError, RecursionError) as exc:
            # The oracle's replies are well formed by construction; a field of the wrong shape came from
            # the candidate's process, which writes whatever it likes: its failure, never the run's.
            self.record.failure = (f"{self.worker.phase}: the candidate's process answered in a malformed way "
                                   f"({type(exc).__name__}: {str(exc)[:200]})")
        return self.record

    def _stopped(self, stop: Stop) -> None:
        """Whose failure a stopped session is: the reference's, the judge's, or the candidate's."""
        if stop.who == "oracle" and stop.out_of_memory:
            self._out_of_memory(stop)
        elif stop.who == "oracle" and stop.disk_full:
            self._disk_full(stop)
        elif stop.who == "oracle":
            self.record.reference_error = f"the task's reference failed during {stop.phase}: {stop.detail}"
            # a reference that stops answering (a timeout, a lost channel) may have been starved by the
            # candidate beside it; one that raises is its own failure
            self.record.reference_failed_beside = stop.broken and not stop.task_error
        elif stop.phase == DEVICE_PHASE:  # before the candidate was named: the judge's failure
            self.record.harness_error = cuda_unusable(stop.detail, self.worker.isolation)
            self.record.cuda_start_failed = True
        else:
            self.record.failure = f"{stop.phase}: {stop.detail}"

    def _disk_full(self, stop: Stop) -> None:
        """The oracle found the disk full. With room for this session's files when it began, something
        filled the disk while it ran: the candidate's process, the one untrusted writer (a run's other
        evaluation could too, rarely). Without it, the machine's: the judge's failure, to resume once
        there is room."""
        free = ("unknown space" if self.free_at_start is None else
                f"{device_memory.gib(self.free_at_start[0])} and {self.free_at_start[1]} files")
        room = max(DISK_ROOM_BYTES, DISK_ROOM_PER_FOOTPRINT * (self.plan.eager_peak_bytes or 0))
        if has_room(self.free_at_start, room):
            self.record.failure = (f"{stop.phase}: the disk filled while the candidate's process ran ({free} free "
                                   f"when its session began): {stop.detail}")
        else:
            self.record.harness_error = (f"the disk holding the judge's work folder is full ({free} free when "
                                         f"this session began): free space, then go on: {stop.detail}")

    def _out_of_memory(self, stop: Stop) -> None:
        """The oracle ran out of device memory: the candidate's fault where its process held more than its
        share of the GPU (by the driver's count of its processes, or, where the driver cannot say, by
        what every process but the oracle held), the judge's (stopping the run, with the figures)
        otherwise."""
        use = stop.out_of_memory or {}
        total, free, own = int(use.get("total", 0)), int(use.get("free", 0)), int(use.get("own", 0))
        others = max(total - free - own, 0)
        footprint = self.plan.eager_peak_bytes
        measured = telemetry.gpu_memory_of(self.worker.host_pids())
        held = measured if measured is not None else others
        allowed = device_memory.candidate_share(footprint, measured=measured is not None)
        if allowed is not None and held > allowed:
            whose = ("the candidate's process" if measured is not None
                     else "the other processes (the candidate's among them)")
            self.record.failure = (f"{stop.phase}: {whose} held {device_memory.gib(held)} of the GPU's "
                                   f"{device_memory.gib(total)} when the reference ran out of memory; the candidate's "
                                   f"share is about {device_memory.gib(allowed)} (the task's own footprint is "
                                   f"{device_memory.gib(footprint or 0)})")
            return
        detail = (stop.detail.splitlines() or [""])[0]
        self.record.reference_error = (
            f"the judge ran out of device memory during {stop.phase}: the oracle held {device_memory.gib(own)}, "
            f"other processes {device_memory.gib(others)}, of {device_memory.gib(total)} "
            f"(one eager call peaks at {device_memory.gib(footprint or 0)}): {detail}")

    def close(self) -> None:
        """End the candidate's process and let the kept oracle forget what this session asked of it.

        A process whose session succeeded has nothing more to give, and its interpreter's teardown (a
        second or two with torch loaded) would only delay the verdict: it is killed at once, except under
        ncu, which writes its log as the process exits. One whose channel broke is given time to exit: it
        is most likely dying of a signal, and killing it first would hide that signal behind our SIGKILL."""
        if self.record.failure is None:
            grace = FORENSIC_EXIT_GRACE_S if self.plan.forensic else 0.0
        else:
            grace = WORKER_DEATH_GRACE_S if self._worker_broke else 0.0
        try:
            deadline = time.monotonic() + grace
            while self.worker.alive() and time.monotonic() < deadline:
                time.sleep(0.02)
            if self.worker.alive():
                self.worker.kill()
            # the whole job gone (every process of it reaped, its cgroup emptied) before the lock is
            # given back: a dying process can still hold the GPU and its memory
            self.worker.wait(WORKER_REAP_S)
            try:
                self.oracle.channel(1.0).request({"op": "reset"}, timeout=30)
            except wire.ChannelError:
                self.oracle.kill()
        finally:
            if self._held is not None:
                self._held.__exit__(None, None, None)
                self._held = None

    def _gpu(self) -> Any:
        """Hold the GPU's lock for the judgement (both processes have started; waiting costs neither
        its timeout)."""
        if self.device_lock is None:
            return nullcontext()
        handle, waited = take_lock(self.device_lock, give_up=lambda: not (self.worker.alive() and self.oracle.alive()))
        # another judgement's turn on the GPU, inside "total": said apart so a verdict's seconds add up
        self.record.phases["waiting for the GPU"] = round(waited, 4)
        for job in (self.oracle, self.worker):
            job.extend(waited)
            job.isolation.device_lock, job.isolation.device_lock_wait_s = str(self.device_lock), round(waited, 3)
        return handle

    def _phases(self, began: float) -> None:
        plan = self.plan
        self.ask(self.oracle, "oracle", "loading the reference",
                 {"op": "load", "task": str(plan.oracle_task_path or plan.task_path), "size": plan.task.size,
                  "dtype": plan.task.dtype, "device": plan.device, "init_seed": plan.init_seed,
                  "outbox": str(plan.oracle_outbox or "")})
        if not self._build():
            return
        if plan.forensic:
            calls_began = time.monotonic()
            self._forensic_calls()
            self.record.phases["forensic calls"] = round(time.monotonic() - calls_began, 4)
            self.record.phases["total"] = round(time.monotonic() - began, 4)
            return
        self._checks()
        if self.record.ok:
            self._timing()
        if self.record.ok:
            self._ghost()
        if self.record.ok and plan.cuda_graph:
            self._graph_timing()
        if self.record.ok:
            self._finish()
        self.record.phases["total"] = round(time.monotonic() - began, 4)

    def _build(self) -> bool:
        plan = self.plan
        if plan.device == "cuda" and not self._device():
            return False
        began = time.monotonic()
        reply = self.ask(self.worker, "worker", "importing the candidate and building ModelNew",
                         {"op": "build", "task": str(plan.task_path), "candidate": str(plan.candidate_path),
                          "size": plan.task.size, "dtype": plan.task.dtype, "device": plan.device,
                          "init_seed": plan.init_seed, "outbox": str(plan.worker_outbox),
                          "inbox": str(plan.oracle_outbox or ""), "reference_first": plan.forensic})
        self.record.phases["importing the candidate"] = round(time.monotonic() - began, 4)
        if not reply.get("ok"):
            self.record.add("import", False, str(reply.get("error")))
            return False
        self.record.add("import", True, "imported; ModelNew built with the task's init inputs and seed")
        return True

    def _device(self) -> bool:
        """CUDA started in the candidate's process before the candidate is named: a failure here is the
        judge's (its sandbox keeps the driver out), told apart from the candidate's because no
        candidate code has run to answer for the worker. Any later answer is the candidate's to forge."""
        reply = self.ask(self.worker, "worker", DEVICE_PHASE, {"op": "device", "device": "cuda"})
        if reply.get("ok"):
            return True
        detail = reply.get("device_unusable") or reply.get("error") or "no reason given"
        self.record.harness_error = cuda_unusable(str(detail), self.worker.isolation)
        self.record.cuda_start_failed = True
        return False

    def _peaks(self, candidate: Any) -> None:
        """Peak device memory: the oracle's over this session, and the candidate's as its process says."""
        oracle = self.ask(self.oracle, "oracle", "reading its peak memory", {"op": "memory"}).get("peak_bytes")
        for who, value in (("oracle", oracle), ("candidate", candidate)):
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                self.record.peak_bytes[who] = value

    def _finish(self) -> None:
        reply = self.ask(self.worker, "worker", "finishing", {"op": "finish"})
        self.record.worker_modules = [str(m) for m in reply.get("modules") or []]
        if self.plan.device == "cuda":
            self._peaks(reply.get("peak_bytes"))
        new_threads = reported_count(reply.get("new_threads") or 0)
        self.record.add("no new threads", new_threads <= 0, "no threads left running" if new_threads <= 0
                        else f"{new_threads} new thread(s) left running")


def cuda_unusable(detail: str, isolation: Any) -> str:
    """The message for a candidate's process in which CUDA did not start, with what may be the cause."""
    writes = getattr(isolation, "writes", None) or "not reported"
    said = (f"the harness failed: CUDA did not start in the candidate's sandboxed process, before any of its "
            f"code ran ({detail[:400]}); confinement: {writes[:200]}. Run `kernelevo doctor`")
    if writes.startswith("landlock"):
        said += (f": where it says CUDA does not start confined, {confinement.OFF_ENV}=0 turns the confinement "
                 "off (and ncu's trace is then within the candidate's reach)")
    return said
