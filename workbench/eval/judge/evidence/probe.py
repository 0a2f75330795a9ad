"""Which correctness calls are probe calls (CPU, Triton): the second of two back-to-back calls of one model on the
same inputs. In a probe call the runner burns a CPU budget per interpreted launch
(`runner/launches.interpreter_probe`); the difference of the runner's CPU time (from /proc) between the two calls
says how many launches really went through Triton's interpreter (`checks/evidence.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from workbench.eval.wire.tensors import bytes_per_element

#: A probe call's CPU budget: the previous call's CPU time, at least PROBE_CALL_NS and PROBE_LAUNCH_MIN_NS a launch.
PROBE_CALL_NS = 4_000_000
PROBE_LAUNCH_MIN_NS = 500_000
#: Probe calls per evaluation: each costs about one more call.
MAX_PROBES = 3


def _copy(inputs: Any) -> Any:
    """A copy of a call's arguments (tensors cloned, nested lists and tuples copied through)."""
    if isinstance(inputs, (list, tuple)):
        return type(inputs)(_copy(x) for x in inputs)
    return inputs.detach().clone() if isinstance(inputs, torch.Tensor) else inputs


def _same(a: Any, b: Any) -> bool:
    """Whether two calls' arguments are equal: tensors bitwise, nested lists and tuples element by element."""
    if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
        return isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b) and \
            all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, torch.Tensor) != isinstance(b, torch.Tensor):
        return False
    if isinstance(a, torch.Tensor):
        return a.shape == b.shape and a.dtype == b.dtype and \
            torch.equal(bytes_per_element(a), bytes_per_element(b.to(a.device)))
    return bool(a == b)


@dataclass
class ProbePlanner:
    """Decides each call's probe budget from the calls before it and keeps the last call's arguments for a pair made
    on purpose (`CandidateSession.probe_pair`). A model's first call (the interpreter's warm-up) is never a pair's
    ordinary half."""

    last_model: int | None = None
    last_inputs: list[Any] | None = None
    last_out_like: list[Any] | None = None
    last_probe: bool = False
    last_launches: int = 0
    last_cpu_ns: int = 0
    last_was_first: bool = False
    probes: int = 0
    models: set[int] = field(default_factory=set)

    def plan(self, model: int, inputs: list[Any], out_like: list[Any]) -> int:
        """Nanoseconds per launch for this call (0: an ordinary call)."""
        same = self.last_model == model and self.last_inputs is not None and _same(self.last_inputs, inputs)
        probe = same and not (self.last_probe or self.last_was_first) and self.last_launches > 0 and \
            self.probes < MAX_PROBES
        self.last_model, self.last_inputs, self.last_out_like = model, _copy(inputs), list(out_like)
        self.last_probe, self.last_was_first = probe, model not in self.models
        self.models.add(model)
        self.probes += probe
        budget = max(PROBE_CALL_NS, self.last_cpu_ns)
        return max(budget // max(self.last_launches, 1), PROBE_LAUNCH_MIN_NS) if probe else 0

    def reported(self, launches: int, cpu_ns: int | None) -> None:
        """What the call just made reported (launches) and cost the runner (CPU nanoseconds, from /proc)."""
        self.last_launches, self.last_cpu_ns = launches, cpu_ns or 0
