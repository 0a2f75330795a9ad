"""Providers end to end: the real openai/anthropic SDK clients against a scripted server on 127.0.0.1."""

from __future__ import annotations

import json

import pytest
from llm_server import ScriptedLLMServer

from workbench.errors import UnknownNameError
from workbench.llm import (
    LLMCallError,
    LLMConfigError,
    PriceTable,
    ReplayMissError,
    get_provider,
    load_config,
    providers,
    read_transcript,
)
from workbench.llm.recording import Recorder
from workbench.llm.replay import ReplayProvider

pytest.importorskip("openai")
pytest.importorskip("anthropic")

_VARS = ("KWB_LLM_PROVIDER", "KWB_LLM_MODEL", "KWB_LLM_BASE_URL", "KWB_LLM_API_KEY", "KWB_LLM_TEMPERATURE",
         "KWB_LLM_MAX_TOKENS", "KWB_LLM_TIMEOUT", "KWB_LLM_CACHE", "KWB_LLM_TRANSCRIPT", "KWB_LLM_CONFIG",
         "KWB_LLM_MAX_RETRIES", "KWB_LLM_MAX_COMPLETION_TOKENS", "KWB_LLM_TOKEN_PARAM", "KWB_LLM_CACHE_POLICY",
         "OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL",
         "ANTHROPIC_MODEL")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    """No user config, keys or cache leak into these tests."""
    for var in _VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


@pytest.fixture
def server():
    with ScriptedLLMServer() as srv:
        yield srv


def test_registry_lists_providers_and_rejects_unknown():
    assert {"openai", "anthropic", "replay"} <= set(providers())
    with pytest.raises(UnknownNameError, match="known LLM providers: .*anthropic.*openai.*replay"):
        get_provider("nonesuch", model="m")


def test_openai_sdk_round_trip_records_the_call(server, tmp_path):
    server.add("first answer")
    transcript = tmp_path / "t.jsonl"
    provider = get_provider("openai", model="coder-7b", base_url=server.openai_base_url, cache_dir=None,
                            transcript=str(transcript), temperature=0.2, max_tokens=321)
    reply = provider.ask("write a kernel", system="be exact")

    assert reply.text == "first answer" and not reply.cached
    assert (reply.tokens_in, reply.tokens_out) == (5, 2)  # the server counts words: "be exact write a kernel"
    body = server.requests[0].body
    assert server.requests[0].path == "/v1/chat/completions"
    assert body["model"] == "coder-7b" and body["max_tokens"] == 321 and body["temperature"] == 0.2
    assert body["messages"] == [{"role": "system", "content": "be exact"}, {"role": "user", "content": "write a kernel"}]
    assert server.requests[0].headers["authorization"] == "Bearer no-key-needed"  # loopback: no key required

    (call,) = provider.recorder.calls
    assert call.provider == "openai" and call.model == "coder-7b" and call.reply == "first answer"
    assert call.request["messages"][0]["content"] == "write a kernel" and call.latency_s > 0
    (line,) = read_transcript(transcript)
    assert line["kind"] == "call" and line["request_hash"] == reply.request_hash and line["tokens_out"] == 2


def test_anthropic_sdk_round_trip(server):
    server.add("claude says hi")
    provider = get_provider("anthropic", model="claude-test", base_url=server.anthropic_base_url, cache_dir=None,
                            api_key="sk-test")
    reply = provider.ask("hello there", system="sys prompt")
    assert reply.text == "claude says hi" and reply.finish_reason == "end_turn"
    req = server.requests[0]
    assert req.path == "/v1/messages" and req.headers["user-agent"].startswith("Anthropic/Python")
    # SDK versions differ in the header that carries the key; it must arrive in one of them
    assert "sk-test" in (req.headers.get("x-api-key", ""), req.headers.get("authorization", "").removeprefix("Bearer "))
    assert req.body["system"] == "sys prompt"
    assert req.body["messages"] == [{"role": "user", "content": "hello there"}]
    assert (reply.tokens_in, reply.tokens_out) == (4, 3)


def test_disk_cache_answers_repeat_greedy_requests_without_http(server, tmp_path):
    server.add("one", "two")
    cache = tmp_path / "llm-cache"
    provider = get_provider("openai", model="m", base_url=server.openai_base_url, cache_dir=str(cache), temperature=0)
    first = provider.ask("same prompt")
    again = get_provider("openai", model="m", base_url=server.openai_base_url, cache_dir=str(cache),
                         temperature=0).ask("same prompt")
    assert server.hits == 1, "the second identical request must come from the disk cache"
    assert again.text == first.text == "one" and again.cached and again.request_hash == first.request_hash
    # a different sample index is a different draw: a new call
    other = provider.ask("same prompt", sample=1)
    assert server.hits == 2 and other.text == "two" and not other.cached
    totals = provider.recorder.totals()
    assert totals["calls"] == 2 and totals["cached"] == 0


def test_a_sampled_rerun_draws_anew_unless_the_cache_policy_says_always(server, tmp_path):
    server.add("draw 1", "draw 2", "draw 3", "draw 4")
    cache = str(tmp_path / "llm-cache")
    sampled = get_provider("openai", model="m", base_url=server.openai_base_url, cache_dir=cache, temperature=0.8)
    assert [sampled.ask("p").text, sampled.ask("p").text] == ["draw 1", "draw 2"]  # default policy: no cache
    assert server.requests[0].body["seed"] == 0 and server.requests[0].body["temperature"] == 0.8
    always = get_provider("openai", model="m", base_url=server.openai_base_url, cache_dir=cache, temperature=0.8,
                          cache_policy="always")
    assert [always.ask("p").text, always.ask("p").text] == ["draw 3", "draw 3"]  # same seed: the kept draw
    assert always.ask("p", sample=7).text == "draw 4" and server.requests[-1].body["seed"] == 7  # new seed: new draw
    with pytest.raises(LLMConfigError, match="cache_policy must be one of deterministic, always"):
        get_provider("openai", model="m", base_url=server.openai_base_url, cache_policy="sometimes")


