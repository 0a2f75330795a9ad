"""The generate-evaluate-refine loop end to end: real SDK clients, a scripted server, real evaluation.

Kernels are scripted (honest slow/fast, broken, cheating, no code) for a 2x256 vector add so every
evaluation under the Triton interpreter takes a moment.
"""

from __future__ import annotations

import pytest
from llm_server import (
    BROKEN_SYNTAX,
    CHEAT,
    HONEST_FAST,
    HONEST_SLOW,
    NO_CODE,
    TINY_SOURCE,
    ScriptedLLMServer,
    by_seed,
    reply,
)

from workbench.errors import UnknownNameError
from workbench.llm.agent import (
    AgentSettings,
    diff,
    fork,
    lineage,
    recorded_table,
    replay,
    run_agent,
    strategies,
)
from workbench.llm.anthropic_provider import AnthropicProvider
from workbench.llm.openai_provider import OpenAIProvider
from workbench.llm.prompts import MUTATIONS
from workbench.llm.recording import Recorder, read_transcript
from workbench.tasks.task import Task

pytest.importorskip("openai")
pytest.importorskip("anthropic")

#: The refine session every lineage/replay/fork test looks at.
SESSION = [reply(CHEAT), NO_CODE, reply(BROKEN_SYNTAX), reply(HONEST_SLOW), reply(HONEST_FAST), reply(CHEAT)]


@pytest.fixture(scope="module")
def tiny() -> Task:
    return Task.from_source(TINY_SOURCE, name="tiny_add", sizes={"M": 2, "N": 256})


def _openai(server: ScriptedLLMServer, **kw) -> OpenAIProvider:
    return OpenAIProvider("scripted-coder", base_url=server.openai_base_url, api_key="k", max_retries=0,
                          recorder=kw.pop("recorder", Recorder()), **kw)


@pytest.fixture(scope="module")
def session(tiny, tmp_path_factory):
    """One refine run over SESSION, stored and transcribed."""
    from workbench.store import Store

    tmp = tmp_path_factory.mktemp("agent")
    with ScriptedLLMServer(SESSION) as server:
        store_path = str(tmp / "results.db")
        run = run_agent(tiny, _openai(server), "refine", AgentSettings(max_turns=len(SESSION)),
                        store=Store(store_path), transcript=tmp / "session.jsonl", progress=False)
        requests = list(server.requests)
    return {"run": run, "requests": requests, "store": store_path, "transcript": tmp / "session.jsonl"}


def test_refine_keeps_honest_best_rejects_cheat_and_recovers(session):
    run, requests = session["run"], session["requests"]
    statuses = [n.status for n in run.nodes]
    assert statuses == ["rejected", "compile_error", "compile_error", "ok", "ok", "rejected"], run.table()
    cheat, no_code, broken, slow, fast, cheat_again = run.nodes
    assert cheat.flags, "a rejected cheat must name the check that caught it"
    assert no_code.flags == ["no-code-found"] and no_code.outcome == "no-code-found"
    assert cheat_again.duplicate_of == "n00" and cheat_again.flags == cheat.flags
    # broken code is refined with its error: the server saw the compiler's complaint in the next prompt
    assert "SyntaxError" in requests[3].text and "SyntaxError" not in requests[2].text
    assert broken.source in requests[3].text
    # until something passes the loop refines the latest attempt; then the best
    assert [n.parent for n in run.nodes] == [None, "n00", "n01", "n02", "n03", "n04"]
    assert run.best is fast and fast.time_ms < slow.time_ms
    best = run.best_candidate
    assert best.source == HONEST_FAST and best.id == fast.candidate_id and best.parent_id == slow.candidate_id
    assert "Make it faster" in requests[5].text and HONEST_FAST.strip() in requests[5].text
    assert run.stop_reason == "max-turns" and run.usage["calls"] == 6 and run.usage["tokens_out"] > 0


