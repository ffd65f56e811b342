"""The LLM policy: a model behind any OpenAI-compatible endpoint (langchain-openai's ChatOpenAI)
writes, checks and improves kernels through the tools, one turn per generation, and reflects on
the results as strategy notes for later generations. Every request, response, tool call and result
goes to the run's trace; the API key never does."""

from __future__ import annotations

import json
import random
import re
import sqlite3
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import openai
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from kernelevo import prompts
from kernelevo.agent.archive import strategy_stats
from kernelevo.agent.behaviour import MEASURED
from kernelevo.agent.budget import evaluations_left, exhausted, model_budget_spent
from kernelevo.agent.chat_client import ReasoningChatOpenAI
from kernelevo.agent.experience import Entry, Library, Signature, is_seed, signature_of
from kernelevo.agent.islands import elites_for, share
from kernelevo.agent.policy import PolicyRefused, PolicyRuntime, PolicyUnavailable, Proposal, SearchView
from kernelevo.agent.request_log import request_body, store_request
from kernelevo.sandbox.judge.ceilings import speed_of_light_ms
from kernelevo.sandbox.models import Verdict
from kernelevo.tasks.task import Task
from kernelevo.tools import ToolContext, make_tools
from kernelevo.tools.kernel_tools import SOURCE_LIMIT

INSPIRATION_LIMIT = 3000
"""Characters of each inspiration's source in a prompt (the fastest kernel's is shown whole)."""
RETRY_FIRST_S, RETRY_LONGEST_S = 2.0, 60.0
"""Pauses between attempts through an outage: doubling from the first, never longer than the last."""


def _retry_after(exc: Exception) -> float | None:
    """The server's Retry-After (seconds), when its answer carried one."""
    response = getattr(exc, "response", None)
    value = getattr(response, "headers", {}).get("retry-after") if response is not None else None
    try:
        return max(float(value), 0.0) if value is not None else None
    except ValueError:
        return None