def test_costs_come_from_a_configurable_price_table(server, tmp_path):
    server.add("a b c d")
    config = tmp_path / "config" / "kernel-workbench" / "llm.toml"
    config.parent.mkdir(parents=True)
    config.write_text('[openai]\nmodel = "pricey-1"\n[prices]\n"pricey" = { input = 1000.0, output = 2000.0 }\n')
    provider = get_provider("openai", base_url=server.openai_base_url, cache_dir=None)
    assert provider.model == "pricey-1"
    reply = provider.ask("one two")  # 2 tokens in, 4 out
    assert reply.cost_usd == pytest.approx((2 * 1000.0 + 4 * 2000.0) / 1e6)
    assert PriceTable().cost("gpt-4o-mini-2024", 1_000_000, 0) == pytest.approx(0.15)  # longest prefix wins
    assert PriceTable().cost("my-local-model", 10, 10) is None


def test_missing_settings_name_what_to_set(monkeypatch, tmp_path):
    with pytest.raises(LLMConfigError, match=r"needs the setting `model`.*\$KWB_LLM_MODEL") as info:
        get_provider("openai")
    assert info.value.setting == "model"
    with pytest.raises(LLMConfigError, match=r"`api_key`.*\$OPENAI_API_KEY") as info:
        get_provider("openai", model="gpt-4o")  # the default endpoint is not loopback: a key is required
    assert info.value.env == "OPENAI_API_KEY"
    with pytest.raises(LLMConfigError, match=r"ANTHROPIC_API_KEY"):
        get_provider("anthropic", model="claude-x")
    with pytest.raises(LLMConfigError, match="transcript"):
        get_provider("replay")


def test_config_precedence_file_env_argument(monkeypatch, tmp_path):
    path = tmp_path / "llm.json"
    path.write_text(json.dumps({"provider": "anthropic", "max_tokens": 100,
                                "anthropic": {"model": "from-file", "base_url": "http://127.0.0.1:9"}}))
    monkeypatch.setenv("KWB_LLM_CONFIG", str(path))
    cfg = load_config()
    assert (cfg.provider, cfg.model, cfg.max_tokens) == ("anthropic", "from-file", 100)
    monkeypatch.setenv("ANTHROPIC_MODEL", "from-env")
    monkeypatch.setenv("KWB_LLM_MAX_TOKENS", "200")
    assert (load_config().model, load_config().max_tokens) == ("from-env", 200)
    assert load_config(model="from-arg").model == "from-arg"
    monkeypatch.setenv("KWB_LLM_CACHE", "off")
    assert load_config().cache_dir is None
    monkeypatch.setenv("KWB_LLM_MAX_TOKENS", "lots")
    with pytest.raises(LLMConfigError, match="max_tokens"):
        load_config()


def test_http_errors_become_llm_call_errors_and_are_recorded(server, tmp_path):
    server.add({"status": 404, "message": "model not found"})
    provider = get_provider("openai", model="missing", base_url=server.openai_base_url, cache_dir=None)
    with pytest.raises(LLMCallError, match="openai call to model 'missing'.*model not found"):
        provider.ask("hi")
    assert provider.recorder.calls[-1].error and provider.recorder.calls[-1].reply is None


def _record(server, tmp_path, prompts: list[tuple[str, int]]):
    transcript = tmp_path / "rec.jsonl"
    provider = get_provider("openai", model="rec-model", base_url=server.openai_base_url, cache_dir=None,
                            transcript=str(transcript))
    texts = [provider.ask(p, sample=s).text for p, s in prompts]
    provider.recorder.transcript.close()
    return transcript, texts


def test_replay_matches_by_request_hash(server, tmp_path):
    server.add("r1", "r2", "r3")
    transcript, texts = _record(server, tmp_path, [("alpha", 0), ("beta", 0), ("alpha", 1)])
    replay = ReplayProvider(transcript, match="hash")
    assert replay.model == "rec-model"
    # out of recorded order, still each request gets its own reply; nothing goes over the network
    assert replay.ask("alpha", sample=1).text == "r3"
    assert replay.ask("alpha").text == "r1"
    assert replay.ask("beta").text == "r2"
    assert server.hits == 3 and replay.remaining == 0
    with pytest.raises(ReplayMissError, match="used up|more often"):
        replay.ask("alpha")
    fresh = ReplayProvider(transcript, match="hash")
    with pytest.raises(ReplayMissError, match="differ from the recorded run"):
        fresh.ask("gamma")


def test_replay_order_and_auto_modes(server, tmp_path):
    server.add("r1", "r2")
    transcript, _ = _record(server, tmp_path, [("alpha", 0), ("beta", 0)])
    ordered = ReplayProvider(transcript, match="order")
    assert [ordered.ask("x").text, ordered.ask("y").text] == ["r1", "r2"]
    auto = ReplayProvider(transcript, match="auto", recorder=Recorder())
    assert auto.ask("beta").text == "r2"  # exact hash first
    assert auto.ask("changed prompt").text == "r1"  # then the next unused reply, noted as a divergence
    assert len(auto.divergences) == 1 and auto.recorder.totals()["spent_usd"] == 0.0
    via_registry = get_provider("replay", transcript=str(transcript))
    assert via_registry.ask("alpha").text == "r1"
