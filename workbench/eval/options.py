"""`EvalOptions`: how one evaluation runs, as one frozen value.

Everything that evaluates (the `evaluate` API, `evaluate_many`, the `%%kwb` magic, the editor widget, sweeps,
studies, the LLM agent and `kwb eval`) passes this object instead of a row of loose arguments, so a new option is
added in one place and every client gets it (typed records cross every boundary).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from workbench.errors import WorkbenchError

if TYPE_CHECKING:
    from workbench.eval.caller.progress import CancelToken
    from workbench.eval.wire.judge_messages import Progress


@dataclass(frozen=True)
class EvalOptions:
    """Options of one evaluation.

    device: "cpu", "cuda" or "cuda:N"; None picks the GPU when there is one, else Triton's CPU interpreter.
    size: a preset name ("cpu"/"gpu") or a dict of module constants (a "dtype" key switches the dtype); a partial
        dict is filled from the device's preset. None picks the device's preset.
    seed: the seed of every input draw and model build (the same seed gives the same rounds).
    rounds: correctness rounds (at least 5 run, so every size and input distribution is seen).
    timeout: seconds the candidate may take for any one step after loading (None: 120 on the CPU, 60 on a GPU).
    compile_timeout: seconds for loading the candidate, CUDA compilation included (None: 600).
    time_it: time the candidate and the reference after the checks pass.
    compile_reference: on a GPU, also time `torch.compile` of the reference.
    on_progress: called with a `Progress` (stage, round or batch k of n, elapsed seconds, timing samples and CI
        width; `.describe()` gives one line) as the judge works and about once a second while it is silent. Called
        on the evaluating thread; an exception it raises stops the evaluation and propagates.
    cancel: a `threading.Event` (anything with `is_set()`); once set, the evaluation is stopped within a fraction
        of a second, its judge ended, and `evaluate` returns a Result with status "cancelled" (never stored).
    """

    device: str | None = None
    size: str | dict[str, Any] | None = None
    seed: int = 0
    rounds: int = 5
    timeout: float | None = None
    compile_timeout: float | None = None
    time_it: bool = True
    compile_reference: bool = True
    on_progress: Callable[[Progress], Any] | None = field(default=None, compare=False, repr=False)
    cancel: CancelToken | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.on_progress is not None and not callable(self.on_progress):
            raise WorkbenchError(f"on_progress must be a function taking one Progress, got {self.on_progress!r}")
        if self.cancel is not None and not callable(getattr(self.cancel, "is_set", None)):
            raise WorkbenchError(f"cancel must be a threading.Event (anything with is_set()), got {self.cancel!r}")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool):
            raise WorkbenchError(f"seed must be a whole number, got {self.seed!r}")
        if not isinstance(self.rounds, int) or isinstance(self.rounds, bool) or self.rounds < 1:
            raise WorkbenchError(f"rounds must be a whole number of at least 1, got {self.rounds!r}")
        for name in ("timeout", "compile_timeout"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
                raise WorkbenchError(f"{name} must be a positive number of seconds (or None for the default), "
                                     f"got {value!r}")

    def replace(self, **changes: Any) -> EvalOptions:
        """A copy with `changes` applied (unknown names are an error that lists the known ones)."""
        known = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(changes) - known)
        if unknown:
            raise WorkbenchError(f"unknown evaluation option(s) {', '.join(map(repr, unknown))}; known: "
                                 f"{', '.join(sorted(known))}")
        return dataclasses.replace(self, **changes)
