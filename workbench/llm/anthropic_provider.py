"""Anthropic messages API through the official `anthropic` SDK (base_url configurable for proxies/tests)."""

from __future__ import annotations

from typing import Any

from workbench.errors import require
from workbench.llm.base import BaseProvider, LLMReply, LLMRequest, register_provider
from workbench.llm.config import LLMConfig, sdk_settings


class AnthropicProvider(BaseProvider):
    name = "anthropic"

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 timeout: float = 120.0, max_retries: int = 2, **kw: Any):
        super().__init__(model, endpoint=base_url or "https://api.anthropic.com", **kw)
        anthropic = require("anthropic", "llm", "the Anthropic provider")
        self.base_url = base_url
        self.client = anthropic.Anthropic(api_key=api_key, base_url=base_url, timeout=timeout, max_retries=max_retries)

    def _send(self, request: LLMRequest) -> LLMReply:
        kwargs: dict[str, Any] = {"model": request.model, "messages": list(request.messages),
                                  "max_tokens": request.max_tokens}
        if request.system:
            kwargs["system"] = request.system
        if request.temperature is not None:
            kwargs["temperature"] = request.temperature
        kwargs.update(request.params)
        response = self.client.messages.create(**kwargs)
        text = "".join(getattr(block, "text", "") for block in response.content if getattr(block, "type", "") == "text")
        usage = getattr(response, "usage", None)
        return LLMReply(
            text=text,
            tokens_in=int(getattr(usage, "input_tokens", 0) or 0),
            tokens_out=int(getattr(usage, "output_tokens", 0) or 0),
            model=getattr(response, "model", "") or request.model,
            finish_reason=getattr(response, "stop_reason", "") or "",
        )


def _from_config(config: LLMConfig) -> AnthropicProvider:
    model, kwargs = sdk_settings(config)
    return AnthropicProvider(model, **kwargs)


register_provider("anthropic", _from_config)
