"""Replies cut at the token limit, reasoning fields, continuation and token parameter names, end to end:
real SDK clients, the local protocol server, the real loop and (for the one kernel that is whole) evaluation.
"""

from __future__ import annotations

import pytest
from llm_server import CHEAT, HONEST_FAST, TINY_SOURCE, ScriptedLLMServer, reply, truncated

import workbench as wb
from workbench.llm import PriceTable, extract_code, get_provider, read_transcript
from workbench.llm.agent import run_agent
from workbench.llm.anthropic_provider import AnthropicProvider
from workbench.llm.openai_provider import OpenAIProvider
from workbench.llm.recording import Recorder
from workbench.tasks.task import Task

pytest.importorskip("openai")
pytest.importorskip("anthropic")


@pytest.fixture(scope="module")
def tiny() -> Task:
    return Task.from_source(TINY_SOURCE, name="tiny_add", sizes={"M": 2, "N": 256})


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    for var in ("KWB_LLM_CONFIG", "KWB_LLM_MAX_TOKENS", "KWB_LLM_TOKEN_PARAM", "KWB_LLM_MAX_COMPLETION_TOKENS",
                "KWB_LLM_MODEL", "OPENAI_MODEL", "OPENAI_BASE_URL", "KWB_LLM_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))


def _fenced(code: str) -> str:
    return f"Here it is:\n\n```python\n{code}"


#: Cut between two lines: what is left parses, defines ModelNew, and would be judged a cheat (its forward ends
#: before the kernel launch) -- the verdict the issue saw sent back to the model.
CUT_BETWEEN_LINES = _fenced(HONEST_FAST[: HONEST_FAST.index("        out = torch.empty_like(a)")])
#: Cut in the middle of a line: would be a compile error.
CUT_MID_LINE = _fenced(HONEST_FAST[: HONEST_FAST.index("empty_like(a)") + 6])


def _openai(server, **kw):
    return OpenAIProvider("scripted-coder", base_url=server.openai_base_url, api_key="k", max_retries=0,
                          recorder=kw.pop("recorder", Recorder()), **kw)


@pytest.mark.parametrize("cut", [CUT_BETWEEN_LINES, CUT_MID_LINE], ids=["between-lines", "mid-line"])
def test_a_truncated_reply_is_never_judged_and_the_next_prompt_says_why(tiny, tmp_path, cut):
    from workbench.store import Store

    with ScriptedLLMServer([truncated(cut), reply(HONEST_FAST)]) as server:
        run = run_agent(tiny, _openai(server), "refine", max_turns=2, time_it=False, progress=False,
                        store=Store(str(tmp_path / "r.db")), transcript=tmp_path / "t.jsonl")
        second_prompt = server.requests[1].text
    cut_node, fixed = run.nodes
    assert (cut_node.status, cut_node.flags, cut_node.outcome) == ("truncated", ["truncated"], "truncated")
    assert cut_node.finish_reason == "length" and cut_node.result.timing is None and cut_node.result.log == ""
    assert "max_tokens=N" in cut_node.message and "continue_truncated=1" in cut_node.message
    # the model is told its reply was cut, never that it cheated or failed to compile
    assert "cut off at the output-token limit" in second_prompt
    for verdict in ("Verdict:", "decoy", "wrong-type", "compile_error", "SyntaxError", "no-custom-kernel"):
        assert verdict not in second_prompt
    assert fixed.status == "ok" and fixed.parent == "n00"
    rows = Store(str(tmp_path / "r.db")).frame(run_id=run.run_id)
    assert list(rows["status"]) == ["truncated", "ok"] and list(rows["llm_finish_reason"]) == ["length", "stop"]
    # judged, the cut code would have been a failure blamed on the model: that is what must not happen
    judged = wb.evaluate(tiny, wb.Candidate(source=extract_code(cut).code, language="triton"), "cpu", time_it=False)
    assert judged.status in ("rejected", "compile_error", "runtime_error", "incorrect"), judged.summary()


def test_a_cut_reply_is_not_cached(tiny, tmp_path):
    with ScriptedLLMServer([truncated(CUT_MID_LINE), truncated(CUT_MID_LINE)]) as server:
        provider = get_provider("openai", model="m", base_url=server.openai_base_url, cache_dir=str(tmp_path),
                                temperature=0)
        first, again = provider.ask("p"), provider.ask("p")
    assert first.truncated and not again.cached and server.hits == 2


def test_reasoning_only_replies_say_the_budget_went_to_reasoning_and_keep_the_reasoning(tiny, tmp_path):
    thinking = "Let me think about the block size. " * 40
    script = [truncated("", reasoning=thinking), {"text": "", "reasoning": thinking}]
    transcript = tmp_path / "t.jsonl"
    with ScriptedLLMServer(script) as server:
        run = run_agent(tiny, _openai(server), "refine", max_turns=2, max_failed_steps=5, time_it=False,
                        progress=False, transcript=transcript)
    budget_gone, no_answer = run.nodes
    assert budget_gone.status == "truncated" and "spent" in budget_gone.message and "on reasoning" in budget_gone.message
    assert no_answer.status == "compile_error" and no_answer.flags == ["no-code-found"]
    assert "only reasoning" in no_answer.message
    assert budget_gone.reasoning == thinking and no_answer.reasoning == thinking
    calls = [r for r in read_transcript(transcript) if r["kind"] == "call"]
    assert [c["reasoning"] for c in calls] == [thinking, thinking]
    assert [c["finish_reason"] for c in calls] == ["length", "stop"]


def test_anthropic_max_tokens_stop_reason_and_thinking_blocks(tiny, tmp_path):
    transcript = tmp_path / "t.jsonl"
    with ScriptedLLMServer([truncated(CUT_BETWEEN_LINES, reasoning="plan: one program per block")]) as server:
        provider = AnthropicProvider("claude-scripted", base_url=server.anthropic_base_url, api_key="k",
                                     max_retries=0, recorder=Recorder())
        run = run_agent(tiny, provider, "single-shot", time_it=False, progress=False, transcript=transcript)
    (node,) = run.nodes
    assert node.status == "truncated" and node.finish_reason == "max_tokens"
    call = next(r for r in read_transcript(transcript) if r["kind"] == "call")
    assert call["reasoning"] == "plan: one program per block" and call["finish_reason"] == "max_tokens"


def test_continuation_joins_the_cut_reply_and_the_rest_openai(tiny):
    cut = HONEST_FAST.index("        out = torch.empty_like(a)")
    rest = HONEST_FAST[cut:] + "```\n"
    with ScriptedLLMServer([truncated(_fenced(HONEST_FAST[:cut])), rest]) as server:
        run = run_agent(tiny, _openai(server), "single-shot", continue_truncated=1, time_it=False, progress=False)
        follow_up = server.requests[1].body["messages"]
    (node,) = run.nodes
    assert node.status == "ok" and node.continued == 1 and node.source.strip() == HONEST_FAST.strip()
    assert follow_up[-2] == {"role": "assistant", "content": _fenced(HONEST_FAST[:cut])}
    assert follow_up[-1]["role"] == "user" and "Continue exactly where it stopped" in follow_up[-1]["content"]
    assert node.tokens_out == run.usage["tokens_out"] and run.usage["calls"] == 2


def test_continuation_by_prefill_anthropic(tiny):
    cut = HONEST_FAST.index("        out = torch.empty_like(a)")
    head = _fenced(HONEST_FAST[:cut])
    with ScriptedLLMServer([truncated(head), "\n" + HONEST_FAST[cut:] + "```\n"]) as server:
        provider = AnthropicProvider("claude-scripted", base_url=server.anthropic_base_url, api_key="k",
                                     max_retries=0, recorder=Recorder())
        run = run_agent(tiny, provider, "single-shot", continue_truncated=2, time_it=False, progress=False)
        follow_up = server.requests[1].body["messages"]
    assert follow_up[-1] == {"role": "assistant", "content": head.rstrip()}  # no trailing whitespace: the API refuses it
    assert run.nodes[0].status == "ok" and run.nodes[0].continued == 1


def test_continuation_that_stays_cut_is_reported_truncated(tiny):
    with ScriptedLLMServer([truncated(CUT_MID_LINE), truncated("more"), truncated("still more")]) as server:
        run = run_agent(tiny, _openai(server), "single-shot", continue_truncated=2, time_it=False, progress=False)
    (node,) = run.nodes
    assert node.status == "truncated" and node.continued == 2 and server.hits == 3
    assert "even after 2 continuation(s)" in node.message


def test_token_parameter_names_by_model_family_argument_and_config_file(tmp_path, monkeypatch):
    with ScriptedLLMServer(["a"] * 6) as server:
        def sent(**kw):
            get_provider("openai", base_url=server.openai_base_url, cache_dir=None, **kw).ask("hi")
            body = server.requests[-1].body
            return {k: body[k] for k in ("max_tokens", "max_completion_tokens") if k in body}

        assert sent(model="gpt-4o", max_tokens=100) == {"max_tokens": 100}
        assert sent(model="o3-mini", max_tokens=100) == {"max_completion_tokens": 100}  # a reasoning model
        assert sent(model="gpt-4o", max_completion_tokens=777) == {"max_completion_tokens": 777}
        assert sent(model="gpt-4o", token_param="max_completion_tokens", max_tokens=5) == {"max_completion_tokens": 5}
        config = tmp_path / "llm.toml"
        config.write_text('[openai]\nmax_completion_tokens = 500\n[token_params]\n"my-reasoner" = "max_completion_tokens"\n')
        monkeypatch.setenv("KWB_LLM_CONFIG", str(config))
        assert sent(model="plain") == {"max_completion_tokens": 500}
        config.write_text('[token_params]\n"my-reasoner" = "max_completion_tokens"\n')
        assert sent(model="my-reasoner-7b", max_tokens=64) == {"max_completion_tokens": 64}


def test_the_seed_goes_to_providers_that_take_one():
    with ScriptedLLMServer(["a", "b", "c"]) as server:
        get_provider("openai", model="m", base_url=server.openai_base_url, cache_dir=None).ask("hi", sample=42)
        get_provider("openai", model="m", base_url=server.openai_base_url, cache_dir=None,
                     send_seed=False).ask("hi", sample=42)
        get_provider("anthropic", model="c", base_url=server.anthropic_base_url, api_key="k",
                     cache_dir=None).ask("hi", sample=42)
        seeds = [r.body.get("seed") for r in server.requests]
    assert seeds == [42, None, None]


def test_store_rows_carry_the_calls_numbers(tiny, tmp_path):
    from workbench.store import Store

    with ScriptedLLMServer([reply(CHEAT)]) as server:
        provider = _openai(server, recorder=Recorder(prices=PriceTable({"scripted": (1.0, 2.0)})))
        run = run_agent(tiny, provider, "single-shot", temperature=0.7, seed=3, time_it=False, progress=False,
                        store=Store(str(tmp_path / "r.db")))
    (row,) = Store(str(tmp_path / "r.db")).frame(run_id=run.run_id).to_dict("records")
    node = run.nodes[0]
    assert row["llm_model"] == "scripted-coder" and row["llm_finish_reason"] == "stop"
    assert (row["llm_tokens_in"], row["llm_tokens_out"]) == (node.tokens_in, node.tokens_out) and node.tokens_out > 0
    assert row["llm_cost_usd"] == pytest.approx((node.tokens_in * 1.0 + node.tokens_out * 2.0) / 1e6)
    assert row["llm_temperature"] == 0.7 and row["llm_seed"] == 3000 and row["llm_latency_s"] > 0
