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

import json
import os
import random
import secrets
import statistics
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelevo.sandbox import wire
from kernelevo.sandbox.child.inputs import VARIANTS, variant_label
from kernelevo.sandbox.child.launches import MAX_HOST_READ_ELEMENTS
from kernelevo.sandbox.child.timed import call_ms, same_digest
from kernelevo.sandbox.isolation.process import take_lock
from kernelevo.sandbox.isolation.protocol import Job
from kernelevo.sandbox.judge import device_memory, rules, telemetry
from kernelevo.sandbox.judge.record import Record
from kernelevo.sandbox.judge.timing import PACE_MEASUREMENTS, Block
from kernelevo.sandbox.models import TimingPolicy
from kernelevo.tasks.task import Task

GRAPH_PHASE_S = 120.0
"""Time added to the candidate's deadline for the optional CUDA-graph phase (capture and replays)."""
CONNECT_TIMEOUT_S = 180.0
"""How long a process may take to start (Python, torch and Triton imports) and connect."""
WORKER_DEATH_GRACE_S = 2.0
"""How long a candidate process whose channel closed may take to exit, so that how it died is seen."""


class Stop(Exception):
    """The session cannot go on: ``who`` ("worker" or "oracle") failed during ``phase``;
    ``task_error``: the task itself is unusable (its reference raised or is not finite); ``broken``:
    the channel itself failed (a timeout, a closed socket), so no later request can be trusted."""

    def __init__(self, who: str, phase: str, detail: str, task_error: bool = False, broken: bool = False,
                 out_of_memory: dict[str, int] | None = None) -> None:
        super().__init__(detail)
        self.who, self.phase, self.detail, self.task_error, self.broken = who, phase, detail, task_error, broken
        self.out_of_memory = out_of_memory
        """The oracle ran out of device memory: the GPU's total, free and the oracle's own bytes."""


def trace_call(who: str, op: str, reply: dict[str, Any], wall_ms: float) -> None:
    """With ``KERNELEVO_TIMING_TRACE`` set to a file, append each timed call's reported parts and the
    session's wall time as a JSON line (for the timing benchmarks; nothing reads it back)."""
    path = os.environ.get("KERNELEVO_TIMING_TRACE")
    if path:
        fields = {k: reply.get(k) for k in ("gpu_ms", "lag_ms", "host_ms", "parts")}
        with open(path, "a") as out:
            out.write(json.dumps({"who": who, "op": op, **fields, "wall_ms": wall_ms}) + "\n")


def hello(job: Job, who: str) -> None:
    """Read a kept or new process's greeting (once), and its identity from the host's /proc."""
    if job.greeted:
        return
    job.phase = "starting"
    try:
        job.channel(CONNECT_TIMEOUT_S).recv(timeout=min(CONNECT_TIMEOUT_S, job.remaining()))
    except wire.ChannelError as exc:
        raise Stop(who, "starting", str(exc)) from None
    job.greeted = True
    uid, caps = job.identity()
    job.isolation.uid, job.isolation.capabilities = uid, caps


def oracle_asker(oracle: Any, timeout_s: float) -> Any:
    """``ask(message, phase)`` for a kept oracle outside a session (the baselines)."""
    hello(oracle.job, "oracle")

    def ask(message: dict[str, Any], phase: str) -> dict[str, Any]:
        oracle.job.phase = phase
        try:
            reply = oracle.job.channel(CONNECT_TIMEOUT_S).request(message, timeout=min(timeout_s,
                                                                                       oracle.job.remaining()))
        except wire.ChannelError as exc:
            raise Stop("oracle", phase, str(exc)) from None
        if not reply.get("ok"):
            raise Stop("oracle", phase, str(reply.get("error")), bool(reply.get("task_error")))
        return reply

    return ask


