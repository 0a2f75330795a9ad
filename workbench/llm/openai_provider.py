"""OpenAI-compatible chat completions through the official `openai` SDK.

One provider covers OpenAI itself and every server that speaks the same protocol at a `base_url`
(vLLM, SGLang, Ollama, llama.cpp's server, OpenRouter). Local servers (loopback URLs) need no API key.
"""

from __future__ import annotations

from typing import Any

from workbench.errors import require
from workbench.llm.base import BaseProvider, LLMReply, LLMRequest, register_provider
from workbench.llm.config import LLMConfig, sdk_settings

#: Key sent to loopback servers that ignore it (the SDK insists on some key).


class OpenAIProvider(BaseProvider):
    name = "openai"

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 timeout: float = 120.0, max_retries: int = 2, token_param: str = "max_tokens", **kw: Any):
        super().__init__(model, endpoint=base_url or "https://api.openai.com/v1", **kw)
        openai = require("openai", "llm", "the OpenAI-compatible provider")
        self.base_url = base_url
        #: Newer OpenAI reasoning models want "max_completion_tokens"; servers like vLLM accept "max_tokens".
        self.token_param = token_param
        self.client = openai.OpenAI(api_key=api_key, base_url=base_url, timeout=timeout, max_retries=max_retries)

    def _send(self, request: LLMRequest) -> LLMReply:
        messages = ([{"role": "system", "content": request.system}] if request.system else []) + list(request.messages)
        kwargs: dict[str, Any] = {"model": request.model, "messages": messages, self.token_param: request.max_tokens}
        if request.temperature is not None:
            kwargs["temperature"] = request.temperature
        kwargs.update(request.params)
        response = self.client.chat.completions.create(**kwargs)
        choice = response.choices[0]
        usage = getattr(response, "usage", None)
        return LLMReply(
            text=choice.message.content or "",
            tokens_in=int(getattr(usage, "prompt_tokens", 0) or 0),
            tokens_out=int(getattr(usage, "completion_tokens", 0) or 0),
            model=getattr(response, "model", "") or request.model,
            finish_reason=choice.finish_reason or "",
        )


def _from_config(config: LLMConfig) -> OpenAIProvider:
    model, kwargs = sdk_settings(config)
    return OpenAIProvider(model, **kwargs)


register_provider("openai", _from_config)
