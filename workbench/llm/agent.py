"""Prompt a kernel: generate -> evaluate -> feedback -> refine, under a search strategy and a budget.

    run = run_agent(task, provider, strategy="refine", settings=AgentSettings(max_turns=6), store=store)
    run.best.speedup; run.table(); lineage(run.run_id).to_text(); replay("transcript.jsonl")
    resume(run.run_id, store=store)            # an interrupted run goes on from its last recorded step

Every candidate an LLM writes is evaluated by `workbench.evaluate` (isolated worker, correctness and
anti-cheating checks, timing) and stored with its run id, parent, prompt id, the feedback options it was
produced under and its LLM call's numbers, so a study can ask which feedback channel or strategy helps and
what it cost. Steps that produce nothing to judge are results too: `compile_error` flagged `no-code-found`
(no code in the reply), `truncated` (cut at the token limit), `llm_error` (every retry of the call failed;
the loop goes on until `max_failed_steps`).

The loop itself is workbench.llm.loop (rounds, budgets) over workbench.llm.pipeline (calls and evaluations
overlapped); strategies are in workbench.llm.strategies. This module is the public face of the layers below it, and
holds no code of its own: a run's start and end (run_agent, resume) are workbench.llm.execution, runs that start
from earlier runs (fork, replay, lineage, diff) workbench.llm.reruns, which starts its runs through execution.
"""

from __future__ import annotations

from workbench.llm.execution import AgentInterrupted, list_runs, provider_from_settings, resume, run_agent
from workbench.llm.loop import Ask, Loop
from workbench.llm.reruns import diff, fork, lineage, recorded_table, replay
from workbench.llm.runs import TABLE_COLUMNS, AgentError, AgentRun, AgentSettings, Lineage, Node
from workbench.llm.strategies import register_strategy, strategies

__all__ = [
    "AgentSettings", "AgentRun", "AgentError", "AgentInterrupted", "Node", "Lineage", "Loop", "Ask",
    "TABLE_COLUMNS", "run_agent", "resume", "list_runs", "strategies", "register_strategy", "lineage", "fork",
    "diff", "replay", "recorded_table", "provider_from_settings",
]
