"""Provider failures as real providers fail, through the real openai/anthropic SDKs against a local server:
429 with Retry-After, 500/529, a hang past the timeout, 400 context length, auth, quota, a dead endpoint.
Retry delays are tiny (configuration), so every test takes a fraction of a second unless it measures a wait.
"""

from __future__ import annotations

import random
import socket
import threading
import time

import pytest
from llm_server import ScriptedLLMServer, failure, hang

from workbench.llm import LLMCallError, LLMCancelled, RetryPolicy, get_provider
from workbench.llm.failures import classify, retry_after_seconds
from workbench.llm.retry import CallControl

pytest.importorskip("openai")
pytest.importorskip("anthropic")

FAST = {"retry_base_delay": 0.001, "retry_max_delay": 0.01, "cache_dir": None}


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    for var in ("KWB_LLM_CONFIG", "KWB_LLM_MAX_RETRIES", "KWB_LLM_TIMEOUT", "KWB_LLM_PROVIDER", "KWB_LLM_MODEL",
                "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "KWB_LLM_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))


def openai(server, **kw):
    return get_provider("openai", model="m", base_url=server.openai_base_url, **{**FAST, **kw})


def anthropic(server, **kw):
    return get_provider("anthropic", model="claude-m", base_url=server.anthropic_base_url, api_key="k",
                        **{**FAST, **kw})


def test_429_waits_what_retry_after_asks_then_succeeds():
    with ScriptedLLMServer([failure(429, "slow down", retry_after_ms=300), "answer"]) as server:
        provider = openai(server)
        reply = provider.ask("hi")
        first, second = server.requests
    assert reply.text == "answer" and reply.attempts == 2
    assert second.at - first.answered_at >= 0.3  # the backoff alone would have been ~1 ms
    failed, answered = provider.recorder.calls
    assert (failed.error_kind, failed.attempt, failed.reply) == ("rate_limit", 1, None)
    assert (answered.attempt, answered.reply) == (2, "answer")


def test_retry_after_in_whole_seconds_through_anthropic():
    with ScriptedLLMServer([failure(429, "rate limited", retry_after=1), "answer"]) as server:
        reply = anthropic(server).ask("hi")
        first, second = server.requests
    assert reply.text == "answer" and second.at - first.answered_at >= 1.0


def test_500_and_529_overloaded_are_retried():
    with ScriptedLLMServer([failure(500, "boom"), failure(529, "Overloaded"), "fine"]) as server:
        provider = anthropic(server)
        reply = provider.ask("hi")
    assert reply.text == "fine" and reply.attempts == 3 and server.hits == 3
    assert [c.error_kind for c in provider.recorder.calls] == ["server", "server", ""]


def test_rate_limit_that_never_lifts_says_so_and_names_max_retries():
    with ScriptedLLMServer([failure(429, "Rate limit reached for requests")] * 3) as server:
        with pytest.raises(LLMCallError) as info:
            openai(server, max_retries=2).ask("hi")
        assert server.hits == 3
    err = info.value
    assert err.kind == "rate_limit" and err.attempts == 3 and err.status == 429 and err.retryable
    text = str(err)
    assert "rate-limiting" in text and "max_retries=2" in text and "concurrency" in text
    assert "Check the base URL" not in text and "Rate limit reached" in text


def test_a_retry_after_of_an_hour_ends_the_call_at_once():
    with ScriptedLLMServer([failure(429, "come back later", retry_after=3600), "never"]) as server:
        started = time.monotonic()
        with pytest.raises(LLMCallError, match="rate-limiting") as info:
            openai(server).ask("hi")
        assert server.hits == 1 and time.monotonic() - started < 2
    assert info.value.retry_after == 3600


def test_a_hang_past_the_timeout_names_the_timeout_setting():
    with ScriptedLLMServer([hang(30)]) as server:
        started = time.monotonic()
        with pytest.raises(LLMCallError) as info:
            openai(server, timeout=0.3, max_retries=0).ask("hi")
        elapsed = time.monotonic() - started
    assert info.value.kind == "timeout" and elapsed < 3, elapsed
    text = str(info.value)
    assert "No reply within 0.3 s" in text and "`timeout` setting" in text and "$KWB_LLM_TIMEOUT" in text


def test_a_timeout_is_retried_and_the_next_attempt_answers():
    with ScriptedLLMServer([hang(30), "second try"]) as server:
        reply = anthropic(server, timeout=0.3, max_retries=1).ask("hi")
    assert reply.text == "second try" and reply.attempts == 2


