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


class FakeOpenAI:
    """``script`` items: {"tool_calls": [...]} / {"content": str} / {"status": 500} / {"sleep": s}."""

    def __init__(self, script: list[dict[str, Any]], port: int = 0) -> None:
        self.script = list(script)
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                with fake._lock:
                    fake.requests.append(body)
                    fake.headers.append({k.lower(): v for k, v in self.headers.items()})
                    step = fake.script.pop(0) if fake.script else {"content": "done"}
                if "sleep" in step:
                    time.sleep(step["sleep"])
                    with fake._lock:
                        step = fake.script.pop(0) if fake.script else {"content": "done"}
                if "status" in step:
                    payload = json.dumps({"error": {"message": "scripted failure", "type": "server_error"}}).encode()
                    self.send_response(step["status"])
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                calls = [{"id": f"call_{len(fake.requests)}_{i}", "type": "function", "function": c}
                         for i, c in enumerate(step.get("tool_calls", []))]
                message: dict[str, Any] = {"role": "assistant", "content": step.get("content")}
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
