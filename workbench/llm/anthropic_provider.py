"""Anthropic messages API through the official `anthropic` SDK (base_url configurable for proxies/tests).

The API takes no seed, so none is sent (draws differ by their sample index only in caches and transcripts).
Extended-thinking blocks are kept as the reply's reasoning; a reply cut at the limit (`stop_reason:
"max_tokens"`) is continued by prefill: the cut text goes back as the start of the assistant's turn.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from workbench.errors import require
from workbench.llm.base import BaseProvider, LLMReply, LLMRequest
from workbench.llm.config import LLMConfig, sdk_settings


class AnthropicProvider(BaseProvider):
    name = "anthropic"
    accepts_seed = False

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 timeout: float = 120.0, max_retries: int | None = None, **kw: Any):
        if max_retries is not None and "retry" not in kw:
            from workbench.llm.retry import RetryPolicy

            kw["retry"] = RetryPolicy(max_retries=max_retries)
        super().__init__(model, endpoint=base_url or "https://api.anthropic.com", timeout=timeout, **kw)
        anthropic = require("anthropic", "llm", "the Anthropic provider")
        self.base_url = base_url
        # Retries are the provider's own policy (workbench.llm.retry), so the SDK makes exactly one attempt.
        self.client = anthropic.Anthropic(api_key=api_key, base_url=base_url, timeout=timeout, max_retries=0)

    def continuation(self, request: LLMRequest, partial: LLMReply) -> LLMRequest:
        # Prefill: the API continues a final assistant message (which must not end in whitespace).
        messages = list(request.messages) + [{"role": "assistant", "content": partial.text.rstrip()}]
        return dataclasses.replace(request, messages=tuple(messages))

    def join_continuation(self, partial: str, more: str) -> str:
        return partial.rstrip() + more  # the model went on from the stripped prefill

    def _send(self, request: LLMRequest) -> LLMReply:
        kwargs: dict[str, Any] = {"model": request.model, "messages": list(request.messages),
                                  "max_tokens": request.max_tokens}
        if request.system:
            kwargs["system"] = request.system
        if request.temperature is not None:
            kwargs["temperature"] = request.temperature
        kwargs.update(request.params)
        response = self.client.messages.create(**kwargs)
        blocks = list(response.content or [])
        text = "".join(getattr(b, "text", "") for b in blocks if getattr(b, "type", "") == "text")
        reasoning = "\n".join(getattr(b, "thinking", "") for b in blocks if getattr(b, "type", "") == "thinking")
        usage = getattr(response, "usage", None)
        return LLMReply(
            text=text,
            tokens_in=int(getattr(usage, "input_tokens", 0) or 0),
            tokens_out=int(getattr(usage, "output_tokens", 0) or 0),
            model=getattr(response, "model", "") or request.model,
            finish_reason=getattr(response, "stop_reason", "") or "",
            reasoning=reasoning,
        )


def from_config(config: LLMConfig) -> AnthropicProvider:
    """What `get_provider("anthropic")` builds (workbench.llm.registry names this factory)."""
    model, kwargs = sdk_settings(config)
    return AnthropicProvider(model, **kwargs)