def _sleep_unless_stopping(rt: Any, seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end and not (rt is not None and rt.stopping):
        time.sleep(min(0.2, end - time.monotonic()))



class TurnTooLong(Exception):
    """The conversation outgrew the model's context: the turn ends with what it wrote; the next turn
    starts from a fresh, short history."""


def _context_overflow(exc: Exception) -> bool:
    text = str(exc).lower()
    return ("ContextOverflow" in type(exc).__name__ or "context_length_exceeded" in text
            or "maximum context length" in text or "context window" in text)


REFUSALS = (openai.BadRequestError, openai.AuthenticationError, openai.PermissionDeniedError, openai.NotFoundError,
            openai.UnprocessableEntityError)
"""The OpenAI client's errors for HTTP 400, 401, 403, 404 and 422 (LangChain's own are subclasses):
deterministic, never retried."""


def _short(value: Any, limit: int = 4000) -> Any:
    if isinstance(value, str) and len(value) > limit:
        return value[: limit // 2] + f"\n... [{len(value) - limit} characters] ...\n" + value[-limit // 2:]
    if isinstance(value, dict):
        return {k: _short(v, limit) for k, v in value.items()}
    return value


CODE_BLOCK = re.compile(r"```[\w+-]*[ \t]*\n(.*?)```", re.DOTALL)


def kernel_in_code_block(text: str) -> str | None:
    """The last fenced code block of ``text`` that defines ``ModelNew`` (None if there is none)."""
    blocks = [b for b in CODE_BLOCK.findall(text) if "class ModelNew" in b]
    return blocks[-1] if blocks else None


class LLMPolicy:
    name = "llm"

    def __init__(self, model: str, base_url: str | None, api_key: str, max_steps: int = 16,
                 timeout_s: float = 120.0, max_retries: int = 2, reflect: bool = True,
                 retry_minutes: float = 15.0, temperature: float = 0.2, experience: Path | None = None,
                 islands: int = 1, builtin_seed: bool = True) -> None:
        self.model = model
        self.base_url = base_url
        self.llm = ReasoningChatOpenAI(model=model, base_url=base_url, api_key=api_key, timeout=timeout_s,
                              max_retries=max_retries, temperature=temperature)
        self.retry_minutes = retry_minutes
        self.max_steps = max_steps
        self.reflect = reflect
        self.rt: PolicyRuntime | None = None
        self.task: Task | None = None
        self.experience = experience
        self.islands = max(int(islands), 1)
        self.builtin_seed = builtin_seed
        self._lock = threading.Lock()
        self._reserved = 0
        self._recalled: list[Entry] | None = None
        self._signature: Signature | None = None

    def prepare(self, task: Task) -> None:
        self.task = task

    def attach(self, runtime: PolicyRuntime) -> None:
        """Give the policy the run it works on (store, evaluator, budget)."""
        self.rt = runtime

    def describe(self) -> str:
        return f"model {self.model}" + (f" at {self.base_url}" if self.base_url else "")

    # prompts ----------------------------------------------------------------------------------
    def _task_prompt(self) -> str:
        rt, task = self.rt, self.task
        assert rt is not None and task is not None
        reference, ceilings = rt.evaluator.baseline(task)
        dtype = task.dtype or (reference.output_dtypes[0] if reference.output_dtypes else "float32")
        atol, rtol = task.tolerances(dtype)
        eager, compiled = reference.eager, reference.compiled
        where = "CPU" if reference.device == "cpu" else reference.device
        eager_text = f"{eager.median_ms:.4g} ms ({where})" if eager else "not measured"
        compiled_text = (f"{compiled.median_ms:.4g} ms" if compiled else
                         f"not measured ({reference.compile_error or 'not asked for'})")
        floor = None
        if ceilings is not None and reference.device != "cpu":
            floor_ms, bound = speed_of_light_ms(reference.flops, reference.bytes, ceilings, dtype)
            floor = f"{floor_ms:.4g} ms ({bound}-bound: the least bytes and FLOPs over the measured ceilings)"
        return prompts.render("task", task=task, source=task.path.read_text(), dtype=dtype, atol=atol, rtol=rtol,
                              flops=f"{reference.flops:.3g}", bytes=f"{reference.bytes:.3g}", device=reference.device,
                              ceilings=ceilings, eager=eager_text, compiled=compiled_text, floor=floor,
                              budget=rt.budget.describe_left(rt.spent()))

    def _population(self) -> str:
        rt = self.rt
        rows = rt.store.candidates()
        if not rows:
            return "no candidates yet"
        lines = []
        for c in rows[-30:]:
            result = "pending" if c["correct"] is None else (f"{c['runtime_ms']:.4g} ms" if c["correct"]
                                                             else f"rejected: {(c['reason'] or '')[:80]}")
            lines.append(f"- {c['id'][:10]} ({c['strategy']}, parent {(c['parent'] or '-')[:10]}): {result}")
        entries = [{"strategy": c["strategy"], "correct": bool(c["correct"]), "runtime_ms": c["runtime_ms"],
                    "speedup": c["speedup"]} for c in rows if c["correct"] is not None]
        stats = strategy_stats(entries)  # type: ignore[arg-type]
        lines.append("strategies: " + "; ".join(f"{s}: {v['correct']}/{v['tried']} correct" for s, v in stats.items()))
        return "\n".join(lines)

    def _recall(self) -> list[Entry]:
        """Verified kernels of similar earlier tasks from the experience library (read once a run)."""
        if self._recalled is None:
            self._recalled = []
            if self.experience is not None and self.experience.exists() and self.task is not None:
                try:
                    reference, _ = self.rt.evaluator.baseline(self.task)
                    self._signature = signature_of(self.task, self.rt.evaluator.device_label(), reference.inputs)
                    with Library(self.experience) as library:
                        self._recalled = library.nearest(self._signature, k=3)
                except (OSError, sqlite3.Error, ValueError) as exc:
                    self.rt.store.event("decision", None, action="experience unavailable", reason=str(exc)[:300])
        return self._recalled

    def _seed_from_experience(self, tools: dict[str, Any], ctx: ToolContext, view: SearchView) -> None:
        """At the start of a run, the library's kernel for the same task is written as a first
        candidate; the harness judges it like any other."""
        if view.generation != 0 or self.rt.store.candidates():
            return
        for entry in self._recall():
            if self._signature is not None and is_seed(entry, self._signature) and "write_kernel" in tools:
                result = tools["write_kernel"].invoke({"source": entry.source, "strategy": "experience"})
                self.rt.store.event("decision", ctx.written[-1] if ctx.written else None, action="seed",
                                    reason=f"from the experience library ({entry.id[:10]}, {entry.task}, "
                                    f"similarity {entry.similarity:.2f}): {str(result)[:200]}")
                return

    def _seed_from_strategist(self, tools: dict[str, Any], ctx: ToolContext, view: SearchView) -> None:
        """At the start of a run with nothing remembered, the built-in strategist's first kernel for the
        task (where its templates cover it) is written as a first candidate: the model starts from a
        working, tuned-by-rule kernel rather than from nothing. The harness judges it like any other."""
        if view.generation != 0 or self.rt.store.candidates() or "write_kernel" not in tools:
            return
        from kernelevo.agent.builtin.policy import seeds
        from kernelevo.agent.builtin.recognize import CannotCover, recognise
        from kernelevo.agent.builtin.templates import render

        try:
            plan = recognise(self.task)
            strategy, params, why = seeds(plan)[0]
            source = render(plan, strategy, params, why)
        except CannotCover as exc:
            self.rt.store.event("decision", None, action="seed",
                                reason=f"the built-in strategist does not cover this task: {str(exc)[:300]}")
            return
        result = tools["write_kernel"].invoke({"source": source, "strategy": f"builtin-{strategy}"})
        self.rt.store.event("decision", ctx.written[-1] if ctx.written else None, action="seed",
                            reason=f"the built-in strategist's first kernel ({why[:200]}): {str(result)[:200]}")

    def _notes(self) -> list[str]:
        return list(self.rt.store.meta("notes", []))

    # one turn ---------------------------------------------------------------------------------
    def _invoke(self, llm: Any, messages: list[BaseMessage], step: int, generation: int) -> AIMessage:
        store = self.rt.store
        store.event("model_request", None, generation=generation, step=step, messages=len(messages),
                    last=_short(str(messages[-1].content), 2000), request=self._log_request(llm, messages))
        reply = self._with_retries(llm, messages, step, generation)
        usage = reply.usage_metadata or {}
        with self._lock:  # islands answer at the same time: the sums must not lose an update
            store.set_meta("tokens_in", int(store.meta("tokens_in", 0)) + int(usage.get("input_tokens", 0)))
            store.set_meta("tokens_out", int(store.meta("tokens_out", 0)) + int(usage.get("output_tokens", 0)))
        reasoning = (reply.additional_kwargs or {}).get("reasoning_content") or (
            reply.response_metadata or {}).get("reasoning")
        store.event("model_response", None, generation=generation, step=step, content=_short(str(reply.content)),
                    reasoning=_short(reasoning) if reasoning else None,
                    tool_calls=[{"name": c["name"], "args": _short(c["args"], 1500)} for c in reply.tool_calls],
                    invalid_tool_calls=[{"name": c.get("name"), "error": c.get("error")}
                                        for c in reply.invalid_tool_calls],
                    usage={"input": usage.get("input_tokens"), "output": usage.get("output_tokens")})
        return reply

    def _log_request(self, llm: Any, messages: list[BaseMessage]) -> str | None:
        """Store the request in full (``request_log``); a failure to store it is traced, never the turn's end."""
        try:
            body = request_body(llm, messages)
            return store_request(self.rt.store.dir, body) if body is not None else None
        except Exception as exc:  # the log is a record: a full disk or a changed client must not stop the run
            self.rt.store.event("decision", None, action="request not stored",
                                reason=f"{type(exc).__name__}: {exc}"[:300])
            return None

    def _with_retries(self, llm: Any, messages: list[BaseMessage], step: int, generation: int) -> AIMessage:
        """One request, retried through outages with growing, jittered pauses (or the server's
        Retry-After) for up to ``retry_minutes``; a refusal or an overflow is never retried."""
        store = self.rt.store
        deadline, pause = time.monotonic() + 60 * self.retry_minutes, RETRY_FIRST_S
        while True:
            try:
                return llm.invoke(messages)
            except (UnicodeError, TypeError):  # a request the client cannot even encode: never an outage
                raise
            except Exception as exc:  # network, HTTP 5xx and 429 after the client's own retries, timeouts
                error = f"{type(exc).__name__}: {exc}"
                store.event("model_error", None, generation=generation, step=step, error=_short(error, 600))
                if isinstance(exc, openai.BadRequestError) and _context_overflow(exc):
                    raise TurnTooLong(str(exc)[:300]) from None
                if isinstance(exc, REFUSALS):
                    raise PolicyRefused(f"the model endpoint refused the request ({type(exc).__name__}): "
                                        f"{_short(str(exc), 400)}") from None
                wait = _retry_after(exc) or pause * random.uniform(0.5, 1.5)
                if time.monotonic() + wait > deadline or (self.rt is not None and self.rt.stopping):
                    raise PolicyUnavailable(f"the model endpoint failed after retries: {error}") from None
                store.event("model_retry", None, generation=generation, step=step, wait_s=round(wait, 2))
                _sleep_unless_stopping(self.rt, wait)
                pause = min(2 * pause, RETRY_LONGEST_S)

    def propose(self, view: SearchView, count: int) -> list[Proposal]:
        """One turn per island, the islands in parallel threads (one island: this thread)."""
        assert self.rt is not None and self.task is not None, "attach() and prepare() first"
        if self.islands == 1:
            return self._turn(view, count, 0)
        counts = share(count, self.islands)
        with ThreadPoolExecutor(max_workers=self.islands, thread_name_prefix="island") as pool:
            turns = [pool.submit(self._turn, view, counts[k], k) for k in range(self.islands)]
            return [p for turn in turns for p in turn.result()]

    def _turn(self, view: SearchView, count: int, island: int) -> list[Proposal]:
        rt = self.rt
        ctx = ToolContext(task=self.task, store=rt.store, judge=self._judge, budget_left=self._reserve,
                          population=self._population, notes=self._notes, generation=view.generation,
                          triton_gate=lambda cid: rt.evaluator.triton_gate(self.task, rt.store.source_path(cid)),
                          profile=rt.profile, inductor_code=rt.inductor_code)
        tools = make_tools(ctx)
        by_name = {t.name: t for t in tools}
        if island == 0:
            self._seed_from_experience(by_name, ctx, view)
            if self.builtin_seed and not ctx.written:
                self._seed_from_strategist(by_name, ctx, view)
        llm = self.llm.bind_tools(tools)
        messages = self._opening(view, count, island, ctx)
        nudged = False
        for step in range(self.max_steps):
            if exhausted(rt.budget, rt.spent()) or rt.stopping:
                break
            try:
                reply = self._invoke(llm, messages, step, view.generation)
            except TurnTooLong as exc:
                rt.store.event("decision", None, action="end turn", generation=view.generation,
                               reason=f"the conversation outgrew the model's context: {exc}")
                break
            messages.append(reply)
            self._answer_malformed(reply, messages)
            if not reply.tool_calls and reply.invalid_tool_calls:
                continue
            if not reply.tool_calls:
                go_on, nudged = self._without_calls(reply, by_name, ctx, messages, nudged)
                if go_on:
                    continue
                break
            self._answer_calls(reply, by_name, ctx, messages)
        return self._end_turn(ctx, view, island)

    def _opening(self, view: SearchView, count: int, island: int, ctx: ToolContext) -> list[BaseMessage]:
        """The turn's first messages: the rules, the task, the playbook, and this generation's context
        (elites with their sources, inspirations, notes, what was recalled or seeded)."""
        strict = not self.task.allow_partial
        atol, rtol = self.task.tolerances(self.task.dtype or "float32")
        elites = elites_for(island, list(view.archive.values()), self._memberships(), view.generation)[:8]
        return [
            SystemMessage(prompts.render("system", strict=strict, atol=atol, rtol=rtol)),
            HumanMessage(self._task_prompt() + "\n" + prompts.render("playbook") + "\n" +
                         prompts.render("generation", generation=view.generation, count=count, elites=elites,
                                        island=island, islands=self.islands,
                                        notes=self._notes()[-6:], best_source=self._source(elites),
                                        inspirations=self._inspirations(elites),
                                        recalled=self._recall(), seeded=list(ctx.written),
                                        limit=INSPIRATION_LIMIT)),
        ]

    def _answer_malformed(self, reply: Any, messages: list[BaseMessage]) -> None:
        """Every call of the reply gets its answer, the malformed ones included: a history with an
        unanswered call is refused by the server (HTTP 400) on every later request."""
        for bad in reply.invalid_tool_calls:
            text = f"could not parse the arguments of {bad.get('name')}: {bad.get('error')}; send valid JSON"
            self.rt.store.event("tool_result", None, name=bad.get("name"), result=text, error=True)
            messages.append(ToolMessage(text, tool_call_id=bad.get("id") or "invalid"))

    def _without_calls(self, reply: Any, by_name: dict[str, Any], ctx: ToolContext, messages: list[BaseMessage],
                       nudged: bool) -> tuple[bool, bool]:
        """A reply without tool calls: ``(go on with the turn, nudged)``. Many served models answer tools
        poorly: a kernel in a code block is taken as a write (a closing message quoting a kernel already
        written ends the turn instead); a turn with nothing written yet gets one nudge."""
        block = kernel_in_code_block(str(reply.content or ""))
        if block is not None and "write_kernel" in by_name:
            result = by_name["write_kernel"].invoke({"source": block, "strategy": "from-a-code-block"})
            if str(result).startswith("identical to candidate"):
                return False, nudged
            self.rt.store.event("tool_result", ctx.written[-1] if ctx.written else None, name="write_kernel",
                                result=_short(f"(from a code block) {result}", 3000))
            messages.append(HumanMessage(f"The kernel in your reply was taken as write_kernel: {result}\n"
                                         "Next, call the tools (check_kernel) instead of writing code blocks."))
            return True, nudged
        if not ctx.written and not nudged:
            messages.append(HumanMessage("Please use the tools: write a candidate with write_kernel, then "
                                         "check it with check_kernel."))
            return True, True
        return False, nudged

    def _answer_calls(self, reply: Any, by_name: dict[str, Any], ctx: ToolContext,
                      messages: list[BaseMessage]) -> None:
        """Run each tool call of the reply and answer it; failures go back to the model as text."""
        store = self.rt.store
        for call in reply.tool_calls:
            subject = self._subject(call["args"])
            written_before = len(ctx.written)
            store.event("tool_call", subject, name=call["name"], args=_short(call["args"], 3000),
                        call_id=call.get("id"))
            tool = by_name.get(call["name"])
            if tool is None:
                result = f"there is no tool {call['name']!r}; the tools are: {', '.join(by_name)}"
            else:
                try:
                    result = tool.invoke(call["args"])
                except Exception as exc:  # invalid arguments and tool failures go back to the model
                    result = f"{call['name']} failed: {type(exc).__name__}: {str(exc)[:600]}"
            if len(ctx.written) > written_before:
                subject = ctx.written[-1]
            store.event("tool_result", subject, name=call["name"], result=_short(str(result), 3000))
            messages.append(ToolMessage(str(result), tool_call_id=call.get("id") or call["name"]))

    def _end_turn(self, ctx: ToolContext, view: SearchView, island: int) -> list[Proposal]:
        """File what the turn wrote in its island, reflect on it (budget permitting), and propose it."""
        rt = self.rt
        self._join(ctx.written, island)
        if self.reflect and ctx.written and not rt.stopping:
            spent = model_budget_spent(rt.budget, rt.spent())
            if spent:
                rt.store.event("decision", None, action="no reflection", generation=view.generation, reason=spent)
            else:
                self._reflect(ctx, view.generation)
        return [Proposal(source=rt.store.source_path(cid).read_text(),
                         strategy=(rt.store.candidate(cid) or {}).get("strategy") or "llm", descriptor=MEASURED,
                         params={}, parent=(rt.store.candidate(cid) or {}).get("parent"), why="written by the model")
                for cid in ctx.written]

    # islands and the shared budget -----------------------------------------------------------
    def _memberships(self) -> dict[str, int]:
        return dict(self.rt.store.meta("islands", {}))

    def _join(self, written: list[str], island: int) -> None:
        """Record which island wrote each candidate of a turn (one store value, updated under the lock)."""
        if not written or self.islands == 1:
            return
        with self._lock:
            memberships = self._memberships()
            memberships.update({cid: island for cid in written if cid not in memberships})
            self.rt.store.set_meta("islands", memberships)

    def _reserve(self) -> str | None:
        """Take one evaluation from the budget, or say why none is left. Islands check kernels at the
        same time: a slot taken here and not yet recorded counts as spent, so the budget holds."""
        with self._lock:
            spent = exhausted(self.rt.budget, self.rt.spent())
            if spent:
                return spent
            left = evaluations_left(self.rt.budget, self.rt.spent())
            if left is not None and left <= self._reserved:
                return f"evaluation budget spent ({self._reserved} in evaluation for other islands)"
            self._reserved += 1
            return None

    def _judge(self, cid: str) -> Verdict:
        try:
            return self.rt.judge_and_record(cid)
        finally:
            with self._lock:
                self._reserved = max(self._reserved - 1, 0)

    def _inspirations(self, elites: list[Any], count: int = 2) -> list[dict[str, Any]]:
        """The fastest correct kernels of strategies other than the fastest one's, with their sources:
        other ideas that work, for the model to borrow from."""
        if not elites or self.rt is None:
            return []
        chosen, seen = [], {elites[0]["strategy"]}
        for elite in elites[1:]:
            path = self.rt.store.source_path(elite["id"])
            if elite["strategy"] in seen or not path.exists():
                continue
            seen.add(elite["strategy"])
            chosen.append({**elite, "source": path.read_text()[:INSPIRATION_LIMIT]})
            if len(chosen) == count:
                break
        return chosen

    def _source(self, elites: list[Any]) -> str | None:
        """The fastest elite's source, for the prompt (the model improves code it can see)."""
        if not elites or self.rt is None:
            return None
        path = self.rt.store.source_path(elites[0]["id"])
        return path.read_text()[:SOURCE_LIMIT] if path.exists() else None

    def _subject(self, args: Any) -> str | None:
        """The candidate a tool call is about (its ``candidate`` argument), for the trace."""
        prefix = args.get("candidate") if isinstance(args, dict) else None
        if not isinstance(prefix, str) or len(prefix.strip()) < 6:
            return None
        matches = [c["id"] for c in self.rt.store.candidates() if c["id"].startswith(prefix.strip())]
        return matches[0] if len(matches) == 1 else None

    def _reflect(self, ctx: ToolContext, generation: int) -> None:
        results = []
        for cid in ctx.written:
            verdict = self.rt.store.evaluation(cid)
            results.append({"id": cid, "strategy": (self.rt.store.candidate(cid) or {}).get("strategy", ""),
                            "judged": verdict is not None, "correct": bool(verdict and verdict.correct),
                            "reason": (verdict.reason or "")[:200] if verdict is not None else "",
                            "runtime_ms": verdict.runtime_ms if verdict else None,
                            "speedup": verdict.speedup if verdict else None})
        if not any(r["runtime_ms"] is not None or not r["correct"] for r in results):
            return
        messages: list[BaseMessage] = [SystemMessage("You are a kernel engineer writing short notes."),
                                       HumanMessage(prompts.render("reflection", generation=generation,
                                                                   results=results))]
        reply = self._invoke(self.llm, messages, -1, generation)
        note = str(reply.content).strip()
        if note:
            with self._lock:
                notes = self._notes() + [note[:1000]]
                self.rt.store.set_meta("notes", notes[-20:])
            self.rt.store.event("decision", None, action="note", reason=note[:1000])


def tool_schemas(ctx: ToolContext) -> list[dict[str, Any]]:
    """The tools' JSON schemas as the model sees them (for documentation and tests)."""
    return [json.loads(json.dumps(t.args_schema.model_json_schema())) for t in make_tools(ctx)]
