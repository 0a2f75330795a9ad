"""Runs that start from earlier runs: the lineage tree, a fork from one node, a replay of a transcript, a diff.

A fork keeps what the earlier run was: its settings (from the run's journal in the store, or the run in
memory) unless changed, and its earlier attempts as the history its prompts show. A replay reruns a
transcript with the replies it recorded, re-judging every candidate.

These start their runs through workbench.llm.execution (`run_agent`), the layer below, which never imports this
module; workbench.llm.agent re-exports both.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from workbench.candidate import Candidate
from workbench.errors import UnknownNameError
from workbench.llm.base import Provider
from workbench.llm.execution import _RUNS, open_store, provider_from_settings, run_agent, task_from_spec
from workbench.llm.feedback import feedback_options
from workbench.llm.recording import read_transcript
from workbench.llm.runs import TABLE_COLUMNS, AgentError, AgentRun, AgentSettings, Lineage, Node, frame_of, table_row
from workbench.llm.stored import nodes_from_store
from workbench.result import Result
from workbench.tasks.task import Task

# ---- lineage --------------------------------------------------------------------------------------------------

def lineage(run_id: str | AgentRun, store: Any = None) -> Lineage:
    """The tree of a run: from this process's runs, or rebuilt from a store's rows for that run id."""
    if isinstance(run_id, AgentRun):
        return run_id.lineage()
    if store is None:
        if run_id in _RUNS:
            return _RUNS[run_id].lineage()
        raise AgentError(f"run {run_id!r} is not in this session; pass store= (the Store or its path) that holds it")
    store = open_store(store)
    nodes = nodes_from_store(store, run_id)
    if not nodes:
        raise AgentError(f"store has no agent nodes for run {run_id!r}; check the run id (store.frame() lists them)")
    external = []
    for node in nodes:
        if node.parent_run:
            parent = next((n for n in nodes_from_store(store, node.parent_run) if n.node_id == node.parent), None)
            if parent is not None:
                external.append(parent)
    return Lineage.from_nodes(run_id, nodes, external)


# ---- fork -------------------------------------------------------------------------------------------------------

def _origin(source: AgentRun | str, node_id: str, store: Any, task: Task | None
            ) -> tuple[Node, AgentSettings, Task, list[Node], dict[str, Any] | None]:
    """(seed node, settings, task, the origin's nodes, recorded provider settings) of the run forked from."""
    if isinstance(source, str) and source in _RUNS:
        source = _RUNS[source]
    if isinstance(source, AgentRun):
        return (source.node(node_id), source.settings, task or source.task, list(source.nodes),
                source.provider_settings or None)
    if store is None:
        raise AgentError(f"run {source!r} is not in this session; pass store= holding it")
    from workbench.llm.journal import journal_for

    nodes = nodes_from_store(store, source)
    seed = next((n for n in nodes if n.node_id == node_id), None)
    if seed is None:
        if not nodes:
            raise AgentError(f"store has no agent nodes for run {source!r}; check the run id")
        raise UnknownNameError("node", node_id, [n.node_id for n in nodes])
    journal = journal_for(store)
    header = journal.get(source) if journal is not None else None
    if header is not None:
        settings = AgentSettings.from_dict(header["settings"])
        task = task or task_from_spec(header["task"], header["task_hash"], header["task_spec"])
        return seed, settings, task, nodes, header.get("provider")
    if task is None:  # a store written before runs had a journal: defaults, and the task by name
        from workbench.tasks.task import get_task

        task = get_task(seed.result.task if seed.result is not None else "")
    return seed, AgentSettings(), task, nodes, None


def fork(source: AgentRun | str, node_id: str, provider: Provider | None = None, strategy: str = "refine", *,
         task: Task | None = None, store: Any = None, run_id: str | None = None,
         transcript: str | Path | None = None, progress: bool = True, **changes: Any) -> AgentRun:
    """Start a new run from `node_id` of an earlier run, with the earlier run's settings and `changes` to them.

    The new run's first turn refines that node, showing the earlier run's attempts before it as history; its
    lineage shows the node as an external root. `provider` defaults to the earlier run's (rebuilt from the
    store's journal).
    """
    store = open_store(store)
    seed, settings, task, nodes, recorded_provider = _origin(source, node_id, store, task)
    if seed.result is None:
        raise AgentError(f"node {node_id} has no stored result to give feedback from; fork from a run in memory")
    if provider is None:
        if recorded_provider is None:
            raise AgentError("fork needs provider=... (the earlier run's provider settings are not recorded)")
        provider = provider_from_settings(recorded_provider)
    if "feedback" in changes:
        changes["feedback"] = feedback_options(changes["feedback"])
    history = [n for n in nodes if n.turn < seed.turn]
    return run_agent(task, provider, strategy, settings, store=store, run_id=run_id, transcript=transcript,
                     progress=progress, seed_node=seed, history=history, **changes)


def diff(a: Node | Candidate | str, b: Node | Candidate | str, *, context: int = 3) -> str:
    """Unified diff of two candidates' sources (nodes, candidates or source strings)."""

    def unpack(x: Node | Candidate | str, default: str) -> tuple[str, str]:
        if isinstance(x, Node):
            return x.source, f"{x.run_id}/{x.node_id}"
        if isinstance(x, Candidate):
            return x.source, x.name or x.id
        return x, default

    (sa, la), (sb, lb) = unpack(a, "a"), unpack(b, "b")
    return "".join(difflib.unified_diff(sa.splitlines(keepends=True), sb.splitlines(keepends=True),
                                        fromfile=la, tofile=lb, n=context))


# ---- replay ------------------------------------------------------------------------------------------------------

def _header(records: list[dict[str, Any]], run_id: str | None) -> dict[str, Any]:
    headers = [r for r in records if r.get("kind") == "run" and (run_id is None or r.get("run_id") == run_id)]
    if not headers:
        which = f"run {run_id!r}" if run_id else "any run"
        raise AgentError(f"transcript has no header for {which}; it must come from run_agent(..., transcript=...)")
    return headers[-1]


def recorded_table(transcript: str | Path, run_id: str | None = None):
    """The table of a recorded run, read from its transcript's node records (compare with AgentRun.table())."""
    records = read_transcript(transcript)
    header = _header(records, run_id)
    nodes = [Node.from_dict(r) for r in records if r.get("kind") == "node" and r.get("run_id") == header["run_id"]]
    nodes.sort(key=lambda n: n.turn)
    return frame_of([table_row(n) for n in nodes], TABLE_COLUMNS)


def replay(transcript: str | Path, *, run_id: str | None = None, task: Task | None = None, store: Any = None,
           new_run_id: str | None = None, match: str = "auto", progress: bool = False,
           transcript_out: str | Path | None = None, tags: dict[str, Any] | None = None,
           **changes: Any) -> AgentRun:
    """Rerun a recorded run from its transcript: same strategy and settings, replies from the transcript.

    Candidates are re-evaluated, so `replay(...).table()` equals `recorded_table(...)` when evaluation is
    deterministic. `changes` override settings (e.g. device="cuda" to re-judge recorded replies on a GPU).
    """
    from workbench.llm.replay import ReplayProvider

    records = read_transcript(transcript)
    header = _header(records, run_id)
    settings = AgentSettings.from_dict(header["settings"])
    provider = ReplayProvider(transcript, match=match, model=header.get("model") or None, run_id=header["run_id"])
    seed = None
    if header.get("fork"):
        fork_info = header["fork"]
        result = Result.from_dict(fork_info["result"]) if fork_info.get("result") else None
        seed = Node.from_dict(fork_info["node"], result=result)
    info = header["task"]
    run = run_agent(task or task_from_spec(info["name"], info["source_hash"], info["spec"]), provider,
                    header["strategy"], settings, store=store, run_id=new_run_id, transcript=transcript_out,
                    progress=progress, seed_node=seed, tags=tags, **changes)
    run.usage["replay_divergences"] = len(provider.divergences)
    return run
