"""One agent run from its start to its end: `run_agent` starts one, `resume` goes on with an interrupted one.

What a run is made of lives elsewhere (workbench.llm.loop for rounds and budgets, workbench.llm.strategies for the
search, workbench.llm.runs for its records); this module sets a run up (transcript header, journal entry, the
provider's recorder), drives the strategy and records how it ended, Ctrl-C included.

It is the layer below workbench.llm.reruns, whose fork and replay start their runs through `run_agent`, and below
workbench.llm.agent, the public face that re-exports both. While this lived in agent.py, agent imported reruns to
re-export it and reruns imported agent's run_agent back. The runs of this process (`_RUNS`) are kept here because a run is put there when it ends, and reruns'
`lineage(run_id)` reads them.
"""

from __future__ import annotations

import datetime as _dt
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from workbench.errors import UnknownNameError
from workbench.llm.base import Provider
from workbench.llm.config import LLMConfig
from workbench.llm.journal import AgentJournal, journal_for
from workbench.llm.loop import Loop, Stop
from workbench.llm.recording import TranscriptWriter
from workbench.llm.registry import get_provider
from workbench.llm.runs import AgentError, AgentRun, AgentSettings, Node
from workbench.llm.stored import nodes_from_store
from workbench.llm.strategies import get_strategy
from workbench.tasks.task import Task, get_task, tasks

#: Runs of this process by id, so `lineage(run_id)` works without a store right after a run.
_RUNS: dict[str, AgentRun] = {}


def open_store(store: Any) -> Any:
    if store is None or not isinstance(store, (str, Path)):
        return store
    from workbench.store import Store

    return Store(str(store))


def _fork_record(node: Node) -> dict[str, Any]:
    return {"node": node.to_dict(), "result": node.result.to_dict() if node.result is not None else None}


def task_from_spec(name: str, source_hash: str, spec: dict[str, Any]) -> Task:
    """The registered task when it is the same one (it keeps flops/bytes formulas a spec cannot carry)."""
    if name in tasks():
        registered = get_task(name)
        if registered.source_hash == source_hash:
            return registered
    return Task.from_spec(spec)


class AgentInterrupted(KeyboardInterrupt):
    """Ctrl-C during a run. Everything judged so far is recorded; `run` holds it, `resume(run.run_id)` goes on."""

    def __init__(self, run: AgentRun):
        self.run = run
        super().__init__(f"run {run.run_id} interrupted after {len(run.nodes)} candidates")


def _settings(settings: AgentSettings | None, overrides: dict[str, Any]) -> AgentSettings:
    settings = settings or AgentSettings()
    known = set(AgentSettings.__dataclass_fields__)
    for name in overrides:
        if name not in known:
            raise UnknownNameError("agent setting", name, sorted(known))
    return settings.replace(**overrides) if overrides else settings


def run_agent(task: Task | str, provider: Provider, strategy: str = "refine", settings: AgentSettings | None = None,
              *, store: Any = None, run_id: str | None = None, transcript: str | Path | None = None,
              progress: bool = True, on_node: Callable[[Node, Loop], None] | None = None,
              cancel: threading.Event | None = None, seed_node: Node | None = None,
              tags: dict[str, Any] | None = None, history: list[Node] | None = None, **overrides: Any) -> AgentRun:
    """Run `strategy` for `task` with `provider` until the budget or a stop rule ends it.

    `settings` (or keyword overrides of its fields) set the budget, concurrency, feedback channels and
    evaluation protocol. `store` (a Store or a path) receives every result and, when it is a file, the run's
    settings (its journal), which `resume` and `fork` read; `transcript` (a JSONL path, appended to) receives
    the run header, every LLM call and every node, and is what `replay` reads. `tags` are extra columns for
    every stored row (a study's point id, say). `cancel` (a threading.Event) stops the run within a tenth of
    a second. Ctrl-C raises `AgentInterrupted` after recording what was done.
    """
    task = get_task(task) if isinstance(task, str) else task
    get_strategy(strategy)
    return _execute(task, provider, strategy, _settings(settings, overrides), store=open_store(store),
                    run_id=run_id or f"agent-{uuid.uuid4().hex[:10]}", transcript=transcript, progress=progress,
                    on_node=on_node, cancel=cancel, seed_node=seed_node, tags=tags, history=history, prior=None)