@pytest.mark.parametrize("protocol, message", [
    ("openai", "This model's maximum context length is 8192 tokens. However, you requested 9100 tokens "
               "(5004 in the messages, 4096 in the completion). Please reduce the length of the messages."),
    ("anthropic", "prompt is too long: 210000 tokens > 200000 maximum"),
])
def test_context_length_is_not_retried_and_says_what_to_shrink(protocol, message):
    with ScriptedLLMServer([failure(400, message, code="context_length_exceeded"), "unused"]) as server:
        provider = openai(server) if protocol == "openai" else anthropic(server)
        with pytest.raises(LLMCallError) as info:
            provider.ask("a very long prompt")
        assert server.hits == 1
    err = info.value
    assert err.kind == "context_length" and not err.retryable and not err.fatal
    assert "context window" in str(err) and "history_depth" in str(err) and "max_tokens" in str(err)


@pytest.mark.parametrize("entry, kind, advice", [
    (failure(401, "Incorrect API key provided"), "auth", "$OPENAI_API_KEY"),
    (failure(429, "You exceeded your current quota", code="insufficient_quota"), "quota", "no retry will pass"),
    (failure(404, "The model `m` does not exist"), "not_found", "model name and the base URL"),
    (failure(400, "Unsupported parameter: 'max_tokens'"), "bad_request", "max_completion_tokens"),
])
def test_failures_no_retry_can_fix_fail_at_once_with_their_own_advice(entry, kind, advice):
    with ScriptedLLMServer([entry, "unused"]) as server:
        with pytest.raises(LLMCallError) as info:
            openai(server).ask("hi")
        assert server.hits == 1
    assert info.value.kind == kind and advice in str(info.value)
    assert info.value.fatal == (kind in ("auth", "quota", "not_found"))


def test_a_dead_endpoint_is_a_connection_failure_retried_then_reported():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens here once the socket closes
    provider = get_provider("openai", model="m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=2, **FAST)
    with pytest.raises(LLMCallError) as info:
        provider.ask("hi")
    assert info.value.kind == "connection" and info.value.attempts == 3
    assert f"127.0.0.1:{port}" in str(info.value) and "base URL" in str(info.value)
    assert [c.error_kind for c in provider.recorder.calls] == ["connection"] * 3


def test_cancelling_ends_a_long_backoff_at_once():
    with ScriptedLLMServer([failure(429, "wait", retry_after=30), "never"]) as server:
        provider = openai(server)
        control = CallControl()
        threading.Timer(0.3, control.cancel, args=("cancelled",)).start()
        started = time.monotonic()
        with pytest.raises(LLMCancelled):
            provider.complete(provider.request([{"role": "user", "content": "hi"}]), control=control)
        assert time.monotonic() - started < 1.0 and server.hits == 1


def test_backoff_doubles_with_jitter_up_to_its_cap():
    policy = RetryPolicy(max_retries=6, base_delay=1.0, max_delay=8.0, max_retry_after=60)
    rng = random.Random(0)
    for retry, cap in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (6, 8.0)]:
        draws = [policy.delay(retry, rng=rng) for _ in range(200)]
        assert cap / 2 <= min(draws) and max(draws) <= cap and max(draws) - min(draws) > cap / 4
    assert 10.0 <= policy.delay(1, retry_after=10.0, rng=rng) <= 11.0  # Retry-After is a minimum
    assert policy.delay(1, retry_after=61.0) is None
    with pytest.raises(Exception, match="max_retries must be 0 or more"):
        RetryPolicy(max_retries=-1)


def test_retry_after_headers_in_every_form():
    assert retry_after_seconds({"retry-after-ms": "250"}) == 0.25
    assert retry_after_seconds({"retry-after": "7"}) == 7.0
    assert retry_after_seconds({"retry-after": "Wed, 21 Oct 2015 07:28:10 GMT"}, now=1445412480.0) == 10.0
    assert retry_after_seconds({"retry-after": "soon"}) is None and retry_after_seconds(None) is None
    assert classify(TimeoutError("read timed out")).kind == "timeout"
    assert classify(ConnectionRefusedError("refused")).kind == "connection"


def test_max_retries_is_settable_from_the_environment_and_the_config_file(monkeypatch, tmp_path):
    from workbench.llm import load_config

    config = tmp_path / "llm.toml"
    config.write_text("[openai]\nmax_retries = 7\nretry_base_delay = 0.5\n")
    monkeypatch.setenv("KWB_LLM_CONFIG", str(config))
    cfg = load_config("openai")
    assert (cfg.max_retries, cfg.retry_base_delay) == (7, 0.5)
    monkeypatch.setenv("KWB_LLM_MAX_RETRIES", "1")
    assert load_config("openai").max_retries == 1
    provider = get_provider("openai", model="m", base_url="http://127.0.0.1:9/v1")
    assert provider.retry.max_retries == 1 and provider.client.max_retries == 0  # the SDK makes one attempt
    monkeypatch.setenv("KWB_LLM_MAX_RETRIES", "two")
    with pytest.raises(Exception, match="`max_retries` from \\$KWB_LLM_MAX_RETRIES must be a whole number"):
        load_config("openai")
