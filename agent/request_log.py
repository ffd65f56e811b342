"""Every request the LLM policy sends, kept in full in the run folder, content-addressed.

A request's body is split into the parts that repeat from one request to the next: its parameters
(model, temperature, tool choice), its tool schemas, and each message. Each part is stored once,
under the SHA-256 of its canonical JSON (``requests/ab/abcdef....json``); a request is a small
manifest naming its parts, stored the same way, and the trace's ``model_request`` event names the
manifest. A night's conversation re-sends its whole history with every request: stored like this,
each message takes room once, and any request can be rebuilt exactly as it was sent
(``kernelevo request RUN N``).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any

FOLDER = "requests"


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str).encode()


def put(run_dir: Path, value: Any) -> str:
    """Store ``value`` (JSON) under its content hash, once; return the hash."""
    data = _canonical(value)
    digest = hashlib.sha256(data).hexdigest()
    path = run_dir / FOLDER / digest[:2] / f"{digest}.json"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.part")
        partial.write_bytes(data)
        partial.replace(path)  # atomic: a reader never sees half a part
    return digest


def get(run_dir: Path, digest: str) -> Any:
    """The value stored under ``digest`` (a KeyError if there is none, or if it was altered)."""
    if not (len(digest) == 64 and all(c in "0123456789abcdef" for c in digest)):
        raise KeyError(digest)
    path = run_dir / FOLDER / digest[:2] / f"{digest}.json"
    if not path.exists():
        raise KeyError(digest)
    data = path.read_bytes()
    if hashlib.sha256(data).hexdigest() != digest:
        raise KeyError(f"{digest}: the stored part does not match its hash")
    return json.loads(data)


def store_request(run_dir: Path, body: dict[str, Any]) -> str:
    """Store one request body; return its manifest's hash."""
    params = {k: v for k, v in body.items() if k not in ("messages", "tools")}
    manifest: dict[str, Any] = {"params": put(run_dir, params),
                                "messages": [put(run_dir, m) for m in body.get("messages") or []]}
    if body.get("tools") is not None:
        manifest["tools"] = put(run_dir, body["tools"])
    return put(run_dir, manifest)


def load_request(run_dir: Path, digest: str) -> dict[str, Any]:
    """The request body stored under a manifest's hash, as it was sent."""
    manifest = get(run_dir, digest)
    body = dict(get(run_dir, manifest["params"]))
    body["messages"] = [get(run_dir, m) for m in manifest["messages"]]
    if "tools" in manifest:
        body["tools"] = get(run_dir, manifest["tools"])
    return body


def request_body(llm: Any, messages: list[Any]) -> dict[str, Any] | None:
    """The body ``llm.invoke(messages)`` sends: LangChain's own payload builder, given the tools and
    options bound to the model. None where the client offers no such builder."""
    chat, bound = (llm.bound, dict(llm.kwargs)) if hasattr(llm, "bound") else (llm, {})
    build = getattr(chat, "_get_request_payload", None)
    if build is None:
        return None
    return json.loads(_canonical(build(messages, **bound)))
