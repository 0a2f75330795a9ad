"""Generation overlapped with evaluation: LLM calls in daemon threads, a few evaluator threads, one event queue.

The loop's thread (the caller of `run_agent`) only schedules and records: it submits jobs, waits on the event
queue in short steps, and turns each event into a node. So

* several calls are in flight at once, and a reply is judged while the next ones are still being written; as many
  replies are judged at once as the device has judges (`dispatch/pool.py`: one candidate compiles while another is
  timed, each timing with the device to itself);
* Stop (a cancel event) or Ctrl-C (KeyboardInterrupt, which Python delivers to the main thread) reaches the
  loop within a tenth of a second, whatever a call or an evaluation is doing: the loop abandons them.
  Abandoned calls are marked cancelled (`CallControl`), so a reply arriving later is neither recorded nor
  used; an abandoned evaluation finishes in its thread and is dropped.

Threads are daemons: an abandoned call hanging on a dead server never keeps the interpreter from exiting.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from workbench.llm.retry import CallControl


@dataclass(eq=False)
class Job:
    """One step in progress: what was asked, under which turn, and where it is now."""

    ask: Any
    turn: int
    node_id: str
    request: Any = None
    control: CallControl | None = None
    #: "generating" -> "evaluating" -> "done" (or "abandoned").
    state: str = "generating"
    reply: Any = None
    extraction: Any = None
    candidate: Any = None
    extra: dict[str, Any] = field(default_factory=dict)


class Pipeline:
    """Runs `generate(job)` in a thread per job and `judge(job)` in `evaluators` evaluator threads; reports on a
    queue.

    Events (kind, job, payload): ("reply", job, LLMReply), ("failed", job, exception), ("judged", job,
    (Result, duplicate_of)), ("judge_error", job, exception).
    """

    def __init__(self, generate: Callable[[Job], Any], judge: Callable[[Job], Any], cancel: threading.Event,
                 evaluators: int = 1):
        self._generate, self._judge = generate, judge
        self.cancel = cancel
        self.events: queue.Queue = queue.Queue()
        self._to_judge: queue.Queue = queue.Queue()
        self.evaluators = max(1, evaluators)
        self._judge_threads: list[threading.Thread] = []

    # -- generation
    def submit(self, job: Job) -> None:
        job.control = CallControl(parent=self.cancel)
        thread = threading.Thread(target=self._run_generation, args=(job,), daemon=True,
                                  name=f"llm-call-{job.node_id}")
        thread.start()

    def _run_generation(self, job: Job) -> None:
        from workbench.llm.base import LLMCancelled

        try:
            reply = self._generate(job)
        except LLMCancelled:
            return  # whoever cancelled records the call
        except BaseException as exc:  # noqa: BLE001 - reported to the loop's thread, which decides
            self.events.put(("failed", job, exc))
            return
        self.events.put(("reply", job, reply))

    # -- evaluation
    def judge(self, job: Job) -> None:
        job.state = "evaluating"
        if len(self._judge_threads) < self.evaluators:
            thread = threading.Thread(target=self._run_judge, daemon=True,
                                      name=f"llm-evaluator-{len(self._judge_threads)}")
            thread.start()
            self._judge_threads.append(thread)
        self._to_judge.put(job)

    def _run_judge(self) -> None:
        while True:
            job = self._to_judge.get()
            if job is None:
                return
            if job.state == "abandoned":
                continue
            try:
                outcome = self._judge(job)
            except BaseException as exc:  # noqa: BLE001 - a broken judge stops the run in the loop's thread
                self.events.put(("judge_error", job, exc))
                continue
            self.events.put(("judged", job, outcome))

    # -- the loop's side
    def next_event(self, timeout: float = 0.1) -> tuple[str, Job, Any] | None:
        try:
            return self.events.get(timeout=timeout)
        except queue.Empty:
            return None

    def abandon(self, jobs: list[Job], reason: str) -> list[Job]:
        """Stop waiting for `jobs`; returns those whose call was still in flight (now cancelled)."""
        cancelled = []
        for job in jobs:
            if job.state == "generating" and job.control is not None and job.control.cancel(reason):
                cancelled.append(job)
            job.state = "abandoned"
        return cancelled

    def close(self) -> None:
        for _ in self._judge_threads:
            self._to_judge.put(None)
