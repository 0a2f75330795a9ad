"""The dict an `Evaluation` returns, made into the typed `Reply` the judge sends, and `Stop`, which ends it early.

Evaluation stages build their answer as a dict (each stage adds its part); this is the one place it becomes the
channel's record. Its keys must be Reply's fields: a key Reply does not declare is an error here, in the judge,
so the judge and the caller cannot drift apart silently.

A stage that ends the evaluation early raises `Stop` with its reply. It lives here, beside the reply it carries,
rather than in workbench.eval.judge.evaluation, so that stages kept in modules of their own (loading the candidate
in workbench.eval.judge.runners.start) can stop the evaluation without importing the module that runs them.
"""

from __future__ import annotations

import json
from typing import Any

import torch

from workbench.eval.wire.judge_messages import Reply
from workbench.eval.wire.records import from_json


class Stop(Exception):
    """A stage ended the evaluation; `reply` is what the caller gets."""

    def __init__(self, reply: dict[str, Any]):
        self.reply = reply
        super().__init__(reply.get("status", ""))


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, torch.dtype):
        return str(obj).removeprefix("torch.")
    if isinstance(obj, tuple):
        return list(obj)
    return str(obj)


def reply_from_evaluation(data: dict[str, Any]) -> Reply:
    """The Reply for `data` (module doc); values JSON-able, torch dtypes by their names, anything else as text."""
    return from_json(Reply, json.loads(json.dumps(data, default=_jsonable)))