def test_results_are_stored_with_provenance_and_lineage_rebuilds_from_the_store(session):
    from workbench.store import Store

    run = session["run"]
    frame = Store(session["store"]).frame(run_id=run.run_id)
    assert len(frame) == len(run.nodes)
    assert sorted(frame["status"]) == sorted(n.status for n in run.nodes)
    tree = lineage(run.run_id, store=session["store"])  # a fresh Store from the path, no in-memory run
    assert tree.edges() == [("n00", "n01"), ("n01", "n02"), ("n02", "n03"), ("n03", "n04"), ("n04", "n05")]
    assert tree.roots() == ["n00"] and tree.depth("n05") == 5
    assert tree.best.node_id == "n04"
    n03 = tree.nodes["n03"]
    assert n03.prompt_id == run.nodes[3].prompt_id and n03.feedback == AgentSettings().feedback.to_dict()
    assert n03.result is not None and n03.result.metadata["parent_id"] == run.nodes[2].candidate_id
    assert lineage(run.run_id).to_text() == run.lineage().to_text()


def test_replay_reproduces_the_table_offline(session, tiny):
    transcript = session["transcript"]
    kinds = [r["kind"] for r in read_transcript(transcript)]
    assert kinds[0] == "run" and kinds.count("call") == 6 and kinds.count("node") == 6 and kinds[-1] == "end"
    again = replay(transcript, task=tiny)
    assert again.provider == "replay" and again.usage["spent_usd"] == 0.0
    assert again.table().equals(recorded_table(transcript))
    assert again.table().equals(session["run"].table())
    assert [n.candidate_id for n in again.nodes] == [n.candidate_id for n in session["run"].nodes]


def test_fork_from_a_node_with_other_feedback(session, tiny):
    run = session["run"]
    with ScriptedLLMServer([reply(HONEST_FAST)]) as server:
        child = fork(run, "n03", _openai(server), feedback="none", max_turns=1, time_it=False, progress=False)
        sent = server.requests[0].text
    (node,) = child.nodes
    assert node.parent == "n03" and node.parent_run == run.run_id and node.status == "ok"
    assert HONEST_SLOW.strip() in sent and "Time:" not in sent and "Earlier attempts" not in sent
    tree = child.lineage()
    assert tree.roots() == [f"{run.run_id}/n03"] and tree.edges() == [(f"{run.run_id}/n03", "n00")]
    patch = diff(run.node("n03"), node)
    assert "-BLOCK_SIZE = 32" in patch and "+BLOCK_SIZE = 512" in patch and patch.count("\n-") == 1


def test_best_of_n_through_anthropic_stops_at_the_turn_budget(tiny):
    script = [reply(HONEST_FAST), reply(HONEST_SLOW), reply(HONEST_FAST), reply(CHEAT)]
    with ScriptedLLMServer(script, delay_s=0.3) as server:
        provider = AnthropicProvider("claude-scripted", base_url=server.anthropic_base_url, api_key="k",
                                     max_retries=0, recorder=Recorder())
        run = run_agent(tiny, provider, "best-of-n", n=5, max_turns=3, time_it=False, progress=False)
        bodies = [r.body for r in server.requests]
    assert len(run.nodes) == 3 and server.hits == 3 and run.stop_reason == "max-turns"
    assert all(n.parent is None for n in run.nodes) and len({n.prompt_id for n in run.nodes}) == 1
    assert len({n.sample for n in run.nodes}) == 3  # independent draws
    assert all(b["messages"] == bodies[0]["messages"] for b in bodies)
    assert [n.status for n in run.nodes] == ["ok", "ok", "ok"]
    # three calls in flight at once: which reply lands on which turn varies, the repeat is judged once
    (dup,) = [n for n in run.nodes if n.duplicate_of]
    assert run.node(dup.duplicate_of).candidate_id == dup.candidate_id and server.in_flight_max == 3


