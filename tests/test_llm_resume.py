"""Resume and fork from the store: an interrupted run goes on from its last recorded step with the settings it
had, a fork keeps the earlier run's settings and history, and stores written before the LLM columns existed
still open. Real SQLite files, the real loop, the local protocol server."""

from __future__ import annotations

import sqlite3
import threading

import pytest
from llm_server import BROKEN_SYNTAX, CHEAT, HONEST_FAST, HONEST_SLOW, NO_CODE, TINY_SOURCE, ScriptedLLMServer, reply

from workbench.llm import read_transcript
from workbench.llm.agent import AgentError, AgentSettings, fork, lineage, list_runs, resume, run_agent
from workbench.llm.openai_provider import OpenAIProvider
from workbench.llm.recording import Recorder
from workbench.llm.reruns import _RUNS
from workbench.store import COLUMNS, LLM_COLUMNS, Store

pytest.importorskip("openai")


@pytest.fixture(scope="module")
def tiny():
    from workbench.tasks.task import Task

    return Task.from_source(TINY_SOURCE, name="tiny_add", sizes={"M": 2, "N": 256})


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    for var in ("KWB_LLM_CONFIG", "KWB_LLM_MODEL", "KWB_LLM_BASE_URL", "OPENAI_BASE_URL", "OPENAI_API_KEY",
                "KWB_LLM_MAX_RETRIES", "KWB_LLM_TIMEOUT", "KWB_LLM_CACHE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def _openai(server):
    return OpenAIProvider("scripted-coder", base_url=server.openai_base_url, api_key="k", max_retries=0,
                          recorder=Recorder())


SETTINGS = AgentSettings(max_turns=4, feedback="errors", instructions="Keep it short.", time_it=False, seed=5)


def test_an_interrupted_run_resumes_from_its_last_step_with_its_settings(tiny, tmp_path):
    path, transcript = str(tmp_path / "r.db"), tmp_path / "t.jsonl"
    cancel = threading.Event()

    def stop_after_two(node, loop):
        if len(loop.nodes) == 2:
            cancel.set()

    with ScriptedLLMServer([reply(BROKEN_SYNTAX), reply(HONEST_SLOW), reply(HONEST_FAST), reply(CHEAT)]) as server:
        first = run_agent(tiny, _openai(server), "refine", SETTINGS, store=path, transcript=transcript,
                          on_node=stop_after_two, cancel=cancel, progress=False)
        assert first.stop_reason == "cancelled" and [n.status for n in first.nodes] == ["compile_error", "ok"]
        (header,) = list_runs(path)
        assert header["status"] == "cancelled" and header["nodes"] == 2
        assert AgentSettings.from_dict(header["settings"]) == SETTINGS
        assert header["provider"]["base_url"] == server.openai_base_url and "api_key" not in header["provider"]
        # a fresh process would do exactly this: the provider comes back from the journal
        again = resume(first.run_id, store=path, progress=False)
        prompts = [r.text for r in server.requests]
    assert again.run_id == first.run_id and again.settings == SETTINGS and again.resumed == 2
    assert [n.node_id for n in again.nodes] == ["n00", "n01", "n02", "n03"] and again.stop_reason == "max-turns"
    assert again.node("n02").parent == "n01" and again.node("n02").seed == 5002  # refines the recorded best
    assert HONEST_SLOW.strip() in prompts[2] and "Keep it short." in prompts[2] and server.hits == 4
    assert [n.status for n in again.nodes] == ["compile_error", "ok", "ok", "rejected"]
    stored = Store(path).frame(run_id=first.run_id)
    assert list(stored["status"]) == ["compile_error", "ok", "ok", "rejected"]
    # untimed, the two correct kernels tie, so the first stays the best and is refined again
    assert lineage(first.run_id, store=path).edges() == [("n00", "n01"), ("n01", "n02"), ("n01", "n03")]
    headers = [r for r in read_transcript(transcript) if r["kind"] == "run"]
    assert [h["resumed"] for h in headers] == [False, True]
    assert list_runs(path)[0]["status"] == "finished"


def test_resume_counts_the_recorded_budget_and_can_extend_it(tiny, tmp_path):
    path = str(tmp_path / "r.db")
    with ScriptedLLMServer([NO_CODE] * 4) as server:
        run = run_agent(tiny, _openai(server), "best-of-n", max_turns=2, max_failed_steps=None, store=path,
                        progress=False)
        again = resume(run.run_id, store=path, provider=_openai(server), progress=False)
        assert again.stop_reason == "done" and server.hits == 2  # both samples were recorded: nothing to ask
        more = resume(run.run_id, store=path, provider=_openai(server), progress=False, max_turns=4, n=4)
    assert [n.sample for n in more.nodes] == [0, 1, 2, 3] and server.hits == 4
    with pytest.raises(AgentError, match="no agent run 'nope'.*runs there: " + run.run_id):
        resume("nope", store=path)
    with pytest.raises(AgentError, match="in-memory store keeps no run settings"):
        resume(run.run_id, store=Store(":memory:"))


def test_a_fork_from_the_store_keeps_settings_and_history(tiny, tmp_path):
    path = str(tmp_path / "r.db")
    settings = AgentSettings(max_turns=3, instructions="Keep it short.", time_it=False, feedback="full")
    with ScriptedLLMServer([reply(BROKEN_SYNTAX), reply(HONEST_SLOW), reply(CHEAT), reply(HONEST_FAST)]) as server:
        origin = run_agent(tiny, _openai(server), "refine", settings, store=path, progress=False)
        # from the store alone (as a fresh process sees it), no provider given: the recorded one asks
        _RUNS.pop(origin.run_id)
        child = fork(origin.run_id, "n01", store=path, max_turns=1, progress=False)
        sent = server.requests[-1].text
    (node,) = child.nodes
    assert child.settings == settings.replace(max_turns=1) and node.parent == "n01" and node.status == "ok"
    assert "Keep it short." in sent and HONEST_SLOW.strip() in sent
    assert "Earlier attempts" in sent and "n00 (generate): compile_error" in sent  # the origin's history
    assert lineage(child.run_id, store=path).roots() == [f"{origin.run_id}/n01"]


def test_a_store_written_before_the_llm_columns_opens_and_upgrades(tmp_path):
    path = tmp_path / "old.db"
    old = [(name, kind) for name, kind in COLUMNS if name not in LLM_COLUMNS]
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE kwb_schema (version INTEGER NOT NULL)")
    db.execute("INSERT INTO kwb_schema VALUES (2)")
    db.execute("CREATE TABLE results (id INTEGER PRIMARY KEY AUTOINCREMENT, "
               + ", ".join(f"{n} {k}" for n, k in old) + ", result_json TEXT NOT NULL)")
    db.execute("CREATE TABLE sources (source_hash TEXT PRIMARY KEY, language TEXT, source TEXT NOT NULL)")
    db.execute("INSERT INTO results (task, status, metadata, result_json) VALUES (?, ?, ?, ?)",
               ("vector_add", "ok", '{"node_id": "n00", "turn": 0}',
                '{"task": "vector_add", "candidate_id": "c", "candidate_name": "c", "language": "triton", '
                '"status": "ok"}'))
    db.commit()
    db.close()
    store = Store(str(path))
    assert store.schema_version == 3
    frame = store.frame()
    assert len(frame) == 1 and frame["llm_tokens_in"].isna().all() and str(frame["llm_seed"].dtype) == "Int64"
    assert store.get(1).status == "ok"
