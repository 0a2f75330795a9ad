"""The loop under a misbehaving provider and under load: failed steps recorded and skipped, calls in flight at
once and overlapped with evaluation, budgets that stop cleanly, Stop within a second. Real SDKs, the local
protocol server, real evaluation (only where a kernel must be judged)."""

from __future__ import annotations

import threading
import time

import pytest
from llm_server import (
    HONEST_FAST,
    HONEST_SLOW,
    NO_CODE,
    TINY_SOURCE,
    ScriptedLLMServer,
    by_seed,
    failure,
    hang,
    reply,
)

from workbench.llm import PriceTable, read_transcript
from workbench.llm.agent import replay, run_agent
from workbench.llm.openai_provider import OpenAIProvider
from workbench.llm.recording import Recorder
from workbench.llm.retry import RetryPolicy
from workbench.tasks.task import Task

pytest.importorskip("openai")

FAST_RETRY = RetryPolicy(max_retries=2, base_delay=0.001, max_delay=0.01)


@pytest.fixture(scope="module")
def tiny() -> Task:
    return Task.from_source(TINY_SOURCE, name="tiny_add", sizes={"M": 2, "N": 256})


def _openai(server, recorder=None, **kw):
    kw.setdefault("retry", FAST_RETRY)
    return OpenAIProvider("scripted-coder", base_url=server.openai_base_url, api_key="k",
                          recorder=recorder or Recorder(), **kw)


def test_a_turn_one_failure_is_recorded_with_its_cause_and_the_loop_goes_on(tiny, tmp_path):
    from workbench.store import Store

    script = [failure(429, "Rate limit reached")] * 3 + [reply(HONEST_FAST)]  # 3 attempts of turn 1, then ok
    store, transcript = Store(str(tmp_path / "r.db")), tmp_path / "t.jsonl"
    with ScriptedLLMServer(script) as server:
        run = run_agent(tiny, _openai(server), "refine", max_turns=2, time_it=False, progress=False, store=store,
                        transcript=transcript)
    failed, ok = run.nodes
    assert (failed.status, failed.flags, failed.error_kind, failed.attempts) == ("llm_error", ["llm-rate-limit"],
                                                                                  "rate_limit", 3)
    assert "rate-limiting" in failed.message and "max_retries=2" in failed.message
    assert ok.status == "ok" and ok.parent is None and ok.role == "generate"  # nothing to refine: asked afresh
    assert run.stop_reason == "max-turns" and run.error == "" and run.failed == [failed]
    rows = store.frame(run_id=run.run_id)
    assert list(rows["status"]) == ["llm_error", "ok"] and "Rate limit reached" in rows["message"].iloc[0]
    records = read_transcript(transcript)
    assert [r["error_kind"] for r in records if r["kind"] == "call"] == ["rate_limit"] * 3 + [""]
    assert [r["status"] for r in records if r["kind"] == "node"] == ["llm_error", "ok"]
    again = replay(transcript, task=tiny)  # offline: the recorded failure fails the same step again
    assert again.table().equals(run.table()) and again.nodes[0].error_kind == "rate_limit"


def test_an_auth_failure_stops_the_run_at_once(tiny):
    with ScriptedLLMServer([failure(401, "Incorrect API key")] * 5) as server:
        run = run_agent(tiny, _openai(server), "best-of-n", n=5, concurrency=1, time_it=False, progress=False)
    assert run.stop_reason == "llm-error" and len(run.nodes) == 1 and server.hits == 1
    assert "$OPENAI_API_KEY" in run.error and "The run stops here" in run.error


def test_a_context_length_failure_drops_the_history_from_later_prompts(tiny):
    context = failure(400, "This model's maximum context length is 4096 tokens", code="context_length_exceeded")
    script = [reply(HONEST_SLOW), reply(HONEST_SLOW.replace("add_kernel", "add_kernel2")), context, NO_CODE]
    with ScriptedLLMServer(script) as server:
        run = run_agent(tiny, _openai(server), "refine", max_turns=4, time_it=False, progress=False)
        prompts = [r.text for r in server.requests]
    assert [n.status for n in run.nodes] == ["ok", "ok", "llm_error", "compile_error"]
    assert run.nodes[2].error_kind == "context_length" and server.hits == 4  # not retried
    assert "Earlier attempts" in prompts[2] and "Earlier attempts" not in prompts[3]