def test_token_time_and_patience_budgets_and_the_failure_budget_stop_the_loop(tiny):
    honest = reply(HONEST_FAST)
    with ScriptedLLMServer([honest] * 3) as server:
        run = run_agent(tiny, _openai(server), "refine", max_turns=5, max_tokens=10, time_it=False, progress=False)
    assert (len(run.nodes), run.stop_reason) == (1, "max-tokens")
    with ScriptedLLMServer([honest] * 3, delay_s=0.4) as server:
        run = run_agent(tiny, _openai(server), "refine", max_turns=5, max_seconds=0.2, time_it=False, progress=False)
    assert (len(run.nodes), run.stop_reason) == (1, "max-seconds")
    with ScriptedLLMServer([honest] * 4) as server:
        run = run_agent(tiny, _openai(server), "refine", max_turns=5, patience=2, time_it=False, progress=False)
    assert (len(run.nodes), run.stop_reason) == (3, "no-improvement")  # n01, n02 repeat n00: no new best
    with ScriptedLLMServer([honest]) as server:  # then HTTP 400 for every call: each step fails, the loop goes on
        run = run_agent(tiny, _openai(server), "refine", max_turns=6, time_it=False, progress=False)
    assert [n.status for n in run.nodes] == ["ok", "llm_error", "llm_error", "llm_error"]
    assert run.stop_reason == "llm-error" and "3 steps failed (max_failed_steps=3)" in run.error
    assert "no more replies" in run.error and len(run.failed) == 3


def test_cache_replays_a_greedy_rerun_without_http(tiny, tmp_path):
    cache = tmp_path / "cache"
    with ScriptedLLMServer([reply(HONEST_FAST), reply(CHEAT)]) as server:
        first = run_agent(tiny, _openai(server, recorder=Recorder(cache=cache)), "single-shot", time_it=False,
                          progress=False, temperature=0)
        second = run_agent(tiny, _openai(server, recorder=Recorder(cache=cache)), "single-shot", time_it=False,
                           progress=False, temperature=0)
        assert server.hits == 1
    assert second.nodes[0].cached and not first.nodes[0].cached
    assert second.table().equals(first.table())
    assert second.usage["spent_usd"] == 0.0 and second.usage["cached"] == 1


def test_evolutionary_population_selects_correct_parents(tiny):
    # Each sample's seed picks its reply: a generation's calls are in flight at once, in no fixed order.
    script = [reply(HONEST_SLOW), reply(CHEAT), reply(HONEST_FAST), reply(HONEST_SLOW), reply(HONEST_FAST)]
    with ScriptedLLMServer(router=by_seed(dict(enumerate(script)))) as server:
        run = run_agent(tiny, _openai(server), "evolutionary", max_turns=5, population=2, time_it=False,
                        progress=False)
        texts = [r.text for r in server.requests]
    tree = run.lineage()
    assert [n.generation for n in run.nodes] == [0, 0, 1, 1, 2]
    assert [n.role for n in run.nodes] == ["generate", "generate", "mutate", "mutate", "mutate"]
    assert tree.roots() == ["n00", "n01"] and tree.children("n01") == []  # the cheat never breeds
    assert {run.node("n02").parent, run.node("n03").parent} == {"n00"}
    assert run.node(run.node("n04").parent).ok
    assert all(any(m in t for m in MUTATIONS) for t in texts[2:])
    assert "  n02" in tree.to_text()


def test_unknown_strategy_lists_the_known_ones(tiny):
    assert {"single-shot", "refine", "best-of-n", "evolutionary"} <= set(strategies())
    with pytest.raises(UnknownNameError, match="known strategy names: best-of-n, evolutionary, refine, single-shot"):
        run_agent(tiny, None, "beam")


def test_a_gain_inside_the_timing_noise_does_not_replace_the_best():
    from workbench.llm.runs import Node, better

    def node(speedup, ci=None, status="ok"):
        return Node(run_id="r", node_id=f"n{speedup}", turn=0, parent=None, role="generate", strategy="refine",
                    candidate_id="c", status=status, speedup=speedup, speedup_ci=ci)

    best = node(1.50, (1.48, 1.52))
    assert not better(node(1.51, (1.49, 1.53)), best)  # its CI reaches below the best's speedup: noise
    assert better(node(1.60, (1.56, 1.64)), best)  # clear of it
    assert better(node(1.51), best)  # no CI (the interpreter): fitness alone decides
    assert better(node(0.90, (0.88, 0.92)), None)  # the first correct one is kept whatever its speed
    assert not better(node(2.0, (1.9, 2.1), status="incorrect"), best)  # correctness gates
