"""OpenAI-compatible chat completions through the official `openai` SDK.

One provider covers OpenAI itself and every server that speaks the same protocol at a `base_url`
(vLLM, SGLang, Ollama, llama.cpp's server, OpenRouter). Local servers (loopback URLs) need no API key.

The reply limit goes out under `token_param`: "max_tokens" for most servers, "max_completion_tokens" for
OpenAI's reasoning models (chosen by model name, see workbench.llm.config.DEFAULT_TOKEN_PARAMS). Each request
carries the sample's seed unless `send_seed=False`. Reasoning text comes back in `reasoning_content` (vLLM,
DeepSeek) or `reasoning` (OpenRouter, Ollama) and is kept beside the answer.
"""

from __future__ import annotations

from typing import Any

from workbench.errors import require
from workbench.llm.base import BaseProvider, LLMReply, LLMRequest
from workbench.llm.config import LLMConfig, sdk_settings

#: Message fields that OpenAI-compatible servers use for reasoning text.
REASONING_FIELDS = ("reasoning_content", "reasoning")


class OpenAIProvider(BaseProvider):
    name = "openai"
    accepts_seed = True

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 timeout: float = 120.0, max_retries: int | None = None, token_param: str = "max_tokens",
                 send_seed: bool = True, **kw: Any):
        if max_retries is not None and "retry" not in kw:
            from workbench.llm.retry import RetryPolicy

            kw["retry"] = RetryPolicy(max_retries=max_retries)
        super().__init__(model, endpoint=base_url or "https://api.openai.com/v1", timeout=timeout, **kw)
        openai = require("openai", "llm", "the OpenAI-compatible provider")
        self.base_url = base_url
        #: Newer OpenAI reasoning models want "max_completion_tokens"; servers like vLLM accept "max_tokens".
        self.token_param = token_param
        self.send_seed = send_seed
        # Retries are the provider's own policy (workbench.llm.retry), so the SDK makes exactly one attempt.
        self.client = openai.OpenAI(api_key=api_key, base_url=base_url, timeout=timeout, max_retries=0)

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "token_param": self.token_param, "send_seed": self.send_seed}

    def _send(self, request: LLMRequest) -> LLMReply:
        messages = ([{"role": "system", "content": request.system}] if request.system else []) + list(request.messages)
        kwargs: dict[str, Any] = {"model": request.model, "messages": messages, self.token_param: request.max_tokens}
        if request.temperature is not None:
            kwargs["temperature"] = request.temperature
        if self.send_seed:
            kwargs["seed"] = request.sample
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
            reasoning=_reasoning(choice.message),
        )


def _reasoning(message: Any) -> str:
    for name in REASONING_FIELDS:
        value = getattr(message, name, None)
        if value is None:
            value = (getattr(message, "model_extra", None) or {}).get(name)
        if isinstance(value, str) and value:
            return value
    return ""


def from_config(config: LLMConfig) -> OpenAIProvider:
    """What `get_provider("openai")` builds: the reply limit's name and the seed follow the model (see module doc)."""
    model, kwargs = sdk_settings(config)
    return OpenAIProvider(model, token_param=config.token_param_for(model), send_seed=config.send_seed, **kwargs)
