"""What went wrong with an LLM call, in words that say what to do about it.

An SDK exception (openai or anthropic: both raise status errors carrying the HTTP response, and their own
timeout and connection errors) is classified into one kind, each with its own advice and its own answer to
"is another attempt worth it":

=================  =========  ==========================================================================
kind               retried    typical cause
=================  =========  ==========================================================================
rate_limit         yes        HTTP 429: too many requests or tokens per minute
quota              no         HTTP 429/402 "insufficient_quota" / billing: no attempt will pass today
server             yes        HTTP 5xx, 529 overloaded, 408/409, a reply body the SDK cannot read
timeout            yes        no reply within the `timeout` setting
connection         yes        refused or dropped connection (wrong base URL, server down)
context_length     no         the prompt plus the reply limit exceed the model's context window
auth               no         HTTP 401/403: key missing, wrong or not allowed this model
not_found          no         HTTP 404: unknown model name or wrong base URL
bad_request        no         any other 4xx: a parameter the model does not accept
=================  =========  ==========================================================================

Kinds that no retry can fix and that every later call would hit too (`auth`, `quota`, `not_found`) end a run;
the others fail one step and the loop goes on.
"""

from __future__ import annotations

import email.utils
import re
import time
from dataclasses import dataclass
from typing import Any

KINDS = ("rate_limit", "quota", "server", "timeout", "connection", "context_length", "auth", "not_found",
         "bad_request")
RETRYABLE = frozenset({"rate_limit", "server", "timeout", "connection"})
#: Failures every later call of the run would repeat: the run stops instead of spending its failure budget.
FATAL = frozenset({"auth", "quota", "not_found"})

_CONTEXT = re.compile(
    r"context[ _-]?(length|window)|maximum context|prompt is too long|input is too long|too many tokens|"
    r"reduce the length|exceeds? the (model'?s? )?(maximum|max)|context_length_exceeded|string too long",
    re.IGNORECASE)
_QUOTA = re.compile(r"insufficient_quota|exceeded your current quota|billing|credit balance|spend limit",
                    re.IGNORECASE)


@dataclass(frozen=True)
class Failure:
    """One classified failure: its kind, HTTP status (if any), the server's words and its Retry-After."""

    kind: str
    status: int | None
    detail: str
    retry_after: float | None = None

    @property
    def retryable(self) -> bool:
        return self.kind in RETRYABLE

    @property
    def fatal(self) -> bool:
        return self.kind in FATAL


def _mro_names(exc: BaseException) -> set[str]:
    return {cls.__name__ for cls in type(exc).__mro__}


def _server_message(exc: BaseException) -> str:
    """The provider's own error message (from the JSON body when there is one), else the exception text."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            code = inner.get("code") or inner.get("type") or ""
            return f"{inner['message']}" + (f" [{code}]" if code else "")
    return str(exc)


def retry_after_seconds(headers: Any, now: float | None = None) -> float | None:
    """Seconds the server asks to wait: `retry-after-ms` (OpenAI), `retry-after` as seconds or an HTTP date."""
    if headers is None:
        return None
    try:
        millis = headers.get("retry-after-ms")
        if millis is not None:
            return max(0.0, float(millis) / 1000.0)
        value = headers.get("retry-after")
    except Exception:
        return None
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


def classify(exc: BaseException) -> Failure:
    """The kind of an SDK (or network) exception."""
    names = _mro_names(exc)
    detail = _server_message(exc)
    if "APITimeoutError" in names or "TimeoutException" in names or isinstance(exc, TimeoutError):
        return Failure("timeout", None, detail)
    if "APIResponseValidationError" in names:  # a garbled reply body: the server's fault, maybe passing
        return Failure("server", getattr(exc, "status_code", None), detail)
    status = getattr(exc, "status_code", None)
    if status is None:
        if "APIConnectionError" in names or isinstance(exc, (ConnectionError, OSError)):
            return Failure("connection", None, detail)
        return Failure("bad_request", None, detail)
    response = getattr(exc, "response", None)
    retry_after = retry_after_seconds(getattr(response, "headers", None))
    if status == 429 or status == 402:
        if status == 402 or _QUOTA.search(detail):
            return Failure("quota", status, detail)
        return Failure("rate_limit", status, detail, retry_after)
    if status >= 500 or status in (408, 409):
        return Failure("server", status, detail, retry_after)
    if status in (401, 403):
        return Failure("auth", status, detail)
    if status == 413 or _CONTEXT.search(detail):
        return Failure("context_length", status, detail)
    if status == 404:
        return Failure("not_found", status, detail)
    return Failure("bad_request", status, detail)


def advice(failure: Failure, *, provider: str, endpoint: str, timeout: float | None, attempts: int,
           max_retries: int) -> str:
    """What the user can do about `failure`, naming the settings that change it."""
    kind = failure.kind
    key_var = {"openai": "$OPENAI_API_KEY", "anthropic": "$ANTHROPIC_API_KEY"}.get(provider, "$KWB_LLM_API_KEY")
    retries = (f"gave up after {attempts} attempt{'s' if attempts != 1 else ''} "
               f"(max_retries={max_retries}; raise it with max_retries=N, $KWB_LLM_MAX_RETRIES or "
               "`max_retries = N` in llm.toml)")
    if kind == "rate_limit":
        return (f"The provider is rate-limiting these requests (HTTP 429); {retries}. Lower the run's "
                "concurrency (fewer calls in flight) or check the account's rate limits.")
    if kind == "quota":
        return ("The account has no quota or credit left for this model (billing): no retry will pass. "
                "Top up or switch key/model; the run stops here.")
    if kind == "server":
        what = "overloaded (HTTP 529)" if failure.status == 529 else f"failing (HTTP {failure.status})"
        return f"The provider's server is {what}, a fault on its side; {retries}. Try again later."
    if kind == "timeout":
        return (f"No reply within {timeout:g} s: the `timeout` setting (timeout=SECONDS in get_provider, "
                "$KWB_LLM_TIMEOUT, or `timeout = SECONDS` in llm.toml). Raise it for slow models and long replies; "
                f"{retries}.")
    if kind == "connection":
        return (f"Could not reach {endpoint}: check the base URL (base_url=..., $KWB_LLM_BASE_URL) and that the "
                f"server is running; {retries}.")
    if kind == "context_length":
        return ("The prompt plus the reply limit exceed the model's context window: lower max_tokens, show less "
                "history (feedback history_depth), or use a model with a longer context. Not retried.")
    if kind == "auth":
        return (f"The key was refused (HTTP {failure.status}): set {key_var} (or api_key=... / `api_key` in "
                "llm.toml) to a key allowed to use this model. The run stops here.")
    if kind == "not_found":
        return ("HTTP 404: check the model name and the base URL (OpenAI-compatible servers usually end in /v1). "
                "The run stops here.")
    return ("The provider refused the request as malformed: check the parameters this model accepts (token_param "
            "max_tokens vs max_completion_tokens, temperature, send_seed). Not retried.")
