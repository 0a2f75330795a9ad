"""LLM providers, prompts, code extraction and feedback for the generate-evaluate-refine loop.

    from workbench.llm import get_provider
    provider = get_provider("openai", model="qwen2.5-coder", base_url="http://localhost:8000/v1")
    provider = get_provider("replay", transcript="studies/data/llm_replay/transcript.jsonl")

Providers: `openai` (any OpenAI-compatible server), `anthropic`, `replay` (a recorded transcript).
The SDKs are optional dependencies (`pip install 'kernel-workbench[llm]'`), imported when a provider is built.
Every call runs under a retry policy (`RetryPolicy`: backoff with jitter, Retry-After honoured); a call that
fails for good raises an `LLMCallError` whose `kind` (rate_limit, server, timeout, context_length, auth, ...)
comes with advice that fits it.
"""

from __future__ import annotations

from workbench.llm.base import (
    BaseProvider,
    LLMCallError,
    LLMCancelled,
    LLMConfigError,
    LLMError,
    LLMReply,
    LLMRequest,
    Provider,
    ReplayMissError,
)
from workbench.llm.config import LLMConfig, load_config
from workbench.llm.extract import NO_CODE_FOUND, Extraction, extract_code
from workbench.llm.failures import KINDS as FAILURE_KINDS
from workbench.llm.failures import classify
from workbench.llm.feedback import FEEDBACK_PRESETS, FeedbackOptions, feedback_options, render_history, render_result
from workbench.llm.prompts import MUTATIONS, Prompt, generation_prompt, mutation_prompt, refine_prompt
from workbench.llm.recording import CallRecord, PriceTable, Recorder, ResponseCache, TranscriptWriter, read_transcript
from workbench.llm.registry import get_provider, providers, register_provider
from workbench.llm.retry import CallControl, RetryPolicy

__all__ = [
    "BaseProvider", "Provider", "LLMRequest", "LLMReply", "LLMError", "LLMConfigError", "LLMCallError",
    "ReplayMissError", "LLMCancelled", "RetryPolicy", "CallControl", "FAILURE_KINDS", "classify", "get_provider", "providers", "register_provider", "LLMConfig", "load_config",
    "NO_CODE_FOUND", "Extraction", "extract_code", "FeedbackOptions", "FEEDBACK_PRESETS", "feedback_options",
    "render_result", "render_history", "Prompt", "MUTATIONS", "generation_prompt", "refine_prompt",
    "mutation_prompt", "CallRecord", "PriceTable", "Recorder", "ResponseCache", "TranscriptWriter",
    "read_transcript", "ReplayProvider", "OpenAIProvider", "AnthropicProvider",
]


def __getattr__(name: str):
    # Provider classes import their SDK-free modules lazily; the SDKs themselves load on construction.
    if name == "ReplayProvider":
        from workbench.llm.replay import ReplayProvider

        return ReplayProvider
    if name == "OpenAIProvider":
        from workbench.llm.openai_provider import OpenAIProvider

        return OpenAIProvider
    if name == "AnthropicProvider":
        from workbench.llm.anthropic_provider import AnthropicProvider

        return AnthropicProvider
    raise AttributeError(f"module 'workbench.llm' has no attribute {name!r}")
