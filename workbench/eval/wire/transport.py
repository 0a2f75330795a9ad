"""Frames between the judge and a runner or the fork server (an 8-byte header, JSON, descriptors by SCM_RIGHTS on a Unix
socket), capped in size and in nesting (checked before parsing) so a hostile frame is a FrameError; and a bounded reader
for the runner's output."""

from __future__ import annotations

import collections
import contextlib
import json
import os
import re
import select
import socket
import struct
import threading
import time
from typing import Any

#: Largest frame accepted (bytes of JSON).
MAX_FRAME = 32 << 20
MAX_FDS = 64
#: Deepest nesting accepted (the protocol's messages need fewer than ten levels).
MAX_DEPTH = 64
_HEADER = struct.Struct("<II")
#: A JSON string (escapes included): removed before the brackets are counted, since brackets inside it are text.
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_INNERMOST = re.compile(rb"\[\]|\{\}")
_TOO_DEEP_AT_ONCE = re.compile(rb"[\[{]{%d}" % (MAX_DEPTH + 1))
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


class ChannelClosed(Exception):
    """The other side closed the socket (or died)."""


class ChannelTimeout(Exception):
    """No complete frame arrived before the deadline."""


class FrameError(Exception):
    """The bytes on the socket are not a frame (too large, not JSON, too many descriptors)."""


def check_nesting(payload: bytes, limit: int = MAX_DEPTH) -> None:
    """FrameError when the JSON in `payload` nests deeper than `limit` or its brackets do not pair up."""
    if payload.count(b"[") + payload.count(b"{") <= limit:
        return
    shape = _JSON_STRING.sub(b"", payload).translate(None, _NOT_BRACKETS)
    if limit == MAX_DEPTH and _TOO_DEEP_AT_ONCE.search(shape):
        raise FrameError(f"frame nests deeper than {limit} levels")
    for _ in range(limit):
        if not shape:
            return
        peeled = _INNERMOST.sub(b"", shape)
        if peeled == shape:
            raise FrameError("frame's brackets do not pair up")
        shape = peeled
    if shape:
        raise FrameError(f"frame nests deeper than {limit} levels")


class Channel:
    """One end of a socket pair, moving JSON frames with descriptors."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.sock.setblocking(True)
        self._lock = threading.Lock()

    @classmethod
    def pair(cls) -> tuple[Channel, socket.socket]:
        """(this end, the other end as a raw socket for another process)."""
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        return cls(a), b

    def fileno(self) -> int:
        return self.sock.fileno()

    def send(self, obj: Any, fds: list[int] | tuple[int, ...] = ()) -> None:
        payload = json.dumps(obj, separators=(",", ":"), allow_nan=True).encode()
        if len(payload) > MAX_FRAME:
            raise FrameError(f"frame of {len(payload)} bytes exceeds {MAX_FRAME}")
        header = _HEADER.pack(len(payload), len(fds))
        with self._lock:
            try:
                if fds:
                    socket.send_fds(self.sock, [header], list(fds))
                else:
                    self.sock.sendall(header)
                self.sock.sendall(payload)
            except (BrokenPipeError, ConnectionResetError, OSError) as exc:
                raise ChannelClosed(str(exc)) from exc

    def readable(self, seconds: float) -> bool:
        ready, _, _ = select.select([self.sock], [], [], max(0.0, seconds))
        return bool(ready)

    def _read_exact(self, n: int, deadline: float | None, fds: list[int] | None = None) -> bytes:
        chunks, got = [], 0
        while got < n:
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not self.readable(remaining):
                    raise ChannelTimeout()
            try:
                if fds is not None:
                    data, new_fds, _flags, _addr = socket.recv_fds(self.sock, n - got, MAX_FDS)
                    fds.extend(new_fds)
                else:
                    data = self.sock.recv(min(n - got, 1 << 20))
            except (ConnectionResetError, BrokenPipeError) as exc:  # the other side died mid-conversation
                raise ChannelClosed(str(exc)) from exc
            if not data:
                raise ChannelClosed("the other side closed the channel")
            chunks.append(data)
            got += len(data)
        return b"".join(chunks)

    def recv(self, deadline: float | None = None) -> tuple[Any, list[int]]:
        """One frame: (decoded JSON, received descriptors)."""
        fds: list[int] = []
        length, nfds = _HEADER.unpack(self._read_exact(_HEADER.size, deadline, fds))
        if length > MAX_FRAME or nfds > MAX_FDS or len(fds) != nfds:
            for fd in fds:
                os.close(fd)
            raise FrameError(f"bad frame header (length {length}, {nfds} descriptors announced, {len(fds)} received)")
        payload = self._read_exact(length, deadline)
        try:
            check_nesting(payload)
            return json.loads(payload), fds
        except (ValueError, RecursionError, FrameError) as exc:
            for fd in fds:
                os.close(fd)
            if isinstance(exc, FrameError):
                raise
            raise FrameError(f"frame is not JSON: {payload[:80]!r}") from exc

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


class BoundedLog:
    """Reads a pipe until EOF in a thread, keeping only the last `keep` bytes."""

    def __init__(self, fd: int, keep: int = 64 * 1024):
        self.fd, self.keep = fd, keep
        self._chunks: collections.deque[bytes] = collections.deque()
        self._size = 0
        self.total = 0
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._drain, daemon=True, name="kwb-runner-log")
        self._thread.start()

    def _drain(self) -> None:
        try:
            with contextlib.suppress(OSError):
                while data := os.read(self.fd, 1 << 16):
                    with self._lock:
                        self.total += len(data)
                        self._chunks.append(data)
                        self._size += len(data)
                        while self._size - len(self._chunks[0]) >= self.keep:
                            self._size -= len(self._chunks.popleft())
        finally:
            with contextlib.suppress(OSError):
                os.close(self.fd)

    def join(self, timeout: float = 2.0) -> None:
        self._thread.join(timeout)

    def tail(self, lines: int = 50) -> str:
        with self._lock:
            data = b"".join(self._chunks)[-self.keep:]
        kept = data.decode(errors="replace").splitlines()[-lines:]
        dropped = self.total - len(data)
        prefix = [f"[{dropped} earlier bytes of output not kept]"] if dropped > 0 else []
        return "\n".join(prefix + kept)

    def clear(self) -> None:
        with self._lock:
            self._chunks.clear()
            self._size = 0

