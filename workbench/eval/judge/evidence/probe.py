"""Probe calls (CPU, Triton): the second of two back-to-back calls of one model on the same inputs burns a CPU budget
per interpreted launch in the runner; the calls' /proc CPU times tell how many launches really ran interpreted."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from workbench.eval.wire.tensors import clone_inputs, same_bits

#: A probe call's budget: PROBE_SHARE of the previous call's CPU time, at least PROBE_CALL_NS and PROBE_LAUNCH_MIN_NS a
#: launch. Against the cheapest earlier call on inputs of the same shapes, an honest probe's extra CPU time is its
#: budget give or take a fifth, so its share (evidence.CPU_LAUNCH_SHARE) stays near 1 and a forged count's near 0.
PROBE_SHARE = 1 / 3
PROBE_CALL_NS = 4_000_000
PROBE_LAUNCH_MIN_NS = 500_000
#: Probe calls per evaluation: each costs about one more call.
MAX_PROBES = 3
#: Where those read contradicted, CONFIRM_PROBES more with a budget of CONFIRM_SHARE of the previous call decide: on a
#: loaded host one call can cost a few ms less than the others, a small budget's margin; a whole call's is not.
CONFIRM_SHARE = 1.0
CONFIRM_PROBES = 2


@dataclass
class ProbePlanner:
    """Each call's probe budget from the calls before it; a model's first call (a warm-up) is never an ordinary half."""

    last_model: int | None = None
    last_inputs: list[Any] | None = None
    last_out_like: list[Any] | None = None
    last_probe: bool = False
    last_launches: int = 0
    last_cpu_ns: int = 0
    last_was_first: bool = False
    probes: int = 0
    models: set[int] = field(default_factory=set)
    share: float = PROBE_SHARE
    limit: int = MAX_PROBES

    def plan(self, model: int, inputs: list[Any], out_like: list[Any]) -> int:
        """Nanoseconds per launch for this call (0: an ordinary call)."""
        same = self.last_model == model and self.last_inputs is not None and same_bits(self.last_inputs, inputs)
        probe = same and not (self.last_probe or self.last_was_first) and self.last_launches > 0 and \
            self.probes < self.limit
        self.last_model, self.last_inputs, self.last_out_like = model, clone_inputs(list(inputs)), list(out_like)
        self.last_probe, self.last_was_first = probe, model not in self.models
        self.models.add(model)
        self.probes += probe
        budget = max(PROBE_CALL_NS, int(self.last_cpu_ns * self.share))
        return max(budget // max(self.last_launches, 1), PROBE_LAUNCH_MIN_NS) if probe else 0

    def confirm(self) -> None:
        """The next CONFIRM_PROBES probes burn CONFIRM_SHARE of the call before them."""
        self.share, self.limit = CONFIRM_SHARE, self.probes + CONFIRM_PROBES

    def reported(self, launches: int, cpu_ns: int | None) -> None:
        """What the call just made reported and cost the runner (CPU nanoseconds)."""
        self.last_launches, self.last_cpu_ns = launches, cpu_ns or 0
