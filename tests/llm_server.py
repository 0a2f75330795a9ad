"""A scripted LLM server on 127.0.0.1 for tests: speaks OpenAI chat completions and Anthropic messages.

The real `openai` and `anthropic` SDK clients talk to it over HTTP, so tests exercise the providers end
to end without network or keys. Replies come from a script (a queue shared by both protocols); every
request body is kept so tests can assert what the loop sent (e.g. that an error reached the next prompt).

    with ScriptedLLMServer([reply(HONEST), reply(CHEAT)]) as server:
        provider = OpenAIProvider("test-model", base_url=server.openai_base_url, api_key="k")

Run standalone: `python tests/llm_server.py --port 8000 replies.json` (a JSON list of reply texts), or
`python tests/llm_server.py --record-study studies/data/llm_replay` to re-record the replay study.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# ---- scripted kernels for a tiny vector-add task (2 x 256 fp32) ----------------------------------------

TINY_SOURCE = '''import torch
import torch.nn as nn

M = 2
N = 256


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return a + b


def get_inputs():
    return [torch.randn(M, N), torch.randn(M, N)]


def get_init_inputs():
    return []
'''

_HONEST = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask, other=0.0)
    b = tl.load(b_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, a + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        a = a.contiguous()
        b = b.contiguous()
        out = torch.empty_like(a)
        n = a.numel()
        add_kernel[(triton.cdiv(n, BLOCK_SIZE),)](a, b, out, n, BLOCK=BLOCK_SIZE)
        return out
'''

#: Honest and fast under the interpreter: 512 elements in 1 program.
HONEST_FAST = "BLOCK_SIZE = 512\n\n" + _HONEST
#: Honest but slow under the interpreter: 512 elements in 16 programs (~16x the per-program cost).
HONEST_SLOW = "BLOCK_SIZE = 32\n\n" + _HONEST

#: Torch does the work: the static checks must reject it however fast it is.
CHEAT = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.add(a, b)
'''

#: Does not even parse.
BROKEN_SYNTAX = HONEST_FAST.replace("def forward(self, a, b):", "def forward(self, a, b)")

#: Parses and imports, then raises inside forward.
BROKEN_RUNTIME = HONEST_FAST.replace("out = torch.empty_like(a)", "out = torch.empty_like(a)\n        raise RuntimeError('kernel launch exploded')")

NO_CODE = "I would use a Triton kernel with one program per block of elements, masked at the tail."


def reply(code: str, note: str = "Here is the implementation.") -> str:
    """A model-like reply: a sentence, then one fenced python block."""
    return f"{note}\n\n```python\n{code}```\n"


# ---- the server ----------------------------------------------------------------------------------------

Script = str | dict | Callable[[dict], "str | dict"]

#: Anthropic's error type for each HTTP status the scripted server sends.
_ANTHROPIC_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                    404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 500: "api_error",
                    529: "overloaded_error"}
#: OpenAI finish_reason -> Anthropic stop_reason.
_STOP_REASONS = {"stop": "end_turn", "length": "max_tokens"}


def failure(status: int, message: str = "scripted failure", **kw: Any) -> dict:
    """A scripted HTTP error; kw: retry_after (seconds header), retry_after_ms, code, type."""
    return {"status": status, "message": message, **kw}


def truncated(text: str, reasoning: str = "") -> dict:
    """A reply cut at the token limit (finish_reason "length" / stop_reason "max_tokens")."""
    return {"text": text, "finish_reason": "length", "reasoning": reasoning}


def by_seed(replies: dict[int, Any], default: Any = None) -> Callable[[Received], Any]:
    """A router answering each request by the seed it carries (OpenAI-protocol requests carry the sample's
    seed): concurrent requests get the same replies whatever order they arrive in."""
    return lambda received: replies.get(received.body.get("seed"), default)


def hang(seconds: float) -> dict:
    """Answer nothing for `seconds` (a server past the client's timeout), then fail with 500."""
    return {"hang": seconds}


@dataclass
class Received:
    """One request as the server saw it."""

    protocol: str  # "openai" | "anthropic"
    path: str
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)
    #: time.monotonic() when it arrived and when its answer went out.
    at: float = 0.0
    answered_at: float = 0.0

    @property
    def text(self) -> str:
        """Everything the client sent as prompt text (system + message contents)."""
        parts = []
        if self.body.get("system"):
            system = self.body["system"]
            parts.append(system if isinstance(system, str) else json.dumps(system))
        for message in self.body.get("messages", []):
            content = message.get("content")
            parts.append(content if isinstance(content, str) else json.dumps(content))
        return "\n".join(parts)


