"""The `replay` provider: answers from a recorded transcript, so a study reruns offline and for free.

Match modes:
  * "hash": a request gets the recorded reply of the identical request (same prompt, model, parameters,
    sample index; repeats in recorded order). Anything else is a `ReplayMissError`. Proves the rerun asked
    exactly what was asked before.
  * "order": replies in recorded order, whatever is asked.
  * "auto" (default): by hash when possible, else the next unused reply in recorded order, noting the
    divergence. Refine prompts quote measured times and error traces, which differ from run to run, so an
    exact-hash rerun of a loop with feedback is rare; what a replay must reproduce is the same replies in
    the same turns, hence the same candidates and verdicts.
"""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path
from typing import Any

from workbench.llm.base import (
    BaseProvider,
    LLMCallError,
    LLMConfigError,
    LLMReply,
    LLMRequest,
    ReplayMissError,
)
from workbench.llm.config import LLMConfig
from workbench.llm.recording import Recorder, read_transcript
from workbench.llm.retry import RetryPolicy

MATCHES = ("auto", "hash", "order")


class ReplayProvider(BaseProvider):
    name = "replay"
    #: Replies come from a file at once; one call at a time keeps the recorded order (match "order"/"auto").
    max_concurrency = 1

    def __init__(self, transcript: str | os.PathLike, *, match: str = "auto", model: str | None = None,
                 run_id: str | None = None, recorder: Recorder | None = None, **kw: Any):
        path = Path(transcript)
        if not path.exists():
            raise LLMConfigError(f"replay transcript {path} does not exist; record one with "
                                 "run_agent(..., transcript=PATH) first", setting="transcript",
                                 env="KWB_LLM_TRANSCRIPT", provider="replay")
        if match not in MATCHES:
            raise LLMConfigError(f"replay match must be one of {', '.join(MATCHES)}, got {match!r}", setting="match")
        self.path = path
        self.match = match
        records = _entries(read_transcript(path), run_id)
        if not records:
            which = f" for run {run_id!r}" if run_id is not None else ""
            raise LLMConfigError(f"replay transcript {path} holds no recorded calls{which}", setting="transcript",
                                 provider="replay")
        self.records = records
        kw.setdefault("retry", RetryPolicy(max_retries=0))  # a recorded failure is replayed once, as it ended
        super().__init__(model or records[0].get("model") or "replay", endpoint=f"replay:{path.name}",
                         recorder=recorder if recorder is not None else Recorder(), **kw)
        self._by_hash: dict[str, list[int]] = defaultdict(list)
        for index, rec in enumerate(records):
            self._by_hash[rec["request_hash"]].append(index)
        self._used = [False] * len(records)
        self._next = 0
        self.served = 0
        #: (call number, request hash, recorded hash) for every reply served out of hash order ("auto").
        self.divergences: list[tuple[int, str, str]] = []

    def settings(self) -> dict[str, Any]:
        return {"provider": self.name, "model": self.model, "transcript": str(self.path)}

    @property
    def remaining(self) -> int:
        return self._used.count(False)

    def _take_next(self) -> int | None:
        while self._next < len(self.records) and self._used[self._next]:
            self._next += 1
        return self._next if self._next < len(self.records) else None

    def _miss(self, key: str) -> ReplayMissError:
        if self.match == "order" or self.remaining == 0:
            return ReplayMissError(f"replay transcript {self.path.name} is used up after {self.served} replies: "
                                   "the rerun asked for more calls than were recorded", key)
        seen = key in self._by_hash
        why = ("it was asked more often than recorded" if seen else
               "the prompt, model, parameters or sample index differ from the recorded run (edited templates, "
               "other feedback options, task sizes or model?)")
        return ReplayMissError(
            f"replay transcript {self.path.name} has no reply for request {key} (call #{self.served + 1}): {why}. "
            "Rerun with the recorded settings, or use match='auto' or 'order' to replay replies in recorded order.",
            key)

    def _send(self, request: LLMRequest) -> LLMReply:
        key = request.key()
        index = None
        if self.match in ("hash", "auto"):
            index = next((i for i in self._by_hash.get(key, ()) if not self._used[i]), None)
        if index is None and self.match in ("order", "auto"):
            index = self._take_next()
            if index is not None and self.match == "auto":
                self.divergences.append((self.served + 1, key, self.records[index]["request_hash"]))
        if index is None:
            raise self._miss(key)
        self._used[index] = True
        self.served += 1
        rec = self.records[index]
        if rec.get("reply") is None:  # a step that failed for good when recorded fails the same way here
            raise LLMCallError(rec.get("error") or "recorded failure", "replay", self.model,
                               kind=rec.get("error_kind") or "bad_request", attempts=int(rec.get("attempt") or 1))
        return LLMReply(text=rec["reply"], tokens_in=int(rec.get("tokens_in") or 0),
                        tokens_out=int(rec.get("tokens_out") or 0), model=rec.get("model") or self.model,
                        finish_reason=rec.get("finish_reason") or "", cached=True,
                        reasoning=rec.get("reasoning") or "")


def _entries(records: list[dict[str, Any]], run_id: str | None) -> list[dict[str, Any]]:
    """What a replay serves, in recorded order: each answered call, and for each step that failed for good (a node
    with status llm_error) its last failed attempt, so a replay reproduces the failure at that step."""
    if run_id is not None:
        records = [r for r in records if r.get("run_id") == run_id]
    last_failure: dict[str, dict[str, Any]] = {}
    out = []
    for rec in records:
        if rec.get("kind") == "call":
            if rec.get("reply") is not None:
                out.append(rec)
            elif rec.get("error") and rec.get("error_kind") not in ("cancelled", "interrupted"):
                last_failure[rec.get("request_hash", "")] = rec
        elif rec.get("kind") == "node" and rec.get("status") == "llm_error":
            failed = last_failure.get(rec.get("request_hash", ""))
            if failed is not None:
                out.append(failed)
    return out


def from_config(config: LLMConfig) -> ReplayProvider:
    """What `get_provider("replay", transcript=...)` builds (workbench.llm.registry names this factory)."""
    path = config.require("transcript")
    # The model comes from the transcript unless asked for explicitly (an env default must not break hashes).
    model = config.model if config.source.get("model") == "argument" else None
    # A replay spends nothing, so it needs no cache; a fresh recorder keeps its own call records.
    return ReplayProvider(path, model=model, recorder=Recorder(prices=config.price_table()))
