"""Prompt a kernel: generate -> evaluate -> feedback -> refine, under a search strategy and a budget.

    run = run_agent(task, provider, strategy="refine", settings=AgentSettings(max_turns=6), store=store)
    run.best.speedup; run.table(); lineage(run.run_id).to_text(); replay("transcript.jsonl")

Every candidate an LLM writes is evaluated by `workbench.eval.evaluate` (isolated worker, correctness and
anti-cheating checks, timing) and stored with its run id, parent, prompt id and the feedback options it
was produced under, so a study can ask which feedback channel or strategy helps. A reply without code is
a result too: status `compile_error`, flag `no-code-found`.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import difflib
import random
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from workbench.candidate import Candidate
from workbench.errors import UnknownNameError
from workbench.llm.base import LLMError, Provider
from workbench.llm.extract import NO_CODE_FOUND, extract_code
from workbench.llm.feedback import FeedbackOptions, feedback_options, render_history, render_result
from workbench.llm.prompts import MUTATIONS, Prompt, generation_prompt, mutation_prompt, refine_prompt
from workbench.llm.recording import TranscriptWriter, read_transcript
from workbench.llm.runs import (
    TABLE_COLUMNS,
    AgentError,
    AgentRun,
    AgentSettings,
    Lineage,
    Node,
    better,
    frame_of,
    nodes_from_store,
    table_row,
)
from workbench.result import Result
from workbench.tasks.task import Task

__all__ = [
    "AgentSettings", "AgentRun", "AgentError", "Node", "Lineage", "Loop", "TABLE_COLUMNS", "run_agent", "strategies",
    "register_strategy", "lineage", "fork", "diff", "replay", "recorded_table",
]


# ---- the loop --------------------------------------------------------------------------------------------

class _Stop(Exception):
    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)


class Loop:
    """The state a strategy works on: call `step(prompt, parent, role)` until it raises (budget/stop rule).

    Strategies see `settings`, `task`, `nodes`, `best`, `latest`, `rng` and the prompt helpers.
    """

    def __init__(self, task: Task, provider: Provider, strategy: str, settings: AgentSettings, run_id: str, *,
                 store: Any = None, transcript: TranscriptWriter | None = None, progress: bool = True,
                 on_node: Callable[[Node, Loop], None] | None = None, seed_node: Node | None = None,
                 cancel: threading.Event | None = None, tags: dict[str, Any] | None = None):
        self.task, self.provider, self.strategy, self.settings = task, provider, strategy, settings
        self.run_id, self.store, self.transcript, self.on_node = run_id, store, transcript, on_node
        self.seed_node = seed_node
        self.cancel = cancel
        self.tags = dict(tags or {})
        self.nodes: list[Node] = []
        self.best: Node | None = seed_node if seed_node is not None and seed_node.ok else None
        self.rng = random.Random(settings.seed)
        self.tokens = 0
        self.started = time.monotonic()
        self._since_best = 0
        self._by_candidate: dict[str, Node] = {}
        from tqdm.auto import tqdm

        self.bar = tqdm(total=settings.max_turns, desc=f"{strategy} {task.name}", unit="turn", disable=not progress)

    # -- what strategies read
    @property
    def latest(self) -> Node | None:
        return self.nodes[-1] if self.nodes else self.seed_node

    def focus(self) -> Node | None:
        """The node to improve next: the best correct one, else the latest attempt (to fix its error)."""
        return self.best or self.latest

    # -- prompts
    def first_prompt(self) -> tuple[Prompt, Node | None, str]:
        """(prompt, parent, role) for a fresh draw: generate from the task, or refine a fork's seed node."""
        if self.seed_node is not None:
            return self.refine_prompt(self.seed_node), self.seed_node, "refine"
        s = self.settings
        prompt = generation_prompt(self.task, s.language, device=s.device, size=s.size, instructions=s.instructions)
        if s.initial_prompt:
            prompt = dataclasses.replace(prompt, messages=({"role": "user", "content": s.initial_prompt},),
                                         template=f"{s.language}/custom")
        return prompt, None, "generate"

    def _history(self, exclude: Node) -> str:
        attempts = [(f"{n.node_id} ({n.role}{' of ' + n.parent if n.parent else ''})", n.result)
                    for n in self.nodes if n is not exclude and n.result is not None]
        return render_history(attempts, self.settings.feedback)

    def refine_prompt(self, parent: Node) -> Prompt:
        s = self.settings
        feedback = render_result(parent.result, s.feedback) if parent.result is not None else ""
        if parent.outcome == NO_CODE_FOUND:
            # Nothing to refine: ask again, saying what went wrong.
            extra = "\n\n".join(x for x in (s.instructions, "Your previous reply was not usable.\n" + feedback) if x)
            return generation_prompt(self.task, s.language, device=s.device, size=s.size, instructions=extra)
        return refine_prompt(self.task, parent.source, feedback, history=self._history(parent),
                             parent_label=f"{parent.node_id}, {parent.status}", parent_ok=parent.ok,
                             language=s.language, device=s.device, size=s.size, instructions=s.instructions)

    def mutation_prompt(self, parent: Node, mutation: str) -> Prompt:
        s = self.settings
        feedback = render_result(parent.result, s.feedback) if parent.result is not None else ""
        return mutation_prompt(self.task, parent.source, feedback, mutation, history=self._history(parent),
                               parent_label=f"{parent.node_id}, {parent.status}", language=s.language,
                               device=s.device, size=s.size, instructions=s.instructions)

    # -- one turn
    def _check_budget(self) -> None:
        s = self.settings
        if self.cancel is not None and self.cancel.is_set():
            raise _Stop("cancelled")
        if len(self.nodes) >= s.max_turns:
            raise _Stop("max-turns")
        if s.max_tokens is not None and self.tokens >= s.max_tokens:
            raise _Stop("max-tokens")
        if s.max_seconds is not None and time.monotonic() - self.started >= s.max_seconds:
            raise _Stop("max-seconds")

    def step(self, prompt: Prompt, parent: Node | None, role: str, *, generation: int = 0,
             sample: int | None = None) -> Node:
        """Ask, extract, evaluate, record. Raises `_Stop` when the budget or a stop rule ends the run."""
        self._check_budget()
        s = self.settings
        turn = len(self.nodes)
        sample = s.seed * 1000 + turn if sample is None else sample
        request = self.provider.request(list(prompt.messages), system=prompt.system, sample=sample,
                                        temperature=s.temperature)
        reply = self.provider.complete(request)
        self.tokens += reply.tokens_in + reply.tokens_out
        extraction = extract_code(reply.text)
        node_id = f"n{turn:02d}"
        parent_id = parent.node_id if parent is not None else None
        parent_run = parent.run_id if parent is not None and parent.run_id != self.run_id else None
        author = getattr(self.provider, "model", "") or "llm"
        meta = {"run_id": self.run_id, "node_id": node_id, "turn": turn, "parent_node": parent_id,
                "parent_run": parent_run, "role": role, "strategy": self.strategy, "prompt_id": prompt.id,
                "template": prompt.template, "feedback": s.feedback.to_dict(), "request_hash": reply.request_hash,
                "provider": getattr(self.provider, "name", ""), "model": author, "outcome": extraction.outcome}
        if extraction.ok:
            candidate = Candidate(source=extraction.code, language=s.language, author=author,
                                  parent_id=parent.candidate_id if parent else None, prompt_id=prompt.id,
                                  name=f"{self.task.name}-{self.run_id[:8]}-{node_id}", metadata=meta)
            result, duplicate_of = self._evaluate(candidate)
        else:
            candidate = Candidate(source=reply.text, language=s.language, author=author,
                                  parent_id=parent.candidate_id if parent else None, prompt_id=prompt.id,
                                  name=f"{self.task.name}-{self.run_id[:8]}-{node_id}", metadata=meta)
            result, duplicate_of = self._no_code_result(candidate, extraction.note), None
        feedback_text = render_result(parent.result, s.feedback) if parent is not None and parent.result else ""
        result.metadata.update(meta, parent_id=candidate.parent_id, author=author, feedback_text=feedback_text,
                               duplicate_of=duplicate_of, **self.tags)
        node = Node(
            run_id=self.run_id, node_id=node_id, turn=turn, parent=parent_id, parent_run=parent_run, role=role,
            strategy=self.strategy, candidate_id=candidate.id, status=result.status, flags=list(result.flags),
            message=(result.message or "").strip().splitlines()[0][:300] if result.message else "",
            outcome=extraction.outcome, generation=generation, sample=sample, prompt_id=prompt.id,
            template=prompt.template, author=author, time_ms=result.time_ms, speedup=result.speedup,
            speedup_ci=result.speedup_ci, speedup_verdict=result.speedup_verdict,
            sol_fraction=result.sol_fraction, bound=result.bound, max_abs_err=result.max_abs_err,
            tokens_in=reply.tokens_in, tokens_out=reply.tokens_out, cost_usd=reply.cost_usd, cached=reply.cached,
            request_hash=reply.request_hash, feedback=s.feedback.to_dict(), feedback_text=feedback_text,
            duplicate_of=duplicate_of, source=candidate.source, result=result,
        )
        self._record(node, candidate, result)
        return node

    def _evaluate(self, candidate: Candidate) -> tuple[Result, str | None]:
        seen = self._by_candidate.get(candidate.id)
        if seen is not None and seen.result is not None:
            # The model repeated itself: same verdict, no second evaluation.
            copy = dataclasses.replace(seen.result, metadata=dict(seen.result.metadata), flags=list(seen.result.flags))
            return copy, seen.node_id
        from workbench.eval.evaluate import evaluate

        s = self.settings
        result = evaluate(self.task, candidate, s.device, size=s.size, seed=s.seed, rounds=s.rounds,
                          timeout=s.timeout, time_it=s.time_it)
        return result, None

    def _no_code_result(self, candidate: Candidate, note: str) -> Result:
        return Result(
            task=self.task.name, candidate_id=candidate.id, candidate_name=candidate.name or "", language=candidate.language or "",
            status="compile_error", flags=[NO_CODE_FOUND],
            message=f"[{NO_CODE_FOUND}] {note}. Reply with one ```python block that defines class ModelNew.",
            device=self.settings.device or "cpu", source=candidate.source, task_hash=self.task.source_hash,
            source_hash=candidate.id, seed=self.settings.seed,
        )

    def _record(self, node: Node, candidate: Candidate, result: Result) -> None:
        self.nodes.append(node)
        self._by_candidate.setdefault(candidate.id, node)
        if self.store is not None:
            self.store.add(result, run_id=self.run_id, node_id=node.node_id, parent_node=node.parent,
                           parent_id=candidate.parent_id, prompt_id=node.prompt_id, turn=node.turn, role=node.role,
                           strategy=self.strategy, author=node.author,
                           feedback_label=FeedbackOptions.from_dict(node.feedback).label, **self.tags)
        if self.transcript is not None:
            self.transcript.write({"kind": "node", **node.to_dict(), "result": result.to_dict()})
        improved = better(node, self.best)
        if improved:
            self.best = node
            self._since_best = 0
        else:
            self._since_best += 1
        self.bar.update(1)
        best = self.best
        self.bar.set_postfix_str(f"best {best.node_id} {best.speedup or 0:.2f}x" if best else f"last {node.status}")
        if self.on_node is not None:
            self.on_node(node, self)
        s = self.settings
        if s.target_speedup is not None and best is not None and best.speedup is not None \
                and best.speedup >= s.target_speedup:
            raise _Stop("target-speedup")
        if s.patience is not None and self._since_best >= s.patience:
            raise _Stop("no-improvement")


