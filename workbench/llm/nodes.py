"""A finished step becomes a Node and is recorded everywhere at once: Store row, transcript line, progress.

Every step is recorded, failed ones too: a call that failed for good is a row with status `llm_error` and its
cause, a reply cut at the token limit a row with status `truncated`. The LLM call's numbers (model, tokens,
cost, latency, finish reason, temperature, seed) go into the row's `llm_*` columns, so a study can sum what a
configuration cost, and `resume`/`fork` rebuild the run from the rows.
"""

from __future__ import annotations

from typing import Any

from workbench.llm.base import LLMError
from workbench.llm.feedback import FeedbackOptions, render_result
from workbench.llm.runs import LLM_ERROR, Node
from workbench.result import Result


def _llm_columns(loop: Any, job: Any) -> dict[str, Any]:
    reply, request = job.reply, job.request
    sent_seed = getattr(loop.provider, "accepts_seed", False) and getattr(loop.provider, "send_seed", True)
    return {
        "llm_model": (reply.model if reply is not None and reply.model else None) or getattr(loop.provider, "model", None),
        "llm_tokens_in": reply.tokens_in if reply is not None else 0,
        "llm_tokens_out": reply.tokens_out if reply is not None else 0,
        "llm_cost_usd": reply.cost_usd if reply is not None else None,
        "llm_latency_s": round(reply.latency_s, 4) if reply is not None else None,
        "llm_finish_reason": reply.finish_reason if reply is not None else None,
        "llm_temperature": request.temperature,
        "llm_seed": request.sample if sent_seed else None,
    }


def _message(result: Result, failed: bool) -> str:
    text = (result.message or "").strip()
    if failed:
        return text[:1200]  # the cause and its advice, whole
    return text.splitlines()[0][:300] if text else ""


def record_node(loop: Any, job: Any, result: Result, duplicate_of: str | None, error: LLMError | None) -> Node:
    """Build the node of a finished job, add it to the loop and record it; returns it."""
    ask, reply, candidate = job.ask, job.reply, job.candidate
    parent = ask.parent
    feedback = loop.feedback
    feedback_text = render_result(parent.result, feedback) if parent is not None and parent.result else ""
    outcome = job.extraction.outcome if job.extraction is not None else "llm-error"
    llm = _llm_columns(loop, job)
    extra = {"outcome": outcome, "cached": bool(reply.cached) if reply else False,
             "attempts": reply.attempts if reply else getattr(error, "attempts", 1),
             "continued": reply.continued if reply else 0, "error_kind": getattr(error, "kind", "") if error else ""}
    result.metadata.update(loop._meta(job), parent_id=candidate.parent_id, author=loop._author,
                           feedback_text=feedback_text, duplicate_of=duplicate_of, **extra, **llm, **loop.tags)
    node = Node(
        run_id=loop.run_id, node_id=job.node_id, turn=job.turn, parent=parent.node_id if parent else None,
        parent_run=result.metadata["parent_run"], role=ask.role, strategy=loop.strategy,
        candidate_id=result.candidate_id, status=result.status, flags=list(result.flags),
        message=_message(result, result.status == LLM_ERROR), outcome=outcome, generation=ask.generation,
        sample=ask.sample, prompt_id=ask.prompt.id, template=ask.prompt.template, author=loop._author,
        time_ms=result.time_ms, speedup=result.speedup, speedup_ci=result.speedup_ci,
        speedup_verdict=result.speedup_verdict, sol_fraction=result.sol_fraction, bound=result.bound,
        max_abs_err=result.max_abs_err, tokens_in=llm["llm_tokens_in"], tokens_out=llm["llm_tokens_out"],
        cost_usd=llm["llm_cost_usd"], cached=extra["cached"], request_hash=job.request.key(),
        feedback=feedback.to_dict(), feedback_text=feedback_text, duplicate_of=duplicate_of,
        finish_reason=llm["llm_finish_reason"] or "", latency_s=llm["llm_latency_s"],
        temperature=llm["llm_temperature"], seed=llm["llm_seed"], attempts=extra["attempts"],
        continued=extra["continued"], error_kind=extra["error_kind"], reasoning=reply.reasoning if reply else "",
        source=candidate.source, result=result,
    )
    loop.add_node(node)
    if loop.store is not None:
        loop.store.add(result, run_id=loop.run_id, node_id=node.node_id, parent_node=node.parent,
                       parent_id=candidate.parent_id, prompt_id=node.prompt_id, turn=node.turn, role=node.role,
                       strategy=loop.strategy, author=node.author,
                       feedback_label=FeedbackOptions.from_dict(node.feedback).label, **llm, **loop.tags)
    if loop.transcript is not None:
        loop.transcript.write({"kind": "node", **node.to_dict(), "result": result.to_dict()})
    _progress(loop, node)
    if loop.on_node is not None:
        loop.on_node(node, loop)
    return node


def progress_text(loop: Any) -> str:
    """Best so far, tokens, money, failed steps: the progress bar's and the CLI's status line."""
    best = loop.best
    parts = [f"best {best.node_id} " + (f"{best.speedup:.2f}x" if best.speedup is not None else
                                        f"{best.time_ms:.3g} ms" if best.time_ms is not None else "ok")
             if best is not None else (f"last {loop.nodes[-1].status}" if loop.nodes else "waiting")]
    parts.append(f"{loop.tokens / 1000:.1f}k tok" if loop.tokens >= 1000 else f"{loop.tokens} tok")
    if loop.cost:
        parts.append(f"${loop.cost:.4f}")
    if loop.failures:
        parts.append(f"{loop.failures} failed")
    return " · ".join(parts)


def _progress(loop: Any, node: Node) -> None:
    loop.bar.update(1)
    loop.bar.set_postfix_str(progress_text(loop))