def _status(stop_reason: str) -> str:
    return {"cancelled": "cancelled", "interrupted": "interrupted", "error": "failed"}.get(stop_reason, "finished")


def _provider_settings(provider: Provider) -> dict[str, Any]:
    describe = getattr(provider, "settings", None)
    if callable(describe):
        return describe()
    return {"provider": getattr(provider, "name", type(provider).__name__), "model": getattr(provider, "model", "")}


def _execute(task: Task, provider: Provider, strategy: str, settings: AgentSettings, *, store: Any, run_id: str,
             transcript: str | Path | None, progress: bool, on_node: Callable[[Node, Loop], None] | None,
             cancel: threading.Event | None, seed_node: Node | None, tags: dict[str, Any] | None,
             history: list[Node] | None, prior: list[Node] | None) -> AgentRun:
    recorder = getattr(provider, "recorder", None)
    # A transcript configured on the provider (KWB_LLM_TRANSCRIPT) gets the run records too, and stays open.
    own_writer = transcript is not None
    writer = TranscriptWriter(transcript) if own_writer else getattr(recorder, "transcript", None)
    saved = (recorder.transcript, recorder.run_id) if recorder is not None else None
    calls_before = len(recorder.calls) if recorder is not None else 0
    if recorder is not None:
        recorder.run_id = run_id
        if writer is not None:
            recorder.transcript = writer
    run = AgentRun(run_id=run_id, task=task, strategy=strategy, settings=settings,
                   provider=getattr(provider, "name", type(provider).__name__), model=getattr(provider, "model", ""),
                   transcript=str(transcript) if transcript is not None else None, forked_from=seed_node,
                   resumed=len(prior or []), provider_settings=_provider_settings(provider))
    fork_info = _fork_record(seed_node) if seed_node is not None else None
    if writer is not None:
        writer.write({"kind": "run", "run_id": run_id, "strategy": strategy, "settings": settings.to_dict(),
                      "task": {"name": task.name, "source_hash": task.source_hash, "spec": task.to_spec()},
                      "provider": run.provider, "model": run.model, "provider_settings": _provider_settings(provider),
                      "fork": fork_info, "resumed": bool(prior),
                      "started": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")})
    journal = journal_for(store)
    if journal is not None:
        where = str(Path(writer.path).resolve()) if isinstance(writer, TranscriptWriter) else None
        journal.start(run_id, task=task, strategy=strategy, settings=settings.to_dict(),
                      provider=_provider_settings(provider), tags=tags, fork=fork_info, transcript=where)
    loop = Loop(task, provider, strategy, settings, run_id, store=store, transcript=writer, progress=progress,
                on_node=on_node, seed_node=seed_node, cancel=cancel, tags=tags, prior=prior, history=history)
    interrupted: BaseException | None = None
    try:
        get_strategy(strategy)(loop)
        run.stop_reason = "done"
    except Stop as stop:
        run.stop_reason = stop.reason
    except KeyboardInterrupt as exc:
        loop.abandon("interrupted")
        run.stop_reason, interrupted = "interrupted", exc
    except BaseException as exc:
        loop.abandon("cancelled")
        run.stop_reason, run.error, interrupted = "error", f"{type(exc).__name__}: {exc}", exc
    finally:
        loop.close()
        run.nodes = list(loop.nodes)
        if run.stop_reason == "llm-error":
            run.error = loop.error
        run.seconds = time.monotonic() - loop.started
        run.usage = _usage(recorder.calls[calls_before:] if recorder is not None else [], loop)
        if recorder is not None:
            recorder.transcript, recorder.run_id = saved
        if writer is not None:
            best = run.best
            writer.write({"kind": "end", "run_id": run_id, "stop_reason": run.stop_reason, "error": run.error,
                          "usage": run.usage, "seconds": run.seconds, "best": best.node_id if best else None})
            if own_writer:
                writer.close()
        if journal is not None:
            journal.finish(run_id, status=_status(run.stop_reason), stop_reason=run.stop_reason, error=run.error,
                           usage=run.usage, nodes=len(run.nodes))
        _RUNS[run_id] = run
    if isinstance(interrupted, KeyboardInterrupt):
        raise AgentInterrupted(run) from None
    if interrupted is not None:
        raise interrupted
    return run


def _usage(calls: list[Any], loop: Loop) -> dict[str, Any]:
    """This session's calls (answered, cached, failed attempts), tokens and money; the run's totals too."""
    answered = [c for c in calls if c.reply is not None]
    costs = [c.cost_usd for c in answered if c.cost_usd is not None]
    return {"calls": len(answered), "cached": sum(c.cached for c in answered),
            "errors": sum(bool(c.error) for c in calls), "tokens_in": sum(c.tokens_in for c in answered),
            "tokens_out": sum(c.tokens_out for c in answered), "cost_usd": sum(costs) if costs else None,
            "spent_usd": sum(c.spent_usd for c in answered), "failed_steps": loop.failures,
            "run_tokens": loop.tokens, "run_spent_usd": loop.cost}


# ---- resume -------------------------------------------------------------------------------------------------

def provider_from_settings(settings: dict[str, Any]) -> Provider:
    """Rebuild a provider from `BaseProvider.settings()` (a run's journal): the key comes from the environment."""

    settings = dict(settings)
    name = settings.pop("provider", None)
    known = set(LLMConfig.__dataclass_fields__) - {"provider", "source", "api_key"}
    return get_provider(name, **{k: v for k, v in settings.items() if k in known and v is not None})


def _journal_of(store: Any) -> AgentJournal:
    journal = journal_for(store)
    if journal is None:
        raise AgentError("resume needs the run's store as a file (a path or Store('results.db')); an in-memory "
                         "store keeps no run settings")
    return journal


def resume(run_id: str, *, store: Any, provider: Provider | None = None, task: Task | None = None,
           transcript: str | Path | None = None, progress: bool = True,
           on_node: Callable[[Node, Loop], None] | None = None, cancel: threading.Event | None = None,
           **changes: Any) -> AgentRun:
    """Continue run `run_id` from its last recorded step, with the settings it was started with.

    Its nodes come back from `store` (budgets count them: a run of max_turns=6 interrupted after 4 asks for
    2 more); `changes` override settings (max_turns=10 extends a finished run). The provider is rebuilt from
    the recorded provider settings (its key from the environment) unless one is given; the transcript the
    run wrote to is appended to unless another is given.
    """
    store = open_store(store)
    header = _journal_of(store).get(run_id)
    if header is None:
        known = [r["run_id"] for r in _journal_of(store).runs()]
        raise AgentError(f"no agent run {run_id!r} in {getattr(store, 'path', store)}; runs there: "
                         f"{', '.join(known) or '(none)'}")
    settings = _settings(AgentSettings.from_dict(header["settings"]), changes)
    task = task or task_from_spec(header["task"], header["task_hash"], header["task_spec"])
    provider = provider or provider_from_settings(header["provider"] or {})
    prior = nodes_from_store(store, run_id)
    seed, history = _fork_origin(header.get("fork"), store)
    return _execute(task, provider, header["strategy"], settings, store=store, run_id=run_id,
                    transcript=transcript or header.get("transcript"), progress=progress, on_node=on_node,
                    cancel=cancel, seed_node=seed, tags=header.get("tags"), history=history, prior=prior)


def _fork_origin(info: dict[str, Any] | None, store: Any) -> tuple[Node | None, list[Node]]:
    """The node a forked run started from, and the origin's earlier nodes (its prompts' history)."""
    if not info:
        return None, []
    from workbench.result import Result

    result = Result.from_dict(info["result"]) if info.get("result") else None
    seed = Node.from_dict(info["node"], result=result)
    origin = [n for n in nodes_from_store(store, seed.run_id) if n.turn < seed.turn] if store is not None else []
    return seed, origin


def list_runs(store: Any) -> list[dict[str, Any]]:
    """The agent runs recorded in a store's journal, oldest first (what `kwb agent list` prints)."""
    return _journal_of(open_store(store)).runs()
