"""The state a strategy works on, and the round that turns asks into judged, recorded nodes.

A strategy asks for rounds: `loop.round([Ask(prompt, parent, role), ...])` returns the round's nodes once
each ask is answered and judged (or failed). Inside a round up to `settings.concurrency` candidates are in
progress at once (see workbench.llm.pipeline); every node is recorded the moment it is judged: Store row,
transcript line, progress bar, `on_node`. `loop.step(prompt, parent, role)` is a round of one.

A round ends the run by raising `Stop`: a budget (turns, tokens, cost, seconds) before an ask is sent, a stop
rule (target speedup, patience, the failure budget, a failure no retry can fix) after a node is recorded, or
Stop/Ctrl-C at any moment. Except for Stop and Ctrl-C the calls already in flight are paid for, so they are
finished and judged first ("stops cleanly").
"""

from __future__ import annotations

import bisect
import dataclasses
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from workbench.candidate import Candidate
from workbench.llm.base import BaseProvider, LLMCallError, LLMCancelled, LLMError, LLMReply, Provider
from workbench.llm.extract import NO_CODE_FOUND
from workbench.llm.feedback import FeedbackOptions, render_history, render_result
from workbench.llm.pipeline import Job, Pipeline
from workbench.llm.prompts import Prompt, generation_prompt, mutation_prompt, refine_prompt
from workbench.llm.recording import TranscriptWriter
from workbench.llm.runs import LLM_ERROR, TRUNCATED, AgentSettings, Node, better
from workbench.llm.steps import TRUNCATED_FOR_MODEL, failed_result, outcome_result, read_reply
from workbench.result import Result
from workbench.tasks.task import Task


class Stop(Exception):
    """Ends a run; `reason` becomes its stop_reason."""

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)


@dataclass
class Ask:
    """One candidate to ask for: the prompt, the node it improves (if any), its role and generation."""

    prompt: Prompt
    parent: Node | None
    role: str
    generation: int = 0
    #: Sample index (part of the request's identity, and the seed sent); None: derived from the run seed and turn.
    sample: int | None = None


