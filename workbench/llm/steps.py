"""What one reply (or one failed call) becomes before, or instead of, evaluation.

Three outcomes never reach the judge, each with its own status so that neither the user nor the model reads
them as a verdict on a kernel:

* `truncated`: the reply was cut at the output-token limit (finish_reason "length", stop_reason
  "max_tokens"). Code cut between lines would otherwise look like a kernel that skips its work (a cheat
  verdict), code cut mid-line like a compile error; both would be false, so it is not judged at all.
* `no-code-found` (status compile_error, as before): the model answered without a usable code block; a
  reply holding only reasoning says so.
* `llm_error`: every attempt of the call failed; the message carries the classified cause and its advice.
"""

from __future__ import annotations

from typing import Any

from workbench.candidate import Candidate
from workbench.llm.base import LLMError, LLMReply
from workbench.llm.extract import NO_CODE_FOUND, Extraction, extract_code
from workbench.llm.runs import LLM_ERROR, TRUNCATED
from workbench.result import Result

#: What the next prompt tells the model about a reply of its that was cut off.
TRUNCATED_FOR_MODEL = ("Your previous reply was cut off at the output-token limit before the code was complete, "
                       "so it was not run. Reply with the complete module in one ```python block and keep any "
                       "explanation short.")


def read_reply(reply: LLMReply, entry: str = "ModelNew") -> Extraction:
    """The code in a reply, or why there is none (truncated, reasoning only, no block)."""
    if reply.truncated:
        return Extraction(None, TRUNCATED, 0, truncation_note(reply))
    if not reply.text.strip() and reply.reasoning:
        return Extraction(None, NO_CODE_FOUND, 0,
                          f"the reply held only reasoning ({len(reply.reasoning)} characters) and no answer")
    return extract_code(reply.text, entry)


def truncation_note(reply: LLMReply) -> str:
    """The user-facing explanation of a cut reply, with the settings that fix it."""
    spent = f"{reply.tokens_out} output tokens" if reply.tokens_out else "the output-token limit"
    if not reply.text.strip() and reply.reasoning:
        what = (f"the model spent {spent} on reasoning ({len(reply.reasoning)} characters) and was cut off before "
                "any answer")
    else:
        what = f"the reply was cut off after {spent} (finish_reason {reply.finish_reason!r})"
    continued = f" even after {reply.continued} continuation(s)" if reply.continued else ""
    return (f"{what}{continued}, so it was not judged. Raise the limit: max_tokens=N (max_completion_tokens=N for "
            "reasoning models) in get_provider or llm.toml, or let the loop ask the model to go on with "
            "continue_truncated=1")


def unjudged_result(task: Any, candidate: Candidate, *, status: str, flags: list[str], message: str,
                    device: str, seed: int) -> Result:
    """A Result for a step the judge never saw (its verdict is the step's own status)."""
    return Result(
        task=task.name, candidate_id=candidate.id if candidate.source else "", candidate_name=candidate.name or "",
        language=candidate.language or "", status=status, flags=list(flags), message=message, device=device,
        source=candidate.source, task_hash=task.source_hash, source_hash=candidate.id if candidate.source else "",
        seed=seed,
    )


def outcome_result(task: Any, candidate: Candidate, extraction: Extraction, *, device: str, seed: int) -> Result:
    """The result of a reply without code to judge: truncated, or no code found."""
    if extraction.outcome == TRUNCATED:
        return unjudged_result(task, candidate, status=TRUNCATED, flags=[TRUNCATED], device=device, seed=seed,
                               message=f"[{TRUNCATED}] {extraction.note}.")
    return unjudged_result(task, candidate, status="compile_error", flags=[NO_CODE_FOUND], device=device, seed=seed,
                           message=f"[{NO_CODE_FOUND}] {extraction.note}. Reply with one ```python block that "
                                   "defines class ModelNew.")


def failure_flag(kind: str) -> str:
    return "llm-" + kind.replace("_", "-")


def failed_result(task: Any, candidate: Candidate, error: LLMError, *, device: str, seed: int) -> Result:
    """The result of a step whose call failed for good: the cause and its advice, nothing judged."""
    kind = getattr(error, "kind", "") or type(error).__name__
    return unjudged_result(task, candidate, status=LLM_ERROR, flags=[failure_flag(kind)], device=device, seed=seed,
                           message=f"[{failure_flag(kind)}] {error}")