# ---- strategies ------------------------------------------------------------------------------------------

Strategy = Callable[[Loop], None]
_STRATEGIES: dict[str, Strategy] = {}


def register_strategy(name: str, strategy: Strategy) -> None:
    """A strategy is a function of the Loop that calls `loop.step` until the loop stops it."""
    _STRATEGIES[name] = strategy


def strategies() -> list[str]:
    return sorted(_STRATEGIES)


def _single_shot(loop: Loop) -> None:
    prompt, parent, role = loop.first_prompt()
    loop.step(prompt, parent, role)


def _best_of_n(loop: Loop) -> None:
    # Independent draws of one prompt: the sample index keeps them apart in caches and transcripts.
    prompt, parent, role = loop.first_prompt()
    for i in range(loop.settings.n or loop.settings.max_turns):
        loop.step(prompt, parent, role, sample=loop.settings.seed * 1000 + i)


def _refine(loop: Loop) -> None:
    prompt, parent, role = loop.first_prompt()
    loop.step(prompt, parent, role)
    while True:
        parent = loop.focus()
        loop.step(loop.refine_prompt(parent), parent, "refine")


def _evolutionary(loop: Loop) -> None:
    """Population search: draw a population, then each generation mutates tournament-selected correct parents.

    Selection is by fitness (speedup, or 1/time under the interpreter) among correct nodes only; until
    something is correct, children repair the latest failure instead.
    """
    size = max(loop.settings.population, 1)
    prompt, parent, role = loop.first_prompt()
    for _ in range(size):
        loop.step(prompt, parent, role)
    generation = 1
    while True:
        pool = sorted((n for n in loop.nodes if n.ok), key=lambda n: n.fitness, reverse=True)[:size]
        if loop.seed_node is not None and loop.seed_node.ok and not pool:
            pool = [loop.seed_node]
        for _ in range(size):
            if pool:
                a, b = loop.rng.choice(pool), loop.rng.choice(pool)
                parent = a if (a.fitness or 0) >= (b.fitness or 0) else b
                mutation = loop.rng.choice(MUTATIONS)
                loop.step(loop.mutation_prompt(parent, mutation), parent, "mutate", generation=generation)
            else:
                parent = loop.latest
                loop.step(loop.refine_prompt(parent), parent, "repair", generation=generation)
        generation += 1