class Loop:
    """What strategies see: `settings`, `task`, `nodes` (in turn order), `best`, `latest`, the prompt helpers,
    `round(asks)` and `step(prompt, parent, role)`."""

    def __init__(self, task: Task, provider: Provider, strategy: str, settings: AgentSettings, run_id: str, *,
                 store: Any = None, transcript: TranscriptWriter | None = None, progress: bool = True,
                 on_node: Callable[[Node, Loop], None] | None = None, seed_node: Node | None = None,
                 cancel: threading.Event | None = None, tags: dict[str, Any] | None = None,
                 prior: list[Node] | None = None, history: list[Node] | None = None):
        self.task, self.provider, self.strategy, self.settings = task, provider, strategy, settings
        self.run_id, self.store, self.transcript, self.on_node = run_id, store, transcript, on_node
        self.seed_node = seed_node
        self.cancel = cancel if cancel is not None else threading.Event()
        self.tags = dict(tags or {})
        #: Nodes of the run this one forked from, shown as earlier attempts in prompts.
        self.history = list(history or [])
        self.nodes: list[Node] = []
        self.best: Node | None = seed_node if seed_node is not None and seed_node.ok else None
        self.tokens = 0
        self.cost = 0.0
        self.failures = 0
        self.error = ""
        self.started = time.monotonic()
        self.shrink_history = False
        self._since_best = 0
        self._stop: Stop | None = None
        self._next_turn = 0
        self._judged: dict[str, tuple[Result, str]] = {}
        self._jobs: dict[int, Job] = {}
        self._lock = threading.Lock()
        limit = getattr(provider, "max_concurrency", None)
        self.window = max(1, min(settings.concurrency, limit or settings.concurrency))
        from workbench.dispatch.pool import total_slots
        from workbench.eval.evaluate import default_device

        # As many replies judged at once as the judges of every chosen GPU (one compiles while another is timed).
        self.pipeline = Pipeline(self._generate, self._judge, self.cancel,
                                 evaluators=min(self.window, total_slots(settings.device or default_device())))
        for node in sorted(prior or [], key=lambda n: n.turn):
            self._restore(node)
        from tqdm.auto import tqdm

        self.bar = tqdm(total=settings.max_turns, initial=len(self.nodes), desc=f"{strategy} {task.name}",
                        unit="cand", disable=not progress)

    # -- what strategies read
    @property
    def latest(self) -> Node | None:
        """The last attempt the model answered (a failed call leaves nothing to refine), else the fork's seed."""
        answered = [n for n in self.nodes if n.answered]
        return answered[-1] if answered else self.seed_node

    def focus(self) -> Node | None:
        """The node to improve next: the best correct one, else the latest attempt (to fix its error)."""
        return self.best or self.latest

    def generation(self) -> int:
        """The highest generation (round) recorded so far; -1 before the first."""
        return max((n.generation for n in self.nodes), default=-1)

    def sample_for(self, index: int) -> int:
        """The sample index of the `index`-th independent draw of this run (its seed feeds it)."""
        return self.settings.seed * 1000 + index

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

    @property
    def feedback(self) -> FeedbackOptions:
        """The feedback options prompts use (history dropped after the model's context overflowed)."""
        options = self.settings.feedback
        return options.with_(history_depth=0) if self.shrink_history else options

    def _history(self, exclude: Node) -> str:
        attempts = [(f"{n.node_id} ({n.role}{' of ' + n.parent if n.parent else ''})", n.result)
                    for n in [*self.history, *self.nodes]
                    if n is not exclude and n.result is not None and n.answered]
        return render_history(attempts, self.feedback)

    def refine_prompt(self, parent: Node) -> Prompt:
        s = self.settings
        if parent.outcome in (NO_CODE_FOUND, TRUNCATED):
            # Nothing to refine: ask again, saying what went wrong.
            why = TRUNCATED_FOR_MODEL if parent.outcome == TRUNCATED else (
                "Your previous reply was not usable.\n" + render_result(parent.result, self.feedback))
            extra = "\n\n".join(x for x in (s.instructions, why) if x)
            return generation_prompt(self.task, s.language, device=s.device, size=s.size, instructions=extra)
        feedback = render_result(parent.result, self.feedback) if parent.result is not None else ""
        return refine_prompt(self.task, parent.source, feedback, history=self._history(parent),
                             parent_label=f"{parent.node_id}, {parent.status}", parent_ok=parent.ok,
                             language=s.language, device=s.device, size=s.size, instructions=s.instructions)

    def mutation_prompt(self, parent: Node, mutation: str) -> Prompt:
        s = self.settings
        feedback = render_result(parent.result, self.feedback) if parent.result is not None else ""
        return mutation_prompt(self.task, parent.source, feedback, mutation, history=self._history(parent),
                               parent_label=f"{parent.node_id}, {parent.status}", language=s.language,
                               device=s.device, size=s.size, instructions=s.instructions)

    # -- budgets
    def _budget_reason(self, in_progress: int) -> str | None:
        s = self.settings
        if len(self.nodes) + in_progress >= s.max_turns:
            return "max-turns"
        if s.max_tokens is not None and self.tokens >= s.max_tokens:
            return "max-tokens"
        if s.max_cost_usd is not None and self.cost >= s.max_cost_usd:
            return "max-cost"
        if s.max_seconds is not None and time.monotonic() - self.started >= s.max_seconds:
            return "max-seconds"
        return None

    # -- rounds
    def step(self, prompt: Prompt, parent: Node | None, role: str, *, generation: int = 0,
             sample: int | None = None) -> Node:
        """One ask, answered and judged (a round of one). Raises `Stop` when the run must end."""
        return self.round([Ask(prompt, parent, role, generation, sample)])[0]

    def round(self, asks: list[Ask]) -> list[Node]:
        """Ask, judge and record every ask, up to `concurrency` at once; the nodes in ask order."""
        pending, active, done = deque(asks), {}, []
        while True:
            if self.cancel.is_set():
                self.abandon("cancelled")
                raise Stop("cancelled")
            while self._stop is None and pending and len(active) < self.window:
                reason = self._budget_reason(len(active))
                if reason is not None:
                    self._stop = Stop(reason)
                    break
                job = self._submit(pending.popleft())
                active[job.turn] = job
            if not active:
                if self._stop is not None:
                    raise self._stop
                return sorted(done, key=lambda n: n.turn)
            event = self.pipeline.next_event(0.1)
            if event is not None:
                node = self._handle(*event)
                if node is not None:
                    active.pop(node.turn, None)
                    done.append(node)

    def _submit(self, ask: Ask) -> Job:
        turn = self._next_turn
        self._next_turn += 1
        sample = self.sample_for(turn) if ask.sample is None else ask.sample
        ask = dataclasses.replace(ask, sample=sample)
        request = self.provider.request(list(ask.prompt.messages), system=ask.prompt.system, sample=sample,
                                        temperature=self.settings.temperature)
        job = Job(ask=ask, turn=turn, node_id=f"n{turn:02d}", request=request)
        self._jobs[turn] = job
        self.pipeline.submit(job)
        return job

    def abandon(self, reason: str) -> None:
        """Stop waiting for every job in progress; a call still in flight is recorded as `reason`."""
        jobs = [j for j in self._jobs.values() if j.state in ("generating", "evaluating")]
        for job in self.pipeline.abandon(jobs, reason):
            recorder = getattr(self.provider, "recorder", None)
            if recorder is not None and isinstance(self.provider, BaseProvider):
                recorder.record(self.provider, job.request, None, cache_key=self.provider.cache_key(job.request),
                                error=f"{reason}: the call was in flight when the run stopped", error_kind=reason)

    def close(self) -> None:
        self.pipeline.close()
        self.bar.close()

    # -- in the call's thread
    def _complete(self, request: Any, job: Job) -> LLMReply:
        if isinstance(self.provider, BaseProvider):
            return self.provider.complete(request, control=job.control)
        return self.provider.complete(request)

    def _generate(self, job: Job) -> LLMReply:
        reply = self._complete(job.request, job)
        limit = self.settings.continue_truncated
        provider = self.provider
        request = job.request
        while reply.truncated and reply.continued < limit and isinstance(provider, BaseProvider):
            request = provider.continuation(request, reply)
            try:
                more = self._complete(request, job)
            except LLMCancelled:
                raise
            except LLMError:
                break  # keep the cut reply: it is reported as truncated
            reply = dataclasses.replace(
                reply, text=provider.join_continuation(reply.text, more.text), tokens_in=reply.tokens_in + more.tokens_in,
                tokens_out=reply.tokens_out + more.tokens_out, finish_reason=more.finish_reason,
                latency_s=reply.latency_s + more.latency_s, continued=reply.continued + 1,
                cost_usd=None if reply.cost_usd is None and more.cost_usd is None else
                (reply.cost_usd or 0.0) + (more.cost_usd or 0.0),
                reasoning="\n".join(x for x in (reply.reasoning, more.reasoning) if x))
        return reply

    # -- in the evaluator thread
    def _judge(self, job: Job) -> tuple[Result, str | None]:
        candidate = job.candidate
        with self._lock:
            seen = self._judged.get(candidate.id)
        if seen is not None:
            # The model repeated itself: same verdict, no second evaluation.
            result, node_id = seen
            return dataclasses.replace(result, metadata=dict(result.metadata), flags=list(result.flags)), node_id
        import workbench as wb

        s = self.settings
        result = wb.evaluate(self.task, candidate, s.device, size=s.size, seed=s.seed, rounds=s.rounds,
                             timeout=s.timeout, time_it=s.time_it)
        with self._lock:
            self._judged.setdefault(candidate.id, (result, job.node_id))
        return result, None

    # -- in the loop's thread: events become nodes
    def _handle(self, kind: str, job: Job, payload: Any) -> Node | None:
        if job.state == "abandoned":
            return None
        if kind == "reply":
            return self._on_reply(job, payload)
        if kind == "failed":
            if isinstance(payload, (KeyboardInterrupt, SystemExit)):
                raise payload
            return self._on_failure(job, payload)
        if kind == "judge_error":
            self.abandon("cancelled")
            raise payload
        result, duplicate_of = payload
        return self._finish(job, result, duplicate_of)

    def _candidate(self, job: Job, source: str) -> Candidate:
        parent = job.ask.parent
        return Candidate(source=source, language=self.settings.language, author=self._author,
                         parent_id=parent.candidate_id if parent else None, prompt_id=job.ask.prompt.id,
                         name=f"{self.task.name}-{self.run_id[:8]}-{job.node_id}", metadata=self._meta(job))

    @property
    def _author(self) -> str:
        return getattr(self.provider, "model", "") or "llm"

    def _on_reply(self, job: Job, reply: LLMReply) -> Node | None:
        job.reply = reply
        self.tokens += reply.tokens_in + reply.tokens_out
        self.cost += 0.0 if reply.cached else (reply.cost_usd or 0.0)
        extraction = read_reply(reply)
        job.extraction = extraction
        if extraction.ok:
            job.candidate = self._candidate(job, extraction.code)
            self.pipeline.judge(job)
            return None
        job.candidate = self._candidate(job, reply.text)
        result = outcome_result(self.task, job.candidate, extraction, device=self._device, seed=self.settings.seed)
        return self._finish(job, result, None)

    def _on_failure(self, job: Job, exc: BaseException) -> Node:
        if not isinstance(exc, LLMError):
            exc = LLMCallError(f"{getattr(self.provider, 'name', 'provider')} call failed: {type(exc).__name__}: "
                               f"{exc}", getattr(self.provider, "name", None), self._author, kind="bad_request")
        self.failures += 1
        self.error = str(exc)
        if getattr(exc, "kind", "") == "context_length":
            self.shrink_history = True
        job.candidate = self._candidate(job, "")
        result = failed_result(self.task, job.candidate, exc, device=self._device, seed=self.settings.seed)
        node = self._finish(job, result, None, error=exc)
        limit = self.settings.max_failed_steps
        fatal = not isinstance(exc, LLMCallError) or exc.fatal
        if self._stop is None and (fatal or (limit is not None and self.failures >= limit)):
            self._stop = Stop("llm-error")
            if not fatal:
                self.error = f"{self.failures} steps failed (max_failed_steps={limit}); the last: {exc}"
        return node

    @property
    def _device(self) -> str:
        return self.settings.device or "cpu"

    def _meta(self, job: Job) -> dict[str, Any]:
        parent = job.ask.parent
        return {"run_id": self.run_id, "node_id": job.node_id, "turn": job.turn,
                "parent_node": parent.node_id if parent else None,
                "parent_run": parent.run_id if parent is not None and parent.run_id != self.run_id else None,
                "role": job.ask.role, "strategy": self.strategy, "prompt_id": job.ask.prompt.id,
                "template": job.ask.prompt.template, "feedback": self.feedback.to_dict(),
                "request_hash": job.request.key(), "provider": getattr(self.provider, "name", ""),
                "model": self._author, "generation": job.ask.generation, "sample": job.ask.sample}

    def _finish(self, job: Job, result: Result, duplicate_of: str | None, error: LLMError | None = None) -> Node:
        from workbench.llm.nodes import record_node

        job.state = "done"
        return record_node(self, job, result, duplicate_of, error)

    # -- bookkeeping shared with the recorder
    def add_node(self, node: Node) -> None:
        """Put `node` into the run in turn order and update best, patience and the progress bar."""
        turns = [n.turn for n in self.nodes]
        self.nodes.insert(bisect.bisect(turns, node.turn), node)
        if better(node, self.best):
            self.best = node
            self._since_best = 0
        else:
            self._since_best += 1
        s = self.settings
        best = self.best
        if self._stop is None and s.target_speedup is not None and best is not None and best.speedup is not None \
                and best.speedup >= s.target_speedup:
            self._stop = Stop("target-speedup")
        if self._stop is None and s.patience is not None and self._since_best >= s.patience:
            self._stop = Stop("no-improvement")

    def _restore(self, node: Node) -> None:
        """A node of the run's earlier session (resume): counted in every budget and in the best so far."""
        self.add_node(node)  # the stop rules see the recorded nodes: a run that met its target stays stopped
        self.tokens += node.tokens_in + node.tokens_out
        self.cost += (node.cost_usd or 0.0) if not node.cached else 0.0
        self.failures += node.status == LLM_ERROR
        self._next_turn = max(self._next_turn, node.turn + 1)
        if node.result is not None and node.candidate_id and node.status not in (LLM_ERROR, TRUNCATED):
            self._judged.setdefault(node.candidate_id, (node.result, node.node_id))
