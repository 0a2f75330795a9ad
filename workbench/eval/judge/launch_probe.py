"""Which correctness calls are probe calls (CPU, Triton): the second of two calls of one model on the same input
contents, back to back, as every correctness round makes them. In a probe call the runner burns a budget of CPU per
interpreted launch (`runner/launches.interpreter_probe`); the judge reads the runner's CPU time around both calls
from /proc, and the difference says how many launches really went through Triton's interpreter
(`checks/evidence.py`). Two calls on the same inputs cost the same but for the budget, so the difference stands far
above the noise between unrelated calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from workbench.eval.wire.tensors import bytes_per_element

#: CPU a probe call burns in all (spread over the launches the previous call reported), and at least per launch.
PROBE_CALL_NS = 4_000_000
PROBE_LAUNCH_MIN_NS = 500_000


def _copy(inputs: list[Any]) -> list[Any]:
    return [x.detach().clone() if isinstance(x, torch.Tensor) else x for x in inputs]


def _same(a: list[Any], b: list[Any]) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if isinstance(x, torch.Tensor) != isinstance(y, torch.Tensor):
            return False
        if isinstance(x, torch.Tensor):
            if x.shape != y.shape or x.dtype != y.dtype or \
                    not torch.equal(bytes_per_element(x), bytes_per_element(y.to(x.device))):
                return False
        elif x != y:
            return False
    return True


@dataclass
class ProbePlanner:
    """Decides each call's probe budget from the calls before it (module doc) and keeps the last call's arguments,
    so that a pair can also be made on purpose (`CandidateSession.probe_pair`)."""

    last_model: int | None = None
    last_inputs: list[Any] | None = None
    last_out_like: list[Any] | None = None
    last_probe: bool = False
    last_launches: int = 0

    def plan(self, model: int, inputs: list[Any], out_like: list[Any]) -> int:
        """Nanoseconds per launch for this call (0: an ordinary call)."""
        same = self.last_model == model and self.last_inputs is not None and _same(self.last_inputs, inputs)
        probe = same and not self.last_probe and self.last_launches > 0
        self.last_model, self.last_inputs, self.last_out_like = model, _copy(inputs), list(out_like)
        self.last_probe = probe
        return max(PROBE_CALL_NS // max(self.last_launches, 1), PROBE_LAUNCH_MIN_NS) if probe else 0

    def reported(self, launches: int) -> None:
        self.last_launches = launches