@dataclass
class Plan:
    """What to judge and how."""

    task: Task
    task_path: Path
    candidate_path: Path
    device: str
    timing: TimingPolicy
    checked_sets: int = 5
    init_seed: int = 42
    strict_layout: bool = False
    worker_outbox: Path | None = None
    oracle_task_path: Path | None = None
    """The oracle's own copy of the task file (it cannot see the candidate's folder)."""
    forensic: bool = False
    """The forensic pass: the reference's constructor and a marker kernel before the candidate is
    imported, inputs as files from the oracle, checked calls only (``forensic.py``)."""
    oracle_outbox: Path | None = None
    oracle_timeout_s: float = 1200.0
    """The longest the oracle may take to answer one request."""
    cuda_graph: bool = False
    """Also time the candidate and the reference replayed as CUDA graphs, beside the plain calls."""
    eager_peak_bytes: int | None = None
    """The task's own footprint on the GPU (``device_memory``), to say who ran the GPU out of memory."""


def fresh_seed() -> int:
    return secrets.randbelow(2**31 - 1) + 1


class Session:
    """Drives one oracle and one candidate process through a judgement."""

    def __init__(self, plan: Plan, oracle: Job, worker: Job, device_lock: Path | None) -> None:
        self.plan, self.oracle, self.worker, self.device_lock = plan, oracle, worker, device_lock
        self.record = Record(device=plan.device)
        self.rng = random.Random(secrets.randbits(64))
        self._keys = 0
        self._worker_broke = False

    # talking ----------------------------------------------------------------------------------
    def ask(self, job: Job, who: str, phase: str, message: dict[str, Any]) -> dict[str, Any]:
        job.phase = phase
        timeout = max(job.remaining(), 0.01)
        if who == "oracle":
            timeout = min(timeout, self.plan.oracle_timeout_s)
        try:
            reply = job.channel(CONNECT_TIMEOUT_S).request(message, timeout=timeout)
        except wire.ChannelError as exc:
            self._worker_broke |= who == "worker" and not isinstance(exc, wire.ChannelTimeout)
            raise Stop(who, phase, str(exc), broken=True) from None
        if who == "oracle" and not reply.get("ok"):
            raise Stop("oracle", phase, str(reply.get("error")), bool(reply.get("task_error")),
                       out_of_memory=reply.get("out_of_memory"))
        return reply

    def key(self) -> str:
        self._keys += 1
        return f"k{self._keys}"

    def tolerance(self, dtype: str) -> dict[str, float]:
        atol, rtol = self.plan.task.tolerances(dtype)
        return {"atol": atol, "rtol": rtol, "scale_atol": self.plan.task.atol is None}

    # the whole judgement ----------------------------------------------------------------------
    def run(self) -> Record:
        began = time.monotonic()
        try:
            for job, who in ((self.oracle, "oracle"), (self.worker, "worker")):
                hello(job, who)
            self.record.phases["starting the processes"] = round(time.monotonic() - began, 4)
            with self._gpu():
                self._phases(began)
        except Stop as stop:
            if stop.who == "oracle" and stop.out_of_memory:
                self._out_of_memory(stop)
            elif stop.who == "oracle":
                self.record.reference_error = f"the task's reference failed during {stop.phase}: {stop.detail}"
            else:
                self.record.failure = f"{stop.phase}: {stop.detail}"
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            # The oracle's replies are well formed by construction; a field of the wrong shape came from
            # the candidate's process, which writes whatever it likes: its failure, never the run's.
            self.record.failure = (f"{self.worker.phase}: the candidate's process answered in a malformed way "
                                   f"({type(exc).__name__}: {str(exc)[:200]})")
        return self.record

    def _out_of_memory(self, stop: Stop) -> None:
        """The oracle ran out of device memory: the candidate's fault where its process left the oracle
        less than its share of the GPU, the judge's (stopping the run, with the figures) otherwise."""
        use = stop.out_of_memory or {}
        total, free, own = int(use.get("total", 0)), int(use.get("free", 0)), int(use.get("own", 0))
        others = max(total - free - own, 0)
        footprint = self.plan.eager_peak_bytes
        if device_memory.candidate_crowded_out(others, total, footprint):
            self.record.failure = (f"{stop.phase}: the reference ran out of device memory while the candidate's "
                                   f"process held {device_memory.gib(others)} of the GPU's {device_memory.gib(total)} "
                                   f"(the task's own footprint is {device_memory.gib(footprint or 0)})")
        else:
            self.record.reference_error = (
                f"the judge ran out of device memory during {stop.phase}: the oracle held {device_memory.gib(own)}, "
                f"other processes {device_memory.gib(others)}, of {device_memory.gib(total)} "
                f"(one eager call peaks at {device_memory.gib(footprint or 0)}): {stop.detail.splitlines()[0]}")

    def close(self) -> None:
        """End the candidate's process (a finished one has exited; one still running is killed) and let
        the kept oracle forget what this session asked of it.

        A finished process is given time to exit. So is one whose channel broke: it is most likely
        dying of a signal, and killing it first would hide that signal behind our own SIGKILL."""
        grace = 5.0 if self.record.failure is None else WORKER_DEATH_GRACE_S if self._worker_broke else 0.0
        deadline = time.monotonic() + grace
        while self.worker.alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        if self.worker.alive():
            self.worker.kill()
        try:
            self.oracle.channel(1.0).request({"op": "reset"}, timeout=30)
        except wire.ChannelError:
            self.oracle.kill()

    def _gpu(self) -> Any:
        """Hold the GPU's lock for the judgement (both processes have started; waiting costs neither
        its timeout)."""
        if self.device_lock is None:
            return nullcontext()
        handle, waited = take_lock(self.device_lock, give_up=lambda: not (self.worker.alive() and self.oracle.alive()))
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

    # phases -----------------------------------------------------------------------------------
    def _build(self) -> bool:
        plan = self.plan
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

    def _checked_call(self, index: int, seed: int) -> None:
        variant = index % len(VARIANTS)
        label = f"set {index} ({variant_label(variant)})"
        key = self.key()
        expected = self.ask(self.oracle, "oracle", f"reference outputs for {label}",
                            {"op": "expect", "key": key, "seed": seed, "variant": variant, "exact": True})
        began = time.monotonic()
        reply = self.ask(self.worker, "worker", f"correctness call on {label}",
                         {"op": "call", "seed": seed, "variant": variant, "record": True, "name": f"set{index}"})
        if index == 0:
            self.record.first_call_ms = (time.monotonic() - began) * 1e3
        self._filters(reply, index)
        if not reply.get("ok"):
            self.ask(self.oracle, "oracle", "dropping an expectation", {"op": "drop", "key": key})
            self.record.add(f"correct: {label}", False, str(reply.get("error")))
            return
        if not expected.get("finite"):
            self.record.add(f"correct: {label}", True, "skipped: the reference itself is not finite here")
            return
        found = self._compare(key, reply, expected, f"comparing {label}")
        self.record.add(f"correct: {label}", found["problem"] is None, found["problem"] or
                        "within tolerance, judged by the oracle from the raw output")
        if found["problem"] is None:
            for stats, meta in zip(found["stats"], expected.get("outputs", [])):
                self.record.max_abs_error = max(self.record.max_abs_error, float(stats.get("max_abs_error") or 0.0))
                if meta["dtype"] in rules.PRECISION_FLOOR:
                    self.record.precision.add(stats)

    def _compare(self, key: str, reply: dict[str, Any], expected: dict[str, Any], phase: str,
                 digest_seed: int | None = None) -> dict[str, Any]:
        dtype = next((o["dtype"] for o in expected.get("outputs", [])), self.plan.task.dtype or "float32")
        self.record.exact_note = self.record.exact_note or expected.get("exact_note")
        try:
            return self.ask(self.oracle, "oracle", phase,
                            {"op": "compare", "key": key, "outputs": reply.get("outputs", []),
                             "folder": str(self.plan.worker_outbox), "strict_layout": self.plan.strict_layout,
                             "digest_seed": digest_seed, **self.tolerance(dtype)})
        finally:
            self._delete_outputs(reply)

    def _delete_outputs(self, reply: dict[str, Any]) -> None:
        """Delete the output files of a compared call: at a task's real sizes each can be gigabytes."""
        outbox = self.plan.worker_outbox
        for entry in reply.get("outputs") or []:
            name = entry.get("file") if isinstance(entry, dict) else None
            if outbox is not None and isinstance(name, str) and name and "/" not in name and name not in {".", ".."}:
                try:
                    (outbox / name).unlink()
                except OSError:  # never there, or not a file: nothing to free
                    pass

    def _filters(self, reply: dict[str, Any], index: int) -> None:
        """The worker's own records: first filters, which can only reject."""
        record = self.record
        for name, count in (reply.get("launches") or {}).items():
            record.launches[str(name)] = record.launches.get(str(name), 0) + int(count)
        for name, count in (reply.get("compute_ops") or {}).items():
            record.torch_ops[str(name)] = record.torch_ops.get(str(name), 0) + int(count)
        if index == 0 and reply.get("ok"):
            record.compiled = True
            failed = reply.get("failed") or {}
            record.add("custom kernel launched", bool(record.launches),
                       ", ".join(f"{k} x{v}" for k, v in record.launches.items()) or
                       "no custom kernel ran" + (f"; failed launches: {failed}" if failed else ""))
            outputs = reply.get("outputs") or []
            plain = all(o.get("type_name") == "Tensor" and o.get("device") == self.plan.device for o in outputs)
            record.add("plain tensors", plain, "outputs are plain torch.Tensors on the device" if plain else
                       "outputs must be plain torch.Tensors on the task's device (no subclasses, lazy or meta tensors)")
        if reply.get("inputs_changed"):
            record.add("inputs unchanged", False, f"input {reply['inputs_changed'][0]} was modified by the call")
        reads = int(reply.get("host_reads") or 0)
        if reads > MAX_HOST_READ_ELEMENTS and not self.plan.task.allow_partial:
            record.add("no host arithmetic", False, f"forward read {reads} values into Python (at most "
                       f"{MAX_HOST_READ_ELEMENTS} may be); this task is strict: the work must run in custom kernels")

    def _checks(self) -> None:
        began = time.monotonic()
        for index in range(self.plan.checked_sets):
            self._checked_call(index, fresh_seed())
            if not self.record.ok:
                break
        record = self.record
        if record.ok:
            record.add("inputs unchanged", True, "every input equals its copy after every call")
            compute = {k: v for k, v in record.torch_ops.items()}
            if self.plan.task.allow_partial:
                record.add("no torch compute", True, "partial replacement allowed" +
                           (f"; torch computed: {', '.join(sorted(compute))}" if compute else ""))
            else:
                record.add("no torch compute", not compute, "only glue ran in torch" if not compute else
                           f"torch computed {', '.join(f'aten.{k}' for k in sorted(compute))}; this task is strict: "
                           "the work must run in custom kernels")
            dtype = self.plan.task.dtype or "float32"
            problem = rules.precision_problem(record.precision, dtype)
            detail = problem or rules.precision_detail(record.precision)
            record.add("precision", problem is None, detail + (f"; {record.exact_note}" if record.exact_note else ""))
        record.phases["correctness"] = round(time.monotonic() - began, 4)

    def _timing(self) -> None:
        began = time.monotonic()
        gpu = self.plan.device == "cuda"
        before = telemetry.snapshot() if gpu else {}
        checked = problems = 0
        blocks = 2 if gpu else 1
        for number in range(blocks):
            block, found = self._timed_block(self.worker, "worker", f"timed block {number + 1}")
            self.record.blocks.append(block)
            checked += found[0]
            problems += len(found[1])
            if found[1]:
                self.record.add("timed runs correct", False, found[1][0])
                return
            if number == 0:
                self.record.reference_block, _ = self._timed_block(self.oracle, "oracle", "re-timing the reference")
        if gpu:
            self.record.telemetry = telemetry.around(before, telemetry.snapshot())
        problem = rules.precision_problem(self.record.timed_precision, self.plan.task.dtype or "float32")
        if problem:
            self.record.add("timed runs correct", False, f"the timed calls checked: {problem}")
            return
        self.record.add("timed runs correct", True,
                        f"{checked} timed calls, chosen after they ran, matched the reference (their outputs "
                        "the ones each call committed to, at the checked calls' precision)")
        self.record.phases["timing"] = round(time.monotonic() - began, 4)

    def _graph_timing(self) -> None:
        """``--cuda-graph``: the candidate and the reference replayed as CUDA graphs, timed beside the
        plain calls, never instead of them. A forward that cannot be captured, or whose replays are
        wrong, is explained in a note and keeps its plain verdict."""
        record = self.record
        if self.plan.device != "cuda":
            record.graph_note = "CUDA graphs need a GPU: not timed"
            return
        began = time.monotonic()
        self.worker.extend(GRAPH_PHASE_S)  # an optional phase: it never eats the time the candidate is given
        try:
            block, (_, problems) = self._timed_block(self.worker, "worker", "CUDA-graph replays", op="graph_timed")
            if problems:
                record.graph_note = f"the candidate's CUDA-graph replays were wrong, so no graph time: {problems[0]}"
                return
            record.graph_block = block
            # From here the oracle holds a capture (or a failed one): it is not kept for other sessions.
            record.oracle_unfit = True
            record.graph_reference_block, _ = self._timed_block(self.oracle, "oracle",
                                                                "CUDA-graph replays of the reference", op="graph_timed")
        except Stop as stop:
            if stop.broken:  # a channel that timed out or closed is out of step: the session cannot go on
                raise
            whose = "the candidate" if stop.who == "worker" else "the reference"
            record.graph_note = f"{whose} could not be timed as a CUDA graph: {stop.detail}"
        finally:
            record.phases["CUDA-graph timing"] = round(time.monotonic() - began, 4)

    def _timed_block(self, job: Job, who: str, phase: str, op: str = "timed") -> tuple[Block, tuple[int, list[str]]]:
        policy, gpu = self.plan.timing, self.plan.device == "cuda"
        self.ask(job, who, f"{phase}: warm-up", {"op": "warmup", "seed": fresh_seed(),
                                                  "calls": policy.warmup if gpu else 1,
                                                  "seconds": policy.warmup_s if gpu else 0.0})
        least, most = (policy.min_runs, policy.max_runs) if gpu else (3, 3)
        checks = min(policy.spot_checks, least)
        keep = set(self.rng.sample(range(least), checks)) if who == "worker" else set()
        block, checked, problems = Block(), 0, []
        budget_ms = 1e3 * policy.budget_s
        while len(block.times_ms) < most and (len(block.times_ms) < least or sum(block.wall_ms) < budget_ms):
            seed, digest_seed = fresh_seed(), fresh_seed()
            if gpu and op == "timed":  # its own request: the judge's clock below holds the timed call alone
                self.ask(job, who, f"{phase}: warm call", {"op": "warm"})
            sent = time.perf_counter()
            reply = self.ask(job, who, phase, {"op": op, "seed": seed, "digest_seed": digest_seed})
            wall = (time.perf_counter() - sent) * 1e3
            if not reply.get("ok"):
                raise Stop(who, phase, str(reply.get("error")))
            trace_call(who, op, reply, wall)
            try:
                block.add(call_ms(float(reply["gpu_ms"]), float(reply["lag_ms"])), float(reply["host_ms"]), wall)
            except (KeyError, TypeError, ValueError):
                raise Stop(who, phase, f"a malformed answer to a timed call: {str(reply)[:200]}") from None
            run = len(block.times_ms) - 1
            # Past the first calls, each call is checked with the same chance, decided after it ran:
            # a candidate that counts its calls cannot tell which ones are looked at.
            if who == "worker" and (run in keep or (run >= least and self.rng.random() < checks / least)):
                checked += 1
                problem = self._check_timed(seed, run, digest_seed, reply.get("digest"))
                if problem:
                    problems.append(problem)
                    break
        if gpu and op == "timed" and who == "worker" and not problems:
            self._pace(job, who, phase, block)
        return block, (checked, problems)

    def _pace(self, job: Job, who: str, phase: str, block: Block) -> None:
        """Loops of back-to-back calls on the block's last inputs (``child/timed.paced_ms``): reported
        beside the time, never counted (``timing.host_bound`` says why)."""
        estimate = statistics.median(block.times_ms)
        for _ in range(PACE_MEASUREMENTS):
            reply = self.ask(job, who, f"{phase}: back-to-back calls", {"op": "paced", "estimate_ms": estimate})
            if not reply.get("ok"):
                raise Stop(who, phase, str(reply.get("error")))
            try:
                pace = float(reply["pace_ms"])
            except (KeyError, TypeError, ValueError):
                pace = None
            if pace is None or not 0 <= pace < float("inf"):
                raise Stop(who, phase, f"a malformed answer to a pace request: {str(reply)[:200]}")
            block.pace_ms.append(pace)

    def _check_timed(self, seed: int, run: int, digest_seed: int, digest: Any) -> str | None:
        """A timed call's output, shipped after the call: it must be the output the call committed to
        (its digest), agree with the reference, and keep the precision the checked calls showed."""
        reply = self.ask(self.worker, "worker", "shipping a timed output", {"op": "ship", "name": f"timed{run}"})
        if not reply.get("ok"):
            return f"timed run {run}: {reply.get('error')}"
        key = self.key()
        expected = self.ask(self.oracle, "oracle", "reference outputs for a timed run",
                            {"op": "expect", "key": key, "seed": seed, "variant": 0, "exact": True})
        if not expected.get("finite"):
            self.ask(self.oracle, "oracle", "dropping an expectation", {"op": "drop", "key": key})
            return None
        found = self._compare(key, reply, expected, "comparing a timed output", digest_seed=digest_seed)
        if found["problem"]:
            return f"timed run {run}: {found['problem']}"
        if not same_digest(digest, found.get("digests")):
            return (f"timed run {run}: the output shipped after the call is not the one the call returned (its "
                    "digest differs): the work was done after the timed call")
        self._timed_precision(found, expected)
        return None

    def _timed_precision(self, found: dict[str, Any], expected: dict[str, Any]) -> None:
        for stats, meta in zip(found["stats"], expected.get("outputs", [])):
            if meta["dtype"] in rules.PRECISION_FLOOR:
                self.record.timed_precision.add(stats)

    def _ghost(self) -> None:
        seed, key = fresh_seed(), self.key()
        expected = self.ask(self.oracle, "oracle", "reference outputs for the ghost call",
                            {"op": "expect", "key": key, "seed": seed, "variant": 0, "exact": True})
        reply = self.ask(self.worker, "worker", "ghost replay",
                         {"op": "call", "seed": seed, "ghost": True, "record": False, "name": "ghost"})
        if not reply.get("ok"):
            self.ask(self.oracle, "oracle", "dropping an expectation", {"op": "drop", "key": key})
            self.record.add("ghost replay", True, f"with its kernels turned off the candidate failed "
                            f"({str(reply.get('error'))[:200]})")
            return
        if not expected.get("finite"):
            self.ask(self.oracle, "oracle", "dropping an expectation", {"op": "drop", "key": key})
            self.record.add("ghost replay", True, "skipped: the reference is not finite on this input set")
            return
        found = self._compare(key, reply, expected, "comparing the ghost call")
        wrong = found["problem"] is not None
        self.record.add("ghost replay", wrong, "without the custom kernels the output is wrong: they do the work"
                        if wrong else "with every custom kernel turned into a no-op (its buffers zeroed) the output "
                        "is still correct: the kernels' work never reaches the output")

    def _forensic_calls(self) -> None:
        """Checked calls on inputs the oracle writes as files: no kernel of the harness's own runs."""
        for index in range(self.plan.checked_sets):
            key = self.key()
            expected = self.ask(self.oracle, "oracle", "writing inputs for the forensic pass",
                                {"op": "expect", "key": key, "seed": fresh_seed(), "variant": 0, "exact": True,
                                 "write_inputs": True})
            reply = self.ask(self.worker, "worker", f"forensic call {index}",
                             {"op": "call", "inputs": expected.get("inputs"), "record": False, "poison": False,
                              "name": f"forensic{index}"})
            if not reply.get("ok"):
                self.record.add("forensic call", False, str(reply.get("error")))
                return
            if expected.get("finite"):
                found = self._compare(key, reply, expected, f"comparing forensic call {index}")
                if found["problem"]:
                    self.record.add("forensic call", False, f"call {index}: {found['problem']}")
                    return
                self._timed_precision(found, expected)
        problem = rules.precision_problem(self.record.timed_precision, self.plan.task.dtype or "float32")
        if problem:
            self.record.add("forensic call", False, problem)
            return
        self._finish()

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
        new_threads = int(reply.get("new_threads") or 0)
        self.record.add("no new threads", new_threads <= 0, "no threads left running" if new_threads <= 0
                        else f"{new_threads} new thread(s) left running")