def test_samples_are_in_flight_at_once_and_each_gets_its_own_seed(tiny):
    # No code in the replies: nothing to judge, so the timing is the calls' alone.
    with ScriptedLLMServer([NO_CODE] * 8, delay_s=0.5) as server:
        started = time.monotonic()
        run = run_agent(tiny, _openai(server), "best-of-n", n=8, max_turns=8, concurrency=4, max_failed_steps=None,
                        progress=False)
        elapsed = time.monotonic() - started
        seeds = sorted(r.body["seed"] for r in server.requests)
    assert len(run.nodes) == 8 and server.in_flight_max == 4
    assert elapsed < 3.0, elapsed  # 8 x 0.5 s one after another would take 4 s
    assert seeds == list(range(8)) and [n.node_id for n in run.nodes] == [f"n{i:02d}" for i in range(8)]


def test_generation_overlaps_evaluation(tiny):
    # Distinct honest kernels (one evaluation each); each request answered by its seed, 0.4 s later.
    kernels = {i: reply(HONEST_FAST.replace("add_kernel", f"add_kernel_{i}")) for i in range(4)}
    judged_at = {}
    with ScriptedLLMServer(router=by_seed(kernels), delay_s=0.4) as server:
        run = run_agent(tiny, _openai(server), "best-of-n", n=4, max_turns=4, concurrency=2, time_it=False,
                        progress=False, on_node=lambda node, loop: judged_at.setdefault(node.node_id, time.monotonic()))
        calls = [(r.at, r.answered_at) for r in server.requests]
    assert [n.status for n in run.nodes] == ["ok"] * 4
    evaluations = [(judged_at[n.node_id] - n.result.metadata["eval_seconds"], judged_at[n.node_id]) for n in run.nodes]
    overlapped = [(c, e) for c in calls for e in evaluations if c[0] < e[1] and e[0] < c[1]]
    assert overlapped, (calls, evaluations)  # a call was being answered while a kernel was being judged


def test_the_evolutionary_population_is_asked_at_once(tiny):
    with ScriptedLLMServer([NO_CODE] * 6, delay_s=0.3) as server:
        run = run_agent(tiny, _openai(server), "evolutionary", population=3, max_turns=6, max_failed_steps=None,
                        progress=False)
        arrivals = [r.at for r in server.requests]
    assert [n.generation for n in run.nodes] == [0, 0, 0, 1, 1, 1] and server.in_flight_max == 3
    assert max(arrivals[:3]) - min(arrivals[:3]) < 0.2 and min(arrivals[3:]) > max(arrivals[:3]) + 0.25


def test_a_cost_budget_stops_cleanly(tiny, tmp_path):
    transcript = tmp_path / "t.jsonl"
    prices = PriceTable({"scripted": (0.0, 1e6)})  # $1 per output token
    with ScriptedLLMServer([NO_CODE] * 12, delay_s=0.2) as server:
        run = run_agent(tiny, _openai(server, recorder=Recorder(prices=prices)), "best-of-n", n=12, max_turns=12,
                        concurrency=3, max_cost_usd=30.0, max_failed_steps=None, progress=False,
                        transcript=transcript)
    per_call = len(NO_CODE.split())  # the server counts words as tokens
    assert run.stop_reason == "max-cost" and 30.0 <= run.usage["run_spent_usd"] < 30.0 + 3 * per_call
    assert len(run.nodes) < 12
    records = read_transcript(transcript)
    calls = [r for r in records if r["kind"] == "call"]
    # every call that was made (and paid for) was finished and recorded as a node: nothing was dropped
    assert len(calls) == len(run.nodes) == len([r for r in records if r["kind"] == "node"])
    assert all(c["reply"] is not None for c in calls)


def test_a_cancel_event_stops_a_hanging_call_within_a_second(tiny, tmp_path):
    cancel = threading.Event()
    transcript = tmp_path / "t.jsonl"
    with ScriptedLLMServer([hang(60)]) as server:
        threading.Thread(target=lambda: (server.wait_for_requests(1), time.sleep(0.2), cancel.set()),
                         daemon=True).start()
        started = time.monotonic()
        run = run_agent(tiny, _openai(server), "refine", max_turns=3, cancel=cancel, progress=False,
                        transcript=transcript)
        elapsed = time.monotonic() - started
    assert run.stop_reason == "cancelled" and run.nodes == [] and elapsed < 1.5, elapsed
    (call,) = [r for r in read_transcript(transcript) if r["kind"] == "call"]
    assert call["error_kind"] == "cancelled" and call["reply"] is None