register_strategy("single-shot", _single_shot)
register_strategy("best-of-n", _best_of_n)
register_strategy("refine", _refine)
register_strategy("evolutionary", _evolutionary)


# ---- running -------------------------------------------------------------------------------------------------

#: Runs of this process by id, so `lineage(run_id)` works without a store right after a run.
_RUNS: dict[str, AgentRun] = {}


def _open_store(store: Any) -> Any:
    if store is None or not isinstance(store, (str, Path)):
        return store
    from workbench.store import Store

    return Store(str(store))


def run_agent(task: Task | str, provider: Provider, strategy: str = "refine", settings: AgentSettings | None = None,
              *, store: Any = None, run_id: str | None = None, transcript: str | Path | None = None,
              progress: bool = True, on_node: Callable[[Node, Loop], None] | None = None,
              cancel: threading.Event | None = None, seed_node: Node | None = None,
              tags: dict[str, Any] | None = None, **overrides: Any) -> AgentRun:
    """Run `strategy` for `task` with `provider` until the budget or a stop rule ends it.

    `settings` (or keyword overrides of its fields) set the budget, feedback channels and evaluation
    protocol. `store` (a Store or a path) receives every result; `transcript` (a JSONL path, appended to)
    receives the run header, every LLM call and every node, and is what `replay` reads. `tags` are extra
    columns for every stored row (a study's point id, say).
    """
    from workbench.tasks.task import get_task

    task = get_task(task) if isinstance(task, str) else task
    if strategy not in _STRATEGIES:
        raise UnknownNameError("strategy name", strategy, list(_STRATEGIES))
    settings = (settings or AgentSettings()).replace(**overrides) if overrides else (settings or AgentSettings())
    run_id = run_id or f"agent-{uuid.uuid4().hex[:10]}"
    store = _open_store(store)
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
                   transcript=str(transcript) if transcript is not None else None, forked_from=seed_node)
    if writer is not None:
        writer.write({"kind": "run", "run_id": run_id, "strategy": strategy, "settings": settings.to_dict(),
                      "task": {"name": task.name, "source_hash": task.source_hash, "spec": task.to_spec()},
                      "provider": run.provider, "model": run.model,
                      "fork": _fork_record(seed_node) if seed_node is not None else None,
                      "started": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")})
    loop = Loop(task, provider, strategy, settings, run_id, store=store, transcript=writer, progress=progress,
                on_node=on_node, seed_node=seed_node, cancel=cancel, tags=tags)
    run.nodes = loop.nodes
    try:
        _STRATEGIES[strategy](loop)
        run.stop_reason = "done"
    except _Stop as stop:
        run.stop_reason = stop.reason
    except LLMError as exc:
        # The model could not be reached: keep what was done, say why it ended.
        run.stop_reason, run.error = "llm-error", str(exc)
    finally:
        loop.bar.close()
        run.seconds = time.monotonic() - loop.started
        if recorder is not None:
            calls = recorder.calls[calls_before:]
            costs = [c.cost_usd for c in calls if c.cost_usd is not None]
            run.usage = {"calls": len(calls), "cached": sum(c.cached for c in calls),
                         "tokens_in": sum(c.tokens_in for c in calls), "tokens_out": sum(c.tokens_out for c in calls),
                         "cost_usd": sum(costs) if costs else None, "spent_usd": sum(c.spent_usd for c in calls)}
            recorder.transcript, recorder.run_id = saved
        if writer is not None:
            best = run.best
            writer.write({"kind": "end", "run_id": run_id, "stop_reason": run.stop_reason, "error": run.error,
                          "usage": run.usage, "seconds": run.seconds, "best": best.node_id if best else None})
            if own_writer:
                writer.close()
        _RUNS[run_id] = run
    return run


def _fork_record(node: Node) -> dict[str, Any]:
    return {"node": node.to_dict(), "result": node.result.to_dict() if node.result is not None else None}

# ---- lineage --------------------------------------------------------------------------------------------------

def lineage(run_id: str | AgentRun, store: Any = None) -> Lineage:
    """The tree of a run: from this process's runs, or rebuilt from a store's rows for that run id."""
    if isinstance(run_id, AgentRun):
        return run_id.lineage()
    if store is None:
        if run_id in _RUNS:
            return _RUNS[run_id].lineage()
        raise AgentError(f"run {run_id!r} is not in this session; pass store= (the Store or its path) that holds it")
    nodes = nodes_from_store(_open_store(store), run_id)
    if not nodes:
        raise AgentError(f"store has no agent nodes for run {run_id!r}; check the run id (store.frame() lists them)")
    external = []
    for node in nodes:
        if node.parent_run:
            try:
                parent = next(n for n in nodes_from_store(_open_store(store), node.parent_run)
                              if n.node_id == node.parent)
            except StopIteration:
                continue
            external.append(parent)
    return Lineage.from_nodes(run_id, nodes, external)


# ---- fork, diff, replay ---------------------------------------------------------------------------------------

def fork(source: AgentRun | str, node_id: str, provider: Provider, strategy: str = "refine", *,
         task: Task | None = None, store: Any = None, run_id: str | None = None,
         transcript: str | Path | None = None, progress: bool = True, **changes: Any) -> AgentRun:
    """Start a new run from `node_id` of an earlier run, with changed settings (e.g. other feedback).

    The new run's first turn refines that node; its lineage shows the node as an external root.
    """
    if isinstance(source, AgentRun):
        origin, seed, settings = source, source.node(node_id), source.settings
        task = task or source.task
    elif source in _RUNS:
        origin = _RUNS[source]
        seed, settings, task = origin.node(node_id), origin.settings, task or origin.task
    else:
        if store is None:
            raise AgentError(f"run {source!r} is not in this session; pass store= holding it (and task=)")
        tree = lineage(source, _open_store(store))
        if node_id not in tree.nodes:
            raise UnknownNameError("node", node_id, list(tree.nodes))
        seed = tree.nodes[node_id]
        settings = AgentSettings()
        if task is None:
            from workbench.tasks.task import get_task

            task = get_task(seed.result.task if seed.result is not None else "")
    if seed.result is None:
        raise AgentError(f"node {node_id} has no stored result to give feedback from; fork from a run in memory")
    if "feedback" in changes:
        changes["feedback"] = feedback_options(changes["feedback"])
    return run_agent(task, provider, strategy, settings.replace(**changes), store=store, run_id=run_id,
                     transcript=transcript, progress=progress, seed_node=seed)


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


def _header(records: list[dict[str, Any]], run_id: str | None) -> dict[str, Any]:
    headers = [r for r in records if r.get("kind") == "run" and (run_id is None or r.get("run_id") == run_id)]
    if not headers:
        which = f"run {run_id!r}" if run_id else "any run"
        raise AgentError(f"transcript has no header for {which}; it must come from run_agent(..., transcript=...)")
    return headers[-1]


def _task_from_header(header: dict[str, Any]) -> Task:
    from workbench.tasks.task import get_task, tasks

    info = header["task"]
    if info["name"] in tasks():
        registered = get_task(info["name"])
        if registered.source_hash == info["source_hash"]:
            return registered  # keeps flops/bytes formulas that a spec cannot carry
    return Task.from_spec(info["spec"])


def recorded_table(transcript: str | Path, run_id: str | None = None):
    """The table of a recorded run, read from its transcript's node records (compare with AgentRun.table())."""
    records = read_transcript(transcript)
    header = _header(records, run_id)
    nodes = [Node.from_dict(r) for r in records if r.get("kind") == "node" and r.get("run_id") == header["run_id"]]
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
    if changes:
        settings = settings.replace(**changes)
    provider = ReplayProvider(transcript, match=match, model=header.get("model") or None, run_id=header["run_id"])
    seed = None
    if header.get("fork"):
        fork_info = header["fork"]
        result = Result.from_dict(fork_info["result"]) if fork_info.get("result") else None
        seed = Node.from_dict(fork_info["node"], result=result)
    run = run_agent(task or _task_from_header(header), provider, header["strategy"], settings, store=store,
                    run_id=new_run_id, transcript=transcript_out, progress=progress, seed_node=seed, tags=tags)
    run.usage["replay_divergences"] = len(provider.divergences)
    return run
