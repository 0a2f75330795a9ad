"""Provider protocol, request/reply records and the provider registry.

A provider turns one `LLMRequest` into one `LLMReply`. `BaseProvider` owns the bookkeeping every provider
needs (disk cache, call records, transcript, cost) so a new backend writes only `_send` (papermill's
engine pattern: the base class does the try/finally, the plug-in does the one thing it knows).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from workbench.errors import UnknownNameError, WorkbenchError


class LLMError(WorkbenchError):
    """An LLM provider failed or is misconfigured; carries the provider and model names."""

    def __init__(self, message: str, provider: str | None = None, model: str | None = None):
        self.provider, self.model = provider, model
        super().__init__(message)


class LLMConfigError(LLMError):
    """A required setting is missing or invalid; `setting` names it, `env` is the variable that sets it."""

    def __init__(self, message: str, setting: str, env: str | None = None, provider: str | None = None):
        self.setting, self.env = setting, env
        super().__init__(message, provider)


class LLMCallError(LLMError):
    """The provider's API call failed (network, HTTP status, malformed reply)."""


class ReplayMissError(LLMError):
    """A replayed run asked for a request the transcript does not hold."""

    def __init__(self, message: str, request_hash: str):
        self.request_hash = request_hash
        super().__init__(message, "replay")


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


@dataclass
class LLMReply:
    """A model's answer plus what it cost. `cached` is True when no API call was made for it."""

    text: str
    tokens_in: int = 0
    tokens_out: int = 0
    model: str = ""
    finish_reason: str = ""
    cached: bool = False
    latency_s: float = 0.0
    cost_usd: float | None = None
    request_hash: str = ""

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
    """Bookkeeping shared by all providers: cache lookup, call record, transcript line, cost estimate.

    Subclasses implement `_send(request) -> LLMReply` (text and token counts only).
    """

    name = "base"

    def __init__(self, model: str, *, temperature: float | None = None, max_tokens: int = 4096,
                 endpoint: str = "", recorder: Any = None):
        from workbench.llm.recording import Recorder

        self.model = model
        self.temperature = temperature
        self.max_tokens = max_tokens
        #: Where requests go (base URL); part of the cache key so two servers' "same" model never mix.
        self.endpoint = endpoint
        self.recorder = recorder if recorder is not None else Recorder()

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

    def complete(self, request: LLMRequest) -> LLMReply:
        recorder = self.recorder
        cache_key = self.cache_key(request)
        cached = recorder.cache.get(cache_key) if recorder.cache is not None else None
        if cached is not None:
            reply = LLMReply(**{**cached, "cached": True, "latency_s": 0.0})
            reply.request_hash = request.key()
            recorder.record(self, request, reply, cache_key=cache_key)
            return reply
        started = time.perf_counter()
        try:
            reply = self._send(request)
        except LLMError as exc:
            recorder.record(self, request, None, cache_key=cache_key, error=str(exc),
                            latency_s=time.perf_counter() - started)
            raise
        except Exception as exc:  # SDK errors: network, HTTP status, schema
            err = LLMCallError(
                f"{self.name} call to model {self.model!r} at {self.endpoint or 'the default endpoint'} failed: "
                f"{type(exc).__name__}: {exc}. Check the base URL, the API key and that the model name exists.",
                self.name, self.model,
            )
            recorder.record(self, request, None, cache_key=cache_key, error=str(err),
                            latency_s=time.perf_counter() - started)
            raise err from exc
        reply.latency_s = time.perf_counter() - started
        reply.request_hash = request.key()
        reply.model = reply.model or self.model
        reply.cost_usd = recorder.prices.cost(self.model, reply.tokens_in, reply.tokens_out)
        if recorder.cache is not None:
            recorder.cache.put(cache_key, {k: v for k, v in reply.to_dict().items()
                                           if k not in ("cached", "latency_s", "request_hash")})
        recorder.record(self, request, reply, cache_key=cache_key)
        return reply

    def _send(self, request: LLMRequest) -> LLMReply:  # pragma: no cover - abstract
        raise NotImplementedError

    def __repr__(self) -> str:
        where = f", endpoint={self.endpoint!r}" if self.endpoint else ""
        return f"{type(self).__name__}(model={self.model!r}{where})"


# ---- registry ----------------------------------------------------------------------------------------

_PROVIDERS: dict[str, Callable[..., Provider]] = {}


def register_provider(name: str, factory: Callable[..., Provider]) -> None:
    """Register a provider factory: called with an `LLMConfig` and keyword overrides."""
    _PROVIDERS[name] = factory


def _ensure_builtins() -> None:
    from workbench.llm import anthropic_provider, openai_provider, replay  # noqa: F401 (register on import)


def providers() -> list[str]:
    """Names of the registered providers."""
    _ensure_builtins()
    return sorted(_PROVIDERS)


def get_provider(name: str | None = None, **settings: Any) -> Provider:
    """Build a provider from the config file + env vars, with `settings` taking precedence.

    `get_provider()` uses KWB_LLM_PROVIDER; `get_provider("openai", model="...", base_url="...")` is explicit.
    """
    from workbench.llm.config import load_config

    _ensure_builtins()
    config = load_config(provider=name, **settings)
    if config.provider not in _PROVIDERS:
        raise UnknownNameError("LLM provider", config.provider, list(_PROVIDERS))
    return _PROVIDERS[config.provider](config)
