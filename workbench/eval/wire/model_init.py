"""Where a task's models are built: under `torch.device(device)` on a GPU (a host build draws large models' parameters
slowly), on the host where the constructor fails there. The runner builds where the judge built the reference, under the
same seed, so equal init orders draw equal values."""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable
from typing import Any

import torch

HOST = "cpu"

#: Said in a Result whose candidate could not be built on the device where the reference was.
BUILT_ON_HOST_NOTE = ("the candidate's constructor failed on the device ({error}); it was built on the host "
                      "instead, where its own random parameters differ from the reference's device-built ones")

_built_on: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


def place_for(device: str) -> str:
    return device if device.startswith("cuda") else HOST


def build(make: Callable[[], Any], device: str, reseed: Callable[[], None], place: str | None = None
          ) -> tuple[Any, str, BaseException | None]:
    """(model, where built, what the device build raised): `make()` on `place`, else on the host; reseeded each try."""
    place = place or place_for(device)
    failure: BaseException | None = None
    if place != HOST:
        reseed()
        try:
            with torch.device(place):  # factory calls without an explicit device make their tensors there
                return make(), place, None
        except Exception as exc:  # noqa: BLE001 - e.g. a host generator handed to a factory: built on the host
            failure = exc
    reseed()
    return make(), HOST, failure


def same_layout(own: dict[str, Any], state: dict[str, Any]) -> bool:
    """Whether the reference's `state` loads into a model whose state_dict is `own`: the same names and shapes."""
    return bool(state) and own.keys() == state.keys() and all(own[k].shape == state[k].shape for k in own)


def remember(model: Any, place: str) -> None:
    with contextlib.suppress(TypeError):  # not weak-referenceable (a function as Model): nothing to build elsewhere
        _built_on[model] = place


def built_on(model: Any, default: str = HOST) -> str:
    try:
        return _built_on.get(model, default)
    except TypeError:
        return default
