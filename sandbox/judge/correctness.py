"""The correctness phase of a session: checked calls on secret input sets, the worker's own records
as first filters, ghost replay, and the forensic pass's calls. Every output is compared in the oracle
and its file deleted once compared."""

from __future__ import annotations

import os
import time
from typing import Any

from kernelevo.sandbox.child.inputs import VARIANTS, call_mode, far_from_generated, variant_label
from kernelevo.sandbox.child.launches import GHOST_MODES, MAX_HOST_READ_ELEMENTS
from kernelevo.sandbox.judge import rules
from kernelevo.sandbox.judge.plan import SessionPart, fresh_seed
from kernelevo.sandbox.judge.record import PrecisionSums
from kernelevo.sandbox.judge.reported import reported_count

GHOST_RAISED = "with its kernels turned off the candidate raised"


class CorrectnessCalls(SessionPart):
    """The session's checked calls (a part of ``Session``)."""

    def _checked_call(self, index: int, seed: int) -> None:
        variant, (grad, fresh) = index % len(VARIANTS), call_mode(index)
        how = (", gradients on" if grad == "on" else "") + (", inputs made anew" if fresh else "") + (
            ", parameters changed since the calls before" if index == rules.CHANGED_SET else "")
        label = f"set {index} ({variant_label(variant)}{how})"
        key = self.key()
        ghost_like = VARIANTS[variant][1:] == VARIANTS[0][1:]  # drawn as the ghost call's inputs are
        expected = self.expect(f"reference outputs for {label}",
                               {"key": key, "seed": seed, "variant": variant, "exact": True, "fingerprint": ghost_like})
        began = time.monotonic()
        reply = self.ask(self.worker, "worker", f"correctness call on {label}",
                         {"op": "call", "seed": seed, "variant": variant, "grad": grad, "fresh": fresh, "record": True,
                          "name": f"set{index}"})
        if index == 0:
            self.record.first_call_ms = (time.monotonic() - began) * 1e3
        self._filters(reply, index)
        if not reply.get("ok"):
            self.ask(self.oracle, "oracle", "dropping an expectation", {"op": "drop", "key": key})
            self.record.add(f"correct: {label}", False, str(reply.get("error")))
            return
        if ghost_like:
            self.record.reference_fingerprints.append(expected.get("fingerprint"))
        found = self._compare(key, reply, expected, f"comparing {label}")
        overflow = int(expected.get("not_finite") or 0)
        passed = "within tolerance, judged by the oracle from the raw output" + (
            f"; {overflow} of the reference's values are infinite or NaN" if overflow else "")
        self.record.add(f"correct: {label}", found["problem"] is None, found["problem"] or passed, compared=True)
        if found["problem"] is None:
            for stats, meta in zip(found["stats"], expected.get("outputs", [])):
                self.record.max_abs_error = max(self.record.max_abs_error, float(stats.get("max_abs_error") or 0.0))
                if meta["dtype"] in rules.PRECISION_FLOOR:
                    self.record.precision.add(stats)
                    if not far_from_generated(variant):
                        mode = f"gradients {grad}" + (", inputs made anew" if fresh else "")
                        self.record.precision_by_mode.setdefault(mode, PrecisionSums()).add(stats)

    def _parameters(self, change: int | None) -> bool:
        """Both models' parameters changed alike (``change``: the factors' seed), or put back (None).
        A candidate whose ``load_state_dict`` fails fails the set."""
        what = "changing the parameters" if change is not None else "putting the parameters back"
        self.ask(self.oracle, "oracle", what, {"op": "parameters", "change": change})
        reply = self.ask(self.worker, "worker", what, {"op": "parameters", "change": change})
        if not reply.get("ok"):
            self.record.add(f"correct: set {rules.CHANGED_SET} (parameters changed)", False,
                            f"{what} through ModelNew's load_state_dict failed: {reply.get('error')}")
        return bool(reply.get("ok"))

    def _compare(self, key: str, reply: dict[str, Any], expected: dict[str, Any], phase: str,
                 digest_seed: int | None = None, zeros: bool = False,
                 leaves: list[list[int]] | None = None) -> dict[str, Any]:
        """The oracle's comparison (``zeros``: where the outputs pass, say too whether outputs of zeros
        would have; ``leaves``: the reply ships these leaves of each output, not the whole of it)."""
        dtype = next((o["dtype"] for o in expected.get("outputs", [])), self.plan.task.dtype or "float32")
        self.record.exact_note = self.record.exact_note or expected.get("exact_note")
        try:
            sample = {"op": "compare_leaves", "leaves": leaves} if leaves is not None else {"op": "compare"}
            return self.ask(self.oracle, "oracle", phase,
                            {**sample, "key": key, "outputs": reply.get("outputs", []),
                             "folder": str(self.plan.worker_outbox), "strict_layout": self.plan.strict_layout,
                             "digest_seed": digest_seed, "zeros": zeros, **self.tolerance(dtype)})
        finally:
            self._delete_outputs(reply)

    def _delete_outputs(self, reply: dict[str, Any]) -> None:
        """Delete the output files of a compared call: at a task's real sizes each can be gigabytes.

        The names and the outbox are the candidate's to shape: the outbox is opened without following
        a link (a process that swapped it for a link to a host folder gets nothing deleted) and each
        name is removed inside that folder only, as the plain name it must be."""
        outbox = self.plan.worker_outbox
        names = [e.get("file") for e in reply.get("outputs") or [] if isinstance(e, dict)]
        names = [n for n in names if isinstance(n, str) and n and "/" not in n and "\0" not in n
                 and n not in {".", ".."}]
        if outbox is None or not names:
            return
        try:
            folder = os.open(outbox, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:  # not a folder any more (a link, say): leave it alone
            return
        try:
            for name in names:
                try:
                    os.unlink(name, dir_fd=folder)
                except OSError:  # never there, or a folder: nothing to free
                    pass
        finally:
            os.close(folder)

    def _filters(self, reply: dict[str, Any], index: int) -> None:
        """The worker's own records: first filters, which can only reject."""
        record = self.record
        for name, count in (reply.get("launches") or {}).items():
            record.launches[str(name)[:200]] = record.launches.get(str(name)[:200], 0) + reported_count(count)
        for name, count in (reply.get("compute_ops") or {}).items():
            record.torch_ops[str(name)[:200]] = record.torch_ops.get(str(name)[:200], 0) + reported_count(count)
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
        elif reply.get("earlier_inputs_changed"):
            record.add("inputs unchanged", False, f"input {reply['earlier_inputs_changed'][0]} of the previous "
                       "call was modified by this call (a caller's tensor written after its own call returned)")
        reads = reported_count(reply.get("host_reads") or 0)
        if reads > MAX_HOST_READ_ELEMENTS and not self.plan.task.allow_partial:
            record.add("no host arithmetic", False, f"forward read {reads} values into Python (at most "
                       f"{MAX_HOST_READ_ELEMENTS} may be); this task is strict: the work must run in custom kernels")

    def _checks(self) -> None:
        began = time.monotonic()
        for index in range(self.plan.checked_sets):
            if index == rules.CHANGED_SET and not self._parameters(fresh_seed()):
                break
            self._checked_call(index, fresh_seed())
            if index == rules.CHANGED_SET and self.record.ok:
                self._parameters(None)
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
            problem = rules.precision_problem(record.precision, dtype) or \
                rules.precision_problem_by_mode(record.precision_by_mode, dtype)
            detail = problem or rules.precision_detail(record.precision)
            record.add("precision", problem is None, detail + (f"; {record.exact_note}" if record.exact_note else ""),
                       compared=True)
        record.phases["correctness"] = round(time.monotonic() - began, 4)

    def _timed_precision(self, found: dict[str, Any], expected: dict[str, Any]) -> None:
        for stats, meta in zip(found["stats"], expected.get("outputs", [])):
            if meta["dtype"] in rules.PRECISION_FLOOR:
                self.record.timed_precision.add(stats)

    def _ghost(self) -> None:
        """Two calls with every custom kernel a no-op, state kept before the call zeroed in one and kept
        in the other (``launches``): the output must be wrong in both for the kernels to do the work. A
        call that raises shows nothing (a candidate can raise on purpose when it sees that its kernels
        did not run, while torch did the work): it settles nothing, and raising in every call rejects."""
        outcomes = []
        for mode in GHOST_MODES:
            passed, detail, final = self._ghost_call(mode)
            outcomes.append(detail)
            if final or not passed:
                self.record.add("ghost replay", passed, detail)
                return
        if all(o.startswith(GHOST_RAISED) for o in outcomes):
            self.record.add("ghost replay", False, f"{outcomes[-1]}, in every mode: a raise is no output, so nothing "
                            "shows that the kernels' work reaches the output (a candidate that raises when it sees "
                            "its kernels did not run would pass with torch doing the work)")
            return
        self.record.add("ghost replay", True, "; ".join(dict.fromkeys(outcomes)))

    def _ghost_call(self, mode: str) -> tuple[bool, str, bool]:
        """One ghost call: (passed, what it showed, whether it settles the check alone)."""
        seed, key = fresh_seed(), self.key()
        expected = self.expect("reference outputs for the ghost call",
                               {"key": key, "seed": seed, "variant": 0, "exact": True, "fingerprint": True})
        reply = self.ask(self.worker, "worker", "ghost replay",
                         {"op": "call", "seed": seed, "ghost": mode, "record": False, "name": "ghost"})
        if reply.get("ghost_fault"):  # the candidate left the replay unable to turn its kernels off
            self._delete_outputs(reply)
            self.ask(self.oracle, "oracle", "dropping an expectation", {"op": "drop", "key": key})
            fault = str(reply["ghost_fault"])[:200]
            return False, (f"the ghost replay could not turn the kernels off cleanly ({fault}), so nothing shows "
                           "that they do the work"), True
        if not reply.get("ok"):
            self.ask(self.oracle, "oracle", "dropping an expectation", {"op": "drop", "key": key})
            return True, f"{GHOST_RAISED} ({str(reply.get('error'))[:200]})", False
        # No output can tell a kernel's work from none where the reference's output is the same on every set
        # drawn like this one (it ignores its inputs), or where outputs of zeros, as buffers left zeroed
        # give, are within tolerance of it (an answer that is rounding noise about 0).
        seen = [*self.record.reference_fingerprints, expected.get("fingerprint")]
        why = ("the reference's output is the same on every input set drawn like this one"
               if len(seen) >= 3 and all(f is not None and f == seen[0] for f in seen) else None)
        if why:
            self._delete_outputs(reply)
            self.ask(self.oracle, "oracle", "dropping an expectation", {"op": "drop", "key": key})
        else:
            found = self._compare(key, reply, expected, "comparing the ghost call", zeros=True)
            wrong = found["problem"] is not None
            if wrong:
                return True, "without the custom kernels the output is wrong: they do the work", False
            if not (found.get("zeros_pass") or found.get("another_set_passes")):
                if mode == "blank":
                    how = "every tensor a kernel was given zeroed"
                    why = "the kernels' work never reaches the output"
                else:
                    how = "its fresh buffers zeroed, every other tensor kept as it was"
                    why = ("the kernels' work never reaches the output, or it is the same on every call (work "
                           "for __init__)")
                return False, (f"with every custom kernel turned into a no-op ({how}) the output is still "
                               f"correct: {why}"), True
            why = ("outputs of zeros are within tolerance of the reference here" if found.get("zeros_pass") else
                   "the reference's output on another input set is within tolerance of this one's (it barely "
                   "depends on its inputs)")
        return True, (f"not applicable: {why}, so an output without the kernels' work cannot be told from one "
                      "with it"), True

    def _forensic_calls(self) -> None:
        """Checked calls on inputs the oracle writes as files: no kernel of the harness's own runs."""
        for index in range(self.plan.checked_sets):
            key = self.key()
            expected = self.expect("writing inputs for the forensic pass",
                                   {"key": key, "seed": fresh_seed(), "variant": 0, "exact": True,
                                    "write_inputs": True})
            reply = self.ask(self.worker, "worker", f"forensic call {index}",
                             {"op": "call", "inputs": expected.get("inputs"), "record": False, "poison": False,
                              "name": f"forensic{index}"})
            if not reply.get("ok"):
                self.record.add("forensic call", False, str(reply.get("error")))
                return
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
