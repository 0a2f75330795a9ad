"""`EvalOptions`: how one evaluation runs, as one frozen value that every client passes (the API, the magic, the widget,
sweeps, studies, the LLM agent, `kwb eval`), so a new option is added in one place."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from workbench.errors import WorkbenchError

if TYPE_CHECKING:
    from workbench.dispatch.progress import CancelToken
    from workbench.eval.wire.judge_messages import Progress


@dataclass(frozen=True)
class EvalOptions:
    """Options of one evaluation."""

    #: "cpu", "cuda" or "cuda:N"; None: the GPU when there is one, else Triton's CPU interpreter.
    device: str | None = None
    #: The GPUs a "cuda" evaluation may be placed on (indices or "cuda:N"); None: KWB_GPUS, else every visible GPU.
    devices: tuple[str, ...] | None = None
    #: A preset name ("cpu"/"gpu") or a dict of module constants ("dtype" switches the dtype), filled from the
    #: device's preset; None: the device's preset.
    size: str | dict[str, Any] | None = None
    #: The seed of every input draw and model build.
    seed: int = 0
    #: Correctness rounds (at least 5 run, so every size and input distribution is seen).
    rounds: int = 5
    #: Seconds the candidate may take for any one step after loading (None: 120 on the CPU, 60 on a GPU).
    timeout: float | None = None
    #: Seconds for loading the candidate, CUDA compilation included (None: 600).
    compile_timeout: float | None = None
    #: Time the candidate and the reference after the checks pass.
    time_it: bool = True
    #: On a GPU, also time `torch.compile` of the reference.
    compile_reference: bool = True
    #: Called on the evaluating thread with each `Progress` (`.describe()` gives one line), and about once a second
    #: while the judge is silent; an exception it raises stops the evaluation and propagates.
    on_progress: Callable[[Progress], Any] | None = field(default=None, compare=False, repr=False)
    #: A `threading.Event` (anything with `is_set()`): once set, the evaluation stops within a fraction of a second
    #: and `evaluate` returns a Result with status "cancelled" (never stored).
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
        if self.devices is not None:
            object.__setattr__(self, "devices", _as_devices(self.devices))
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


def _as_devices(devices: Any) -> tuple[str, ...]:
    """`devices` as a tuple of GPU names: one name, an index, or a list of them."""
    if isinstance(devices, (str, int)):
        return (str(devices),)
    try:
        return tuple(str(d) for d in devices)
    except TypeError:
        raise WorkbenchError(f"devices must be GPU indices or names such as ['cuda:0', 'cuda:1'], got {devices!r}") \
            from None
