"""Which GPUs the caller's judges use (every visible one, or `KWB_GPUS` "0,2"/"all", or `devices=`), named by index
("cuda:1"). A judge sees its GPU alone (CUDA_VISIBLE_DEVICES), so a candidate's `.cuda()` lands where it was placed;
with several GPUs each GPU's judges get their own CPU cores (`cores_for`), so two timings never share a core.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from workbench.errors import WorkbenchError


def visible_count() -> int:
    """GPUs this process sees (0 without CUDA)."""
    try:
        import torch

        return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0
    except Exception:  # noqa: BLE001 - a broken CUDA install has no usable GPU
        return 0


def _index(name: str, count: int) -> int:
    text = name.strip().removeprefix("cuda:")
    try:
        index = int(text)
    except ValueError:
        raise WorkbenchError(f"unknown GPU {name!r}: name GPUs by index, e.g. 'cuda:1' or 1") from None
    if not 0 <= index < count:
        raise WorkbenchError(f"GPU {name!r} is not visible here: this machine shows {count} GPU(s), "
                             f"cuda:0 to cuda:{count - 1}")
    return index


def chosen(devices: Sequence[str | int] | str | None = None, count: int | None = None) -> list[str]:
    """The GPUs to spread work over, as "cuda:N": `devices` if given, else KWB_GPUS, else all visible."""
    count = visible_count() if count is None else count
    if devices is None:
        raw = os.environ.get("KWB_GPUS", "").strip()
        devices = None if raw in ("", "all") else [part for part in raw.split(",") if part.strip()]
        if devices is not None and not devices:
            raise WorkbenchError(f"KWB_GPUS={raw!r} names no GPU: use indices such as '0,1', or 'all'")
    if devices is None or devices == "all":
        return [f"cuda:{i}" for i in range(count)]
    if isinstance(devices, (str, int)):
        devices = [devices]
    picked = [f"cuda:{_index(str(d), count)}" for d in devices]
    return list(dict.fromkeys(picked))


def physical_id(slot: str) -> str:
    """What CUDA_VISIBLE_DEVICES must say for a judge to see GPU `slot` ("cuda:N") alone: the N-th entry of the
    caller's own CUDA_VISIBLE_DEVICES where it has one (an index or a UUID), else N."""
    index = int(slot.split(":", 1)[1])
    raw = os.environ.get("CUDA_VISIBLE_DEVICES")
    if raw:
        entries = [e.strip() for e in raw.split(",") if e.strip()]
        if index < len(entries):
            return entries[index]
    return str(index)


def cores_for(slot: str, count: int | None = None) -> str:
    """The CPU cores of GPU `slot`'s judges ("16-31" style, `KWB_JUDGE_CORES`): the caller's cores cut into one
    contiguous share per visible GPU; "" with a single GPU (the judges keep every core)."""
    count = visible_count() if count is None else count
    try:
        cores = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux: no pinning
        return ""
    if count <= 1 or len(cores) < count:
        return ""
    index = int(slot.split(":", 1)[1]) % count
    share = cores[index * len(cores) // count:(index + 1) * len(cores) // count]
    return ",".join(map(str, share))

