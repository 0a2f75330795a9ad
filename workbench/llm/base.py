"""Provider protocol and request/reply records.

A provider turns one `LLMRequest` into one `LLMReply`. `BaseProvider` owns the bookkeeping every provider
needs (disk cache, call records, transcript, cost) so a new backend writes only `_send` (papermill's
engine pattern: the base class does the try/finally, the plug-in does the one thing it knows).

The providers build on this module, so it imports none of them: which names build which provider is
workbench.llm.registry (above the providers), and the errors are workbench.llm.errors (below everything), both
re-exported by workbench.llm. The errors are re-exported here too, for code that imports them from base.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from workbench.llm.errors import LLMCallError, LLMCancelled, LLMConfigError, LLMError, ReplayMissError
from workbench.llm.failures import advice, classify
from workbench.llm.recording import Recorder
from workbench.llm.retry import CallControl, RetryPolicy

__all__ = ["LLMError", "LLMConfigError", "LLMCallError", "LLMCancelled", "ReplayMissError", "LLMRequest",
           "LLMReply", "Provider", "BaseProvider", "TRUNCATED_REASONS", "CONTINUE_PROMPT"]


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


@dataclass(frozen=True)
class LLMRequest:
    """Everything that determines a reply. Its `key()` identifies it in caches and transcripts.

    `sample` distinguishes independent draws of the same prompt (best-of-n index, run seed): it is part of
    the identity but never sent, so a cache or a replay can hold n different answers to one prompt.
    """

    model: str
    messages: tuple[dict[str, str], ...]
    system: str = ""
    temperature: float | None = None
    max_tokens: int = 4096
    sample: int = 0
    params: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model, "messages": [dict(m) for m in self.messages], "system": self.system,
            "temperature": self.temperature, "max_tokens": self.max_tokens, "sample": self.sample,
            "params": dict(self.params),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LLMRequest:
        return cls(
            model=data["model"], messages=tuple(dict(m) for m in data["messages"]), system=data.get("system", ""),
            temperature=data.get("temperature"), max_tokens=int(data.get("max_tokens", 4096)),
            sample=int(data.get("sample", 0)), params=dict(data.get("params") or {}),
        )

    def key(self) -> str:
        """Content hash of the request (model, prompt, parameters, sample index)."""
        return hashlib.sha256(_canonical(self.to_dict()).encode()).hexdigest()[:32]

    @property
    def prompt_text(self) -> str:
        """The whole prompt as one string (system first), for display and token estimates."""
        parts = [self.system] if self.system else []
        parts += [m["content"] for m in self.messages]
        return "\n\n".join(parts)


#: finish_reason / stop_reason values that mean "cut at the output-token limit" (OpenAI, vLLM, Anthropic).
TRUNCATED_REASONS = frozenset({"length", "max_tokens", "max_output_tokens", "model_context_window_exceeded"})


@dataclass
class LLMReply:
    """A model's answer plus what it cost. `cached` is True when no API call was made for it.

    `finish_reason` is the provider's own word (OpenAI `finish_reason`, Anthropic `stop_reason`); `truncated`
    says whether it means the reply was cut at the token limit. `reasoning` is the reasoning text that
    reasoning models return beside the answer (kept for the transcript, never searched for code).
    """

    text: str
    tokens_in: int = 0
    tokens_out: int = 0
    model: str = ""
    finish_reason: str = ""
    cached: bool = False
    latency_s: float = 0.0
    cost_usd: float | None = None
    request_hash: str = ""
    reasoning: str = ""
    #: Attempts the call took (1 when the first one answered).
    attempts: int = 1
    #: Continuation requests appended to this reply after it was cut at the token limit.
    continued: int = 0

    @property
    def truncated(self) -> bool:
        return self.finish_reason in TRUNCATED_REASONS

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@runtime_checkable
class Provider(Protocol):
    """What the agent needs from a model backend."""

    name: str
    model: str

    def request(self, messages: list[dict[str, str]], *, system: str = "", sample: int = 0,
                **params: Any) -> LLMRequest: ...

    def complete(self, request: LLMRequest) -> LLMReply: ...


class BaseProvider:
    """Bookkeeping shared by all providers: cache lookup, retries, call records, transcript line, cost.

    Subclasses implement `_send(request) -> LLMReply` (text, token counts, finish reason, reasoning) for
    one attempt; `complete` wraps it in the retry policy (workbench.llm.retry) and turns SDK exceptions
    into classified `LLMCallError`s (workbench.llm.failures).
    """

    name = "base"
    #: Whether the API takes a `seed` (OpenAI-compatible servers do, Anthropic does not).
    accepts_seed = False
    #: Calls this provider may have in flight at once (None: as many as the run asks for).
    max_concurrency: int | None = None

    def __init__(self, model: str, *, temperature: float | None = None, max_tokens: int = 4096,
                 endpoint: str = "", recorder: Any = None, timeout: float | None = None,
                 retry: RetryPolicy | None = None):
        self.model = model
        self.temperature = temperature
        self.max_tokens = max_tokens
        #: Where requests go (base URL); part of the cache key so two servers' "same" model never mix.
        self.endpoint = endpoint
        self.recorder = recorder if recorder is not None else Recorder()
        self.timeout = timeout
        self.retry = retry or RetryPolicy()

    def request(self, messages: list[dict[str, str]], *, system: str = "", sample: int = 0,
                temperature: float | None = None, max_tokens: int | None = None, **params: Any) -> LLMRequest:
        """A request with this provider's model and defaults."""
        return LLMRequest(
            model=self.model, messages=tuple(dict(m) for m in messages), system=system,
            temperature=self.temperature if temperature is None else temperature,
            max_tokens=max_tokens or self.max_tokens, sample=sample, params=params,
        )

    def ask(self, prompt: str, *, system: str = "", **kw: Any) -> LLMReply:
        """One user message in, one reply out (convenience for notebooks)."""
        return self.complete(self.request([{"role": "user", "content": prompt}], system=system, **kw))

    def cache_key(self, request: LLMRequest) -> str:
        blob = _canonical({"provider": self.name, "endpoint": self.endpoint, "request": request.key()})
        return hashlib.sha256(blob.encode()).hexdigest()[:32]

    def settings(self) -> dict[str, Any]:
        """What rebuilds this provider later (`get_provider(**settings)`), the API key left out."""
        out = {"provider": self.name, "model": self.model, "temperature": self.temperature,
               "max_tokens": self.max_tokens, "timeout": self.timeout, "max_retries": self.retry.max_retries,
               "retry_base_delay": self.retry.base_delay, "retry_max_delay": self.retry.max_delay}
        base_url = getattr(self, "base_url", None)
        if base_url:
            out["base_url"] = base_url
        return out

    def with_model(self, model: str) -> BaseProvider:
        """The same provider (endpoint, key, client, recorder, limits) asking another model."""
        clone = copy.copy(self)
        clone.model = model
        return clone

    def continuation(self, request: LLMRequest, partial: LLMReply) -> LLMRequest:
        """The request that asks the model to go on with a reply cut at the token limit."""
        messages = list(request.messages) + [
            {"role": "assistant", "content": partial.text},
            {"role": "user", "content": CONTINUE_PROMPT},
        ]
        return dataclasses.replace(request, messages=tuple(messages))

    def join_continuation(self, partial: str, more: str) -> str:
        """The cut reply and its continuation as one text. A continuation that opens a new code block while
        the cut one is still open most likely starts over: the cut block is closed, so extraction (which
        takes the last block defining the entry class) finds the whole new one."""
        if _open_fence(partial) and more.lstrip().startswith(("```", "~~~")):
            return partial.rstrip("\n") + "\n```\n" + more.lstrip("\n")
        return partial + more

    # -- one call, with retries
    def complete(self, request: LLMRequest, *, control: CallControl | None = None) -> LLMReply:
        """The reply to `request`: from the cache when allowed, else from the API under the retry policy.

        Raises a classified `LLMCallError` when every attempt failed (or a failure no retry can fix), and
        `LLMCancelled` when `control` was cancelled first (nothing is recorded then: the canceller does).
        """
        recorder = self.recorder
        cache_key = self.cache_key(request)
        use_cache = recorder.cache is not None and recorder.caches(request)
        cached = recorder.cache.get(cache_key) if use_cache else None
        if cached is not None:
            known = set(LLMReply.__dataclass_fields__)
            reply = LLMReply(**{**{k: v for k, v in cached.items() if k in known}, "cached": True, "latency_s": 0.0})
            reply.request_hash = request.key()
            recorder.record(self, request, reply, cache_key=cache_key)
            return reply
        policy = self.retry
        for attempt in range(1, policy.attempts + 1):
            if control is not None and control.cancelled:
                raise LLMCancelled(control.reason or "cancelled", self.name, self.model)
            started = time.perf_counter()
            try:
                reply = self._send(request)
            except LLMError as exc:
                recorder.record(self, request, None, cache_key=cache_key, error=str(exc),
                                latency_s=time.perf_counter() - started, attempt=attempt)
                raise
            except Exception as exc:  # SDK errors: network, HTTP status, schema
                error = self._call_error(exc, attempt)
                if control is not None and control.cancelled:
                    raise LLMCancelled(control.reason or "cancelled", self.name, self.model) from exc
                recorder.record(self, request, None, cache_key=cache_key, error=str(error),
                                latency_s=time.perf_counter() - started, attempt=attempt, error_kind=error.kind)
                wait = policy.delay(attempt, error.retry_after) if error.retryable and attempt < policy.attempts \
                    else None
                if wait is None:
                    raise error from exc
                if control is not None and control.wait(wait):
                    raise LLMCancelled(control.reason or "cancelled", self.name, self.model) from exc
                if control is None:
                    time.sleep(wait)
                continue
            if control is not None and not control.settle():
                raise LLMCancelled(control.reason or "cancelled", self.name, self.model)
            reply.latency_s = time.perf_counter() - started
            reply.request_hash = request.key()
            reply.model = reply.model or self.model
            reply.attempts = attempt
            reply.cost_usd = recorder.prices.cost(self.model, reply.tokens_in, reply.tokens_out)
            if use_cache and not reply.truncated:  # a cut reply is not an answer worth keeping
                recorder.cache.put(cache_key, {k: v for k, v in reply.to_dict().items()
                                               if k not in ("cached", "latency_s", "request_hash", "attempts")})
            recorder.record(self, request, reply, cache_key=cache_key, attempt=attempt)
            return reply
        raise AssertionError("unreachable")  # pragma: no cover

    def _call_error(self, exc: Exception, attempt: int) -> LLMCallError:
        failure = classify(exc)
        where = self.endpoint or "the default endpoint"
        hint = advice(failure, provider=self.name, endpoint=where, timeout=self.timeout, attempts=attempt,
                      max_retries=self.retry.max_retries)
        status = f"HTTP {failure.status}, " if failure.status else ""
        message = (f"{self.name} call to model {self.model!r} at {where} failed ({status}{failure.kind}): "
                   f"{type(exc).__name__}: {failure.detail}. {hint}")
        return LLMCallError(message, self.name, self.model, kind=failure.kind, status=failure.status,
                            retry_after=failure.retry_after, attempts=attempt)

    def _send(self, request: LLMRequest) -> LLMReply:  # pragma: no cover - abstract
        raise NotImplementedError

    def __repr__(self) -> str:
        where = f", endpoint={self.endpoint!r}" if self.endpoint else ""
        return f"{type(self).__name__}(model={self.model!r}{where})"


def _open_fence(text: str) -> bool:
    """Whether `text` ends inside a fenced code block (an odd number of fence lines)."""
    fences = [line for line in text.splitlines() if line.lstrip().startswith(("```", "~~~"))]
    return len(fences) % 2 == 1


#: What a continuation request says after the cut reply (providers with assistant prefill need no words).
CONTINUE_PROMPT = ("Your reply was cut off at the output-token limit. Continue exactly where it stopped: no "
                   "repetition, no preamble, and close any open code block.")