def _tokens(text: str) -> int:
    return max(1, len(text.split()))


class ScriptedLLMServer:
    """Answers POST /v1/chat/completions (OpenAI) and POST /v1/messages (Anthropic) from a script.

    Script entries: a reply text; a callable(body) -> entry; `failure(status, ...)` for an HTTP error (with
    Retry-After headers when asked); `truncated(text, reasoning)` for a reply cut at the token limit; a dict
    {"text", "finish_reason", "reasoning", "delay"} for anything else; `hang(seconds)` to answer nothing for a
    while. When the script runs out the server answers HTTP 400. `router(received) -> entry`, when given,
    answers every request instead of the script (so concurrent requests get replies by what they ask, say by
    their seed). `delay_s` delays every answer (a model's latency); `in_flight_max` is the most requests it
    held at once.
    """

    def __init__(self, replies: Iterable[Script] = (), *, port: int = 0, delay_s: float = 0.0,
                 router: Callable[[Received], Script] | None = None):
        self.script: deque[Script] = deque(replies)
        self.requests: list[Received] = []
        self.delay_s = delay_s
        self.router = router
        self.in_flight = 0
        self.in_flight_max = 0
        self._closing = threading.Event()
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    self._send(200, {"object": "list", "data": [{"id": "scripted", "object": "model"}]})
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                path = self.path.split("?")[0].rstrip("/")
                if path.endswith("/chat/completions"):
                    protocol = "openai"
                elif path.endswith("/messages"):
                    protocol = "anthropic"
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                    return
                received = Received(protocol, path, body, {k.lower(): v for k, v in self.headers.items()},
                                    at=time.monotonic())
                status, payload, headers = server._answer(received)
                try:
                    self._send(status, payload, headers)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (its timeout, or a cancelled run)
                received.answered_at = time.monotonic()

            def _send(self, status: int, payload: dict, headers: dict[str, str] | None = None) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    # -- lifecycle
    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base_url(self) -> str:
        return self.url + "/v1"

    @property
    def anthropic_base_url(self) -> str:
        return self.url

    def start(self) -> ScriptedLLMServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="scripted-llm", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._closing.set()  # hanging answers end now
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread:
            self._thread.join(timeout=5)

    def __enter__(self) -> ScriptedLLMServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- script
    def add(self, *replies: Script) -> None:
        with self._lock:
            self.script.extend(replies)

    @property
    def hits(self) -> int:
        return len(self.requests)

    def wait_for_requests(self, count: int, timeout: float = 10.0) -> bool:
        """Block until `count` requests arrived (a test that must act while a call is in flight)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(self.requests) >= count:
                return True
            time.sleep(0.01)
        return False

    def _answer(self, received: Received) -> tuple[int, dict, dict[str, str]]:
        with self._lock:
            self.requests.append(received)
            self.in_flight += 1
            self.in_flight_max = max(self.in_flight_max, self.in_flight)
            if self.router is not None:
                entry = self.router(received)
            else:
                entry = self.script.popleft() if self.script else None
        try:
            if callable(entry):
                entry = entry(received.body)
            delay = self.delay_s + (float(entry.get("delay", 0)) if isinstance(entry, dict) else 0.0)
            if delay:
                self._closing.wait(delay)
            return self._payload(received, entry)
        finally:
            with self._lock:
                self.in_flight -= 1

    def _payload(self, received: Received, entry: Any) -> tuple[int, dict, dict[str, str]]:
        if entry is None:
            return _error(received.protocol, 400, "the scripted server has no more replies")
        if isinstance(entry, dict) and "hang" in entry:
            self._closing.wait(float(entry["hang"]))
            return _error(received.protocol, 500, "answered after hanging")
        if isinstance(entry, dict) and "status" in entry:
            return _error(received.protocol, int(entry["status"]), entry.get("message", "scripted failure"),
                          code=entry.get("code"), kind=entry.get("type"), retry_after=entry.get("retry_after"),
                          retry_after_ms=entry.get("retry_after_ms"))
        if isinstance(entry, str):
            entry = {"text": entry}
        return 200, _completion(received, entry["text"], entry.get("finish_reason", "stop"),
                                entry.get("reasoning", ""), len(self.requests)), {}


def _completion(received: Received, text: str, finish: str, reasoning: str, number: int) -> dict:
    model = received.body.get("model", "scripted")
    tin, tout = _tokens(received.text), _tokens(text + " " + reasoning)
    if received.protocol == "openai":
        message = {"role": "assistant", "content": text}
        if reasoning:
            message["reasoning_content"] = reasoning
        return {
            "id": f"chatcmpl-{number}", "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": tin, "completion_tokens": tout, "total_tokens": tin + tout},
        }
    content = [{"type": "thinking", "thinking": reasoning, "signature": "sig"}] if reasoning else []
    content.append({"type": "text", "text": text})
    return {
        "id": f"msg_{number}", "type": "message", "role": "assistant", "model": model, "content": content,
        "stop_reason": _STOP_REASONS.get(finish, finish), "stop_sequence": None,
        "usage": {"input_tokens": tin, "output_tokens": tout},
    }


def _error(protocol: str, status: int, message: str, *, code: str | None = None, kind: str | None = None,
           retry_after: float | None = None, retry_after_ms: float | None = None) -> tuple[int, dict, dict[str, str]]:
    headers = {}
    if retry_after is not None:
        headers["retry-after"] = str(retry_after)
    if retry_after_ms is not None:
        headers["retry-after-ms"] = str(retry_after_ms)
    if protocol == "anthropic":
        return status, {"type": "error", "error": {"type": kind or _ANTHROPIC_TYPES.get(status, "api_error"),
                                                   "message": message}}, headers
    return status, {"error": {"message": message, "type": kind or "invalid_request_error", "code": code}}, headers


# ---- the replay study's recorded session ------------------------------------------------------------------

#: The multi-turn session behind studies/llm_replay.ipynb: a cheat, a reply without code, a crash, then an
#: honest slow kernel and an honest fast one. Each refine turn's parent does not depend on timing noise.
STUDY_SCRIPT = [
    reply(CHEAT, "Simplest correct version:"),
    NO_CODE,
    reply(BROKEN_RUNTIME, "A Triton kernel this time:"),
    reply(HONEST_SLOW, "Fixed: the stray raise is gone."),
    reply(HONEST_FAST, "Fewer, larger programs:"),
]


def record_study(directory: str) -> None:
    """Run the refine loop against this server once and write the study's transcript and table."""
    from pathlib import Path

    from workbench.llm.agent import AgentSettings, run_agent
    from workbench.llm.openai_provider import OpenAIProvider
    from workbench.llm.recording import Recorder
    from workbench.tasks.task import Task

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    transcript = out / "transcript.jsonl"
    transcript.unlink(missing_ok=True)
    task = Task.from_source(TINY_SOURCE, name="tiny_add", sizes={"M": 2, "N": 256})
    with ScriptedLLMServer(STUDY_SCRIPT) as server:
        provider = OpenAIProvider("scripted-coder", base_url=server.openai_base_url, api_key="local",
                                  recorder=Recorder(), max_retries=0)
        run = run_agent(task, provider, strategy="refine", settings=AgentSettings(max_turns=len(STUDY_SCRIPT)),
                        transcript=transcript, run_id="recorded", progress=False)
    run.table().to_csv(out / "table.csv", index=False)
    print(run.table().to_string())


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("replies", nargs="?", help="JSON file: a list of reply texts")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--record-study", metavar="DIR", help="record the replay study's transcript into DIR")
    args = parser.parse_args(argv)
    if args.record_study:
        record_study(args.record_study)
        return 0
    replies = json.loads(open(args.replies).read()) if args.replies else []
    server = ScriptedLLMServer(replies, port=args.port)
    print(f"scripted LLM server on {server.url} (OpenAI base_url {server.openai_base_url})", flush=True)
    try:
        server._httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
