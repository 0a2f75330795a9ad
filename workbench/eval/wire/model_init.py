"""Where a task's models are built: on the device they run on, with the host as the fallback.

Why: KernelBench's rule builds `Model(*init_inputs)` on the host under a seed, then moves it to the device. The
random initialization of its parameters then runs on the host's generator, one thread: the 671 million parameters
of KernelBench's level-3 MLP took about 4 s per build, and an evaluation builds a model three times (the judge's
reference, the reference's runner and the candidate's runner), then copied every weight to the host and back to
load the reference's state. Built under `torch.device(device)`, the same initialization runs on the GPU in
milliseconds and the state is copied device to device.

Equal weights on both sides still hold, because both sides are built in the same place under the same seed: a
candidate whose parameters have the reference's names and shapes gets the reference's state copied in, and one
whose parameters have other names but the same initialization order draws the same values from the same generator
(the device's, seeded by `seeding.seed_all`).

A constructor that cannot run under the device (a host generator passed to `torch.randn`, a host-only op) is built on
the host, as before. The judge builds the reference first and tells each runner where it was built
(`runner_messages.Build.init_device`), so the candidate is built there too; a candidate that only builds on the host
is built there, and the Result notes it (`BUILT_ON_HOST_NOTE`).
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import torch

HOST = "cpu"

#: Said in a Result whose candidate could not be built on the device where the reference was.
BUILT_ON_HOST_NOTE = ("the candidate's constructor failed on the device ({error}); it was built on the host "
                      "instead, where its own random parameters differ from the reference's device-built ones")

_built_on: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


def place_for(device: str) -> str:
    """Where a model for `device` is built first: the device itself for a GPU, the host otherwise."""
    return device if device.startswith("cuda") else HOST


@contextlib.contextmanager
def building_on(place: str) -> Iterator[None]:
    """Factory calls without an explicit device inside the block make their tensors on `place`."""
    if place == HOST:
        yield
        return
    with torch.device(place):
        yield


def build(make: Callable[[], Any], device: str, reseed: Callable[[], None], place: str | None = None
          ) -> tuple[Any, str, BaseException | None]:
    """`make()` built on `place` (default `place_for(device)`), or on the host when it raises there: (model, where
    it was built, what it raised on the device). `reseed()` runs before each try, so a host retry draws what a
    host-only build would have drawn. The host build's own exception propagates."""
    place = place or place_for(device)
    failure: BaseException | None = None
    if place != HOST:
        reseed()
        try:
            with building_on(place):
                return make(), place, None
        except Exception as exc:  # noqa: BLE001 - e.g. a host generator handed to a factory: built on the host
            failure = exc
    reseed()
    return make(), HOST, failure


def same_layout(own: dict[str, Any], state: dict[str, Any]) -> bool:
    """Whether the reference's `state` can be loaded into a model whose own state_dict is `own`: the same names,
    each with the same shape (a candidate with other parameters keeps its own, drawn under the same seed)."""
    return bool(state) and own.keys() == state.keys() and all(own[k].shape == state[k].shape for k in own)


def remember(model: Any, place: str) -> None:
    """Record where the judge built `model` (`built_on` reads it when the runners are told)."""
    try:
        _built_on[model] = place
    except TypeError:  # not weak-referenceable (a plain function as Model): nothing to build elsewhere
        pass


def built_on(model: Any, default: str = HOST) -> str:
    """Where `model` was built, as `remember` recorded it (`default` when it did not)."""
    try:
        return _built_on.get(model, default)
    except TypeError:
        return default
