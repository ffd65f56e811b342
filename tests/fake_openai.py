"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1, for driving the real
ChatOpenAI client in tests: tool calls, plain replies, malformed arguments, HTTP errors, delays."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def tool_call(name: str, args: dict[str, Any] | str) -> dict[str, Any]:
    """One scripted tool call; ``args`` as a string is sent verbatim (e.g. malformed JSON)."""
    return {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}


def history_problem(messages: list[dict[str, Any]]) -> str | None:
    """What a real OpenAI-compatible server refuses with HTTP 400 in a request's messages: an assistant
    message whose tool calls are not each answered by a tool message, or a tool message answering
    no call. None when the history is well formed."""
    open_ids: set[str] | None = None
    for m in messages:
        if m.get("role") == "assistant" and "reasoning_content" in m:  # as DeepSeek's API refuses it
            return "Invalid parameter: reasoning_content must not be sent back in assistant messages"
        if m.get("role") == "tool":
            if open_ids is None or m.get("tool_call_id") not in open_ids:
                return f"Invalid parameter: a tool message answers no tool call ({m.get('tool_call_id')!r})"
            open_ids.discard(m["tool_call_id"])
            continue
        if open_ids:
            break
        open_ids = {c["id"] for c in m.get("tool_calls") or []} if m.get("role") == "assistant" else None
    if open_ids:
        return ("An assistant message with 'tool_calls' must be followed by tool messages responding to each "
                f"'tool_call_id'. The following tool_call_ids did not have response messages: {sorted(open_ids)}")
    return None


class FakeOpenAI:
    """``script`` items: {"tool_calls": [...]} / {"content": str} (either with "reasoning_content") /
    {"status": 500} / {"sleep": s}, or a
    function of the request's body returning one of those (a model that acts on what it was shown)."""

    def __init__(self, script: list[dict[str, Any]], port: int = 0) -> None:
        self.script = list(script)
        self.requests: list[dict[str, Any]] = []
        self.refused: list[str] = []
        self.times: list[float] = []
        """When each request arrived (time.monotonic)."""
        """Why requests were refused as malformed (HTTP 400), as a real server would."""
        self.headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                with fake._lock:
                    fake.times.append(time.monotonic())
                    fake.requests.append(body)
                    fake.headers.append({k.lower(): v for k, v in self.headers.items()})
                    refused = history_problem(body.get("messages") or [])
                    step = ({"status": 400, "message": refused} if refused else
                            fake.script.pop(0) if fake.script else {"content": "done"})
                    if callable(step):  # a step that reads the request, as a model reads its prompt
                        step = step(body)
                    if refused:
                        fake.refused.append(refused)
                if "sleep" in step:
                    time.sleep(step["sleep"])
                    with fake._lock:
                        step = fake.script.pop(0) if fake.script else {"content": "done"}
                if "status" in step:
                    kind = "invalid_request_error" if step["status"] == 400 else "server_error"
                    payload = json.dumps({"error": {"message": step.get("message", "scripted failure"),
                                                    "type": kind}}).encode()
                    self.send_response(step["status"])
                    for name, value in step.get("headers", {}).items():
                        self.send_header(name, value)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                calls = [{"id": f"call_{len(fake.requests)}_{i}", "type": "function", "function": c}
                         for i, c in enumerate(step.get("tool_calls", []))]
                message: dict[str, Any] = {"role": "assistant", "content": step.get("content")}
                if "reasoning_content" in step:  # what vLLM, SGLang and DeepSeek send beside the content
                    message["reasoning_content"] = step["reasoning_content"]
                if calls:
                    message["tool_calls"] = calls
                payload = json.dumps({
                    "id": f"chatcmpl-{len(fake.requests)}", "object": "chat.completion", "created": int(time.time()),
                    "model": body.get("model", "fake"),
                    "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
                    "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
                }).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
