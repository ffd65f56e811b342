"""The channel between kernelevo and a sandboxed process, and the raw tensors that cross it.

Imported on both sides of the trust boundary; it decides nothing. One Unix socket per job, in the
job's own folder: the sandbox listens, the process connects (``KERNELEVO_CHANNEL`` names the path).
Messages are length-prefixed JSON objects (a 4-byte big-endian length), never pickles, so a hostile
process can send wrong values but no code. Tensors cross as files (``tensor_files``), never inside
a message.
"""

from __future__ import annotations

import json
import math
import os
import re
import select
import socket
import struct
import time
from pathlib import Path
from typing import Any

CHANNEL_ENV = "KERNELEVO_CHANNEL"
MAX_MESSAGE = 16 * 1024 * 1024
"""Larger messages are refused: tensors travel as files, never inside a message."""

class ChannelError(Exception):
    """The other side closed the channel, sent something malformed, or did not answer in time."""


class ChannelTimeout(ChannelError):
    pass


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number a message may carry")


def _finite_float(text: str) -> float:
    """A JSON number as a float, refused where it overflows to infinity (``1e999``)."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:40]} is not a number a message may carry")
    return value


_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")
"""A UTF-16 surrogate written as a JSON escape: alone (not half of a pair), it decodes to a string no
UTF-8 encoder takes, and a verdict, a store or a console given it would fail on it."""
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def whole_characters(value: Any) -> Any:
    """``value`` with every lone surrogate in its strings (keys too) replaced by U+FFFD."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [whole_characters(v) for v in value]
    if isinstance(value, dict):
        return {whole_characters(k): whole_characters(v) for k, v in value.items()}
    return value


class Channel:
    """One connected socket carrying JSON messages."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._buffer = b""

    def send(self, message: dict[str, Any]) -> None:
        data = json.dumps(message, allow_nan=True).encode()
        try:
            self.sock.sendall(struct.pack(">I", len(data)) + data)
        except OSError as exc:
            raise ChannelError(f"the channel closed while sending ({exc.__class__.__name__})") from None

    def recv(self, timeout: float | None = None, finite: bool = False) -> dict[str, Any]:
        """The next message; ``timeout`` seconds at most (None: wait for ever). ``finite``: refuse
        ``NaN`` and ``Infinity``, which Python's JSON reads as numbers that no comparison rejects (a
        message from a process that runs candidate code)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        header = self._read(4, deadline)
        (size,) = struct.unpack(">I", header)
        if size > MAX_MESSAGE:
            raise ChannelError(f"a message of {size} bytes is over the limit of {MAX_MESSAGE}")
        body = self._read(size, deadline)
        try:
            # strictly UTF-8: JSON's own reader guesses other encodings, and lets encoded surrogates through
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            raise ChannelError("a message that is not UTF-8 text") from None
        try:
            message = json.loads(text, parse_constant=_refuse_constant if finite else None,
                                 parse_float=_finite_float if finite else None)
        except RecursionError:
            raise ChannelError("a message nested too deeply") from None
        except ValueError as exc:
            raise ChannelError(f"a message that is not JSON ({str(exc)[:80]})") from None
        if not isinstance(message, dict):
            raise ChannelError("a message that is not a JSON object")
        if _ESCAPED_SURROGATE.search(text):
            try:
                message = whole_characters(message)
            except RecursionError:
                raise ChannelError("a message nested too deeply") from None
        return message

    def request(self, message: dict[str, Any], timeout: float | None = None, finite: bool = False) -> dict[str, Any]:
        self.send(message)
        return self.recv(timeout, finite)

    def _read(self, count: int, deadline: float | None) -> bytes:
        while len(self._buffer) < count:
            wait = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            if wait is not None and wait <= 0:
                raise ChannelTimeout("no answer in time")
            ready, _, _ = select.select([self.sock], [], [], wait)
            if not ready:
                raise ChannelTimeout("no answer in time")
            try:
                chunk = self.sock.recv(max(count - len(self._buffer), 1 << 16))
            except OSError as exc:
                raise ChannelError(f"the channel broke ({exc.__class__.__name__})") from None
            if not chunk:
                raise ChannelError("the other side closed the channel")
            self._buffer += chunk
        data, self._buffer = self._buffer[:count], self._buffer[count:]
        return data

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


class Listener:
    """The parent's end: a socket file in the job's folder that its one process connects to.

    A socket's path may not exceed 108 bytes, and job folders lie deep in run folders: the socket is
    bound through the folder's descriptor here, and the process, which starts in its job folder,
    connects to the bare name (``env_value``)."""

    NAME = "channel.sock"

    def __init__(self, folder: Path, public: bool = True) -> None:
        """``public``: any user may connect (the sandbox's unprivileged user); else only this one."""
        self.path = folder / self.NAME
        self.path.unlink(missing_ok=True)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            self.sock.bind(f"/proc/self/fd/{fd}/{self.NAME}")
        finally:
            os.close(fd)
        os.chmod(self.path, 0o777 if public else 0o700)
        self.sock.listen(1)
        self.strangers = 0
        """Connections refused because they came from outside the job."""

    env_value = NAME
    """What ``KERNELEVO_CHANNEL`` holds: the name, relative to the job's folder."""

    def accept(self, timeout: float, alive: Any = lambda: True, peers: Any = None) -> Channel:
        """The first connection within ``timeout`` seconds; gives up early once ``alive()`` is False.
        ``peers()``: the process ids that may connect (the job's own); a connection from any other
        process (another job's candidate that found this socket) is closed and the wait goes on."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ChannelTimeout("the process never connected to its channel")
            ready, _, _ = select.select([self.sock], [], [], min(left, 0.1))
            if ready:
                conn, _ = self.sock.accept()
                if peers is not None and peer_pid(conn) not in peers():
                    self.strangers += 1
                    conn.close()
                    continue
                self.close()
                return Channel(conn)
            if not alive():
                raise ChannelError("the process ended before it connected to its channel")

    def close(self) -> None:
        try:
            self.sock.close()
        finally:
            self.path.unlink(missing_ok=True)


def peer_pid(conn: socket.socket) -> int:
    """The process id of a Unix socket's peer, as the kernel recorded it at connect (in this process's
    PID namespace): what the peer says about itself plays no part."""
    pid, _, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    return pid


def connect(path: str | None = None) -> Channel:
    """The sandboxed process's end (the path from ``KERNELEVO_CHANNEL`` unless given)."""
    target = path or os.environ.get(CHANNEL_ENV)
    if not target:
        raise ChannelError(f"{CHANNEL_ENV} is not set: this program runs inside a kernelevo sandbox")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(target)
    return Channel(sock)


def describe_exception(exc: BaseException, limit: int = 1500) -> str:
    """An exception in a few lines for a message: its text and the candidate's own frames."""
    import traceback

    frames = [
        f"{Path(f.filename).name}:{f.lineno}"
        for f in traceback.extract_tb(exc.__traceback__)
        if "candidate" in Path(f.filename).name
    ]
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    if len(text) > limit:
        text = text[: limit // 2] + "\n...\n" + text[-limit // 2:]
    return text + (f" (at {', '.join(frames[-3:])})" if frames else "")


def innermost_frames(exc: BaseException, count: int = 3) -> str:
    """Where ``exc`` was raised: its ``count`` innermost frames, innermost first, as ``file:line
    (function)``; for the judge's own failures (running out of device memory), whose cause lies in
    which allocation it was, not in the message."""
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)[-count:]
    return " < ".join(f"{Path(f.filename).name}:{f.lineno} ({f.name})" for f in reversed(frames)) or "(no frames)"
