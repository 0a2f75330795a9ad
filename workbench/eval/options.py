"""`EvalOptions`: how one evaluation runs, as one frozen value.

Everything that evaluates (the `evaluate` API, `evaluate_many`, the `%%kwb` magic, the editor widget, sweeps,
studies, the LLM agent and `kwb eval`) passes this object instead of a row of loose arguments, so a new option is
added in one place and every client gets it (STYLE.md convention 3).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from workbench.errors import WorkbenchError


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
    """

    device: str | None = None
    size: str | dict[str, Any] | None = None
    seed: int = 0
    rounds: int = 5
    timeout: float | None = None
    compile_timeout: float | None = None
    time_it: bool = True
    compile_reference: bool = True

    def __post_init__(self) -> None:
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
