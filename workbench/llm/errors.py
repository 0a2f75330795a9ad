"""The errors of the LLM layer: a misconfigured provider, a failed or cancelled call, a replay that has no reply.

They sit below everything else in workbench.llm (they import only workbench.errors and the failure kinds) because
every layer raises them: the retry policy and the recorder reject settings, the providers and their base class
fail calls, the config loader refuses a file. Kept in workbench.llm.base they made base the one module all the
others import and that imported them back (the registry, the config); workbench.llm.base still re-exports them.
"""

from __future__ import annotations

from workbench.errors import WorkbenchError
from workbench.llm.failures import FATAL, RETRYABLE


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
    """The provider's API call failed (network, HTTP status, malformed reply).

    `kind` is one of workbench.llm.failures.KINDS (rate_limit, server, timeout, context_length, auth, ...);
    `retryable` says whether another attempt could pass, `fatal` whether every later call would fail too;
    `attempts` is how many were made, `status` the HTTP status when there was one.
    """

    def __init__(self, message: str, provider: str | None = None, model: str | None = None, *,
                 kind: str = "bad_request", status: int | None = None, retry_after: float | None = None,
                 attempts: int = 1):
        self.kind, self.status, self.retry_after, self.attempts = kind, status, retry_after, attempts
        super().__init__(message, provider, model)

    @property
    def retryable(self) -> bool:
        return self.kind in RETRYABLE

    @property
    def fatal(self) -> bool:
        return self.kind in FATAL


class LLMCancelled(LLMError):
    """The call was cancelled before its reply settled (Stop, Ctrl-C, or the run ended around it)."""


class ReplayMissError(LLMError):
    """A replayed run asked for a request the transcript does not hold."""

    def __init__(self, message: str, request_hash: str):
        self.request_hash = request_hash
        super().__init__(message, "replay")
