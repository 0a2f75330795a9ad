"""NVML telemetry around timed batches: SM and memory clocks, power, temperature and throttle reasons.

A GPU that throttles mid-measurement times a different machine: the kernel did not get slower, the clock did.
Like nvbench, which discards a sample taken while the SM clock is below 75% of the default clock (its
`--throttle-threshold`), the timing loop samples NVML before and after each timed batch and drops the batch when
`judge_batch` says so. Every sample and verdict lands in `Result.telemetry` (`summarize_batches`), so a reader can
see which clocks a published number was measured at.

NVML comes from the optional `nvidia-ml-py` package (`pip install 'kernel-workbench[gpu]'`, imported as
`pynvml`). Without it, without a driver, or without the device, every call here returns a dict with
`"status": "unavailable"` and a reason, and nothing raises: telemetry describes a measurement, it never stops one.
`Telemetry(nvml=...)` takes any object with pynvml's function names, which is how the tests replay recorded
samples on a machine without a GPU.
"""

from __future__ import annotations

import importlib
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

#: NVML's clock-event ("throttle") reason bits, nvmlClocksThrottleReason* / nvmlClocksEventReason* in nvml.h.
THROTTLE_REASONS: dict[int, str] = {
    0x001: "gpu_idle",
    0x002: "applications_clocks_setting",
    0x004: "sw_power_cap",
    0x008: "hw_slowdown",
    0x010: "sync_boost",
    0x020: "sw_thermal_slowdown",
    0x040: "hw_thermal_slowdown",
    0x080: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
#: Reasons that say nothing about the timed work: the GPU was idle when sampled (between batches), clocks follow
#: the applications-clock or display setting, or are held in step with other GPUs of a sync-boost group.
BENIGN_REASONS = frozenset({"gpu_idle", "applications_clocks_setting", "sync_boost", "display_clock_setting"})
#: Reasons that drop a batch: thermal protection or a hardware slowdown (power brake, power supply) cut the clock
#: by a factor the kernel has nothing to do with.
SLOWDOWN_REASONS = frozenset({"hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"})
# sw_power_cap is neither: a heavy kernel can hold an H100 at its power limit for good, and that clock is the one
# it runs at in production. The batch is flagged, and dropped only by the clock rule (see `judge_batch`).

#: A batch whose SM clock fell below this share of the default SM clock is dropped (nvbench's default 75%).
THROTTLE_THRESHOLD = 0.75
UNAVAILABLE = "unavailable"
INSTALL_HINT = "pip install 'kernel-workbench[gpu]' (or pip install nvidia-ml-py)"

# pynvml's constants, for an injected object that lacks them.
_NVML_CLOCK_SM, _NVML_CLOCK_MEM, _NVML_TEMPERATURE_GPU = 1, 2, 0
_GPU_IDLE, _SW_POWER_CAP = 0x001, 0x004


def decode_throttle_reasons(mask: int) -> list[str]:
    """Names of the bits set in an NVML throttle-reason mask, lowest bit first; a bit NVML added after this
    table reads as "unknown_0x<bit>"."""
    names, bit = [], 1
    while bit <= mask:
        if mask & bit:
            names.append(THROTTLE_REASONS.get(bit, f"unknown_0x{bit:x}"))
        bit <<= 1
    return names


def unavailable(reason: str) -> dict[str, Any]:
    """The marker every function here returns when NVML cannot answer."""
    return {"status": UNAVAILABLE, "reason": reason}


def is_available(sample: dict[str, Any] | None) -> bool:
    return bool(sample) and sample.get("status") != UNAVAILABLE


def _idle(sample: dict[str, Any]) -> bool:
    return bool(int(sample.get("throttle_mask") or 0) & _GPU_IDLE)


def nvml_uuid(uuid: str) -> str:
    """NVML's spelling of a device UUID: torch's `get_device_properties(d).uuid` prints without the "GPU-"
    prefix that `nvmlDeviceGetHandleByUUID` expects."""
    uuid = str(uuid)
    return uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"


@dataclass(frozen=True)
class BatchTelemetry:
    """The NVML samples taken just before and just after one timed batch, and `judge_batch`'s verdict on it."""

    index: int
    before: dict[str, Any]
    after: dict[str, Any]
    #: False: the batch was measured on a throttled GPU and its samples should be dropped.
    ok: bool
    #: Why it was dropped, or (with ok) why it is flagged, e.g. "sw_power_cap".
    reasons: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["reasons"] = list(self.reasons)
        return d


def judge_batch(before: dict[str, Any], after: dict[str, Any], default_sm_clock: float | None,
                threshold: float = THROTTLE_THRESHOLD, *, keep_power_capped: bool = False,
                ) -> tuple[bool, tuple[str, ...]]:
    """(ok, reasons) for a batch between two samples. Not ok when either sample carries a SLOWDOWN_REASONS bit,
    or when an SM clock read while the GPU was busy is below `threshold` x `default_sm_clock` (nvbench's rule).
    Other non-benign bits (sw_power_cap, unknown ones) are reasons with ok still True: flagged, kept.

    keep_power_capped: a low clock read with sw_power_cap set (and no slowdown bit) keeps the batch, flagged.
    A heavy GEMM holds an H100 at its power cap for good, and below the 75% line: 8192^3 bf16 matmuls ran at
    1140-1470 MHz of 1980 in every batch (tests/data/nvml_h100_power_limited.json), so nvbench's rule alone drops
    every batch and leaves nothing to time. A loop that sees that may measure again with True and report the
    power-limited time, which is the time such a kernel gets in production.

    NVML's reasons are the state at the moment of sampling, so a slowdown that came and went inside the batch is
    missed; sampling both ends catches one that started or ended in it. A sample with gpu_idle set was taken
    before the GPU ramped up (or after it wound down), so its clock is not the batch's and is not judged.
    """
    samples = [s for s in (before, after) if is_available(s)]
    if not samples:
        return True, ("telemetry-unavailable",)
    reasons: list[str] = []
    ok = True
    mask = 0
    for s in samples:
        mask |= int(s.get("throttle_mask") or 0)
    for name in decode_throttle_reasons(mask):
        if name in BENIGN_REASONS:
            continue
        reasons.append(name)
        if name in SLOWDOWN_REASONS:
            ok = False
    busy = [s for s in samples if s.get("sm_clock_mhz") is not None and not _idle(s)]
    low = [s for s in busy if default_sm_clock and s["sm_clock_mhz"] < threshold * default_sm_clock]
    if low:
        reasons.append(f"sm_clock {min(s['sm_clock_mhz'] for s in low):g} MHz < {threshold:.0%} of "
                       f"{default_sm_clock:g} MHz")
        if not (keep_power_capped and all(int(s.get("throttle_mask") or 0) & _SW_POWER_CAP for s in low)):
            ok = False
    return ok, tuple(reasons)


def _stats(values: Sequence[float], *keys: str) -> dict[str, float] | None:
    if not values:
        return None
    funcs: dict[str, Callable[[Sequence[float]], float]] = {"min": min, "median": statistics.median, "max": max}
    return {k: float(funcs[k](values)) for k in keys}


def summarize_batches(batches: Iterable[BatchTelemetry], default_sm_clock: float | None, *, device: str = "",
                      threshold: float = THROTTLE_THRESHOLD, **extra: Any) -> dict[str, Any]:
    """The dict for `Result.telemetry`: every batch's samples and verdict, how many were dropped (not ok) and
    flagged (ok, with reasons), and min / median SM and memory clocks, max temperature and median / max power
    over the samples taken while the GPU was busy. `extra` (e.g. the power limit) is stored alongside.
    "status" is "unavailable" (with a reason) when no batch has an NVML sample."""
    batches = list(batches)
    samples = [s for b in batches for s in (b.before, b.after) if is_available(s)]
    if not samples:
        reason = next((s.get("reason") for b in batches for s in (b.before, b.after) if s.get("reason")), None)
        return unavailable(reason or "no NVML samples were taken")
    busy = [s for s in samples if not _idle(s)] or samples

    def values(key: str, among: list[dict[str, Any]]) -> list[float]:
        return [float(s[key]) for s in among if s.get(key) is not None]

    temps = values("temperature_c", samples)
    return {
        "status": "ok",
        "device": device,
        "default_sm_clock_mhz": default_sm_clock,
        "throttle_threshold": threshold,
        "n_batches": len(batches),
        "dropped_batches": sum(not b.ok for b in batches),
        "flagged_batches": sum(b.ok and bool(b.reasons) for b in batches),
        "reasons": sorted({r for b in batches for r in b.reasons}),
        "sm_clock_mhz": _stats(values("sm_clock_mhz", busy), "min", "median"),
        "mem_clock_mhz": _stats(values("mem_clock_mhz", busy), "min", "median"),
        "max_temperature_c": max(temps) if temps else None,
        "power_w": _stats(values("power_w", busy), "median", "max"),
        **extra,
        "batches": [b.to_dict() for b in batches],
    }


class Telemetry:
    """NVML sampler for one GPU. Never raises: when NVML cannot be used, `available` is False, `reason` says why,
    and `sample()` / `summary()` return the "unavailable" marker.

    index: NVML's device index. NVML ignores CUDA_VISIBLE_DEVICES, so inside a process that sees a subset of the
    GPUs pass `uuid` instead (`str(torch.cuda.get_device_properties(d).uuid)`; `nvml_uuid` adds the prefix).
    nvml: a pynvml-like object (tests pass a fake); default: `import pynvml`. clock: seconds for the "t_s"
    stamp of each sample (default: time.monotonic, relative to construction). keep_power_capped: passed to
    `judge_batch` by `record_batch`.

    Typical use in a timing loop:
        tel = Telemetry(uuid=...)
        before = tel.sample(); <timed batch>; after = tel.sample()
        if not tel.record_batch(before, after).ok: <drop the batch's samples>
        result.telemetry = tel.summary()
    """

    def __init__(self, index: int = 0, *, uuid: str | None = None, nvml: Any = None,
                 clock: Callable[[], float] = time.monotonic, keep_power_capped: bool = False):
        self.keep_power_capped = keep_power_capped
        self.available = False
        self.reason = ""
        self.device_name = ""
        self.default_sm_clock_mhz: float | None = None
        self.max_sm_clock_mhz: float | None = None
        self.power_limit_w: float | None = None
        self.batches: list[BatchTelemetry] = []
        self._clock = clock
        self._t0 = clock()
        self._nvml: Any = None
        self._handle: Any = None
        self._initialized = False
        if nvml is None:
            try:
                nvml = importlib.import_module("pynvml")
            except ImportError:
                self.reason = f"the pynvml module is not installed: {INSTALL_HINT}"
                return
        self._nvml = nvml
        try:
            nvml.nvmlInit()
            self._initialized = True
            self._handle = (nvml.nvmlDeviceGetHandleByUUID(nvml_uuid(uuid)) if uuid is not None
                            else nvml.nvmlDeviceGetHandleByIndex(index))
        except Exception as exc:  # NVMLError (no driver, no device, no library) or anything an odd binding raises
            self.reason = f"NVML cannot open device {uuid or index}: {type(exc).__name__}: {exc}"
            self.close()
            return
        self.available = True
        name = self._call("nvmlDeviceGetName", self._handle)
        self.device_name = name.decode() if isinstance(name, bytes) else str(name or "")
        sm = getattr(nvml, "NVML_CLOCK_SM", _NVML_CLOCK_SM)
        self.max_sm_clock_mhz = self._call("nvmlDeviceGetMaxClockInfo", self._handle, sm)
        # nvbench compares with the default clock; GPUs without applications clocks report only the maximum.
        self.default_sm_clock_mhz = (self._call("nvmlDeviceGetDefaultApplicationsClock", self._handle, sm)
                                     or self.max_sm_clock_mhz)
        limit_mw = self._call("nvmlDeviceGetEnforcedPowerLimit", self._handle)
        self.power_limit_w = limit_mw / 1000.0 if limit_mw is not None else None

    def _call(self, name: str, *args: Any) -> Any:
        """One NVML query, None where the binding lacks the function or the GPU does not support it."""
        fn = getattr(self._nvml, name, None)
        if fn is None:
            return None
        try:
            return fn(*args)
        except Exception:  # NVMLError_NotSupported and friends: the field is absent, the sample is not
            return None

    def sample(self) -> dict[str, Any]:
        """One reading: t_s, sm_clock_mhz, mem_clock_mhz, power_w, temperature_c, throttle_mask and its decoded
        throttle_reasons; a field the GPU does not report is None. The unavailable marker without NVML."""
        if not self.available:
            return unavailable(self.reason)
        nvml, h = self._nvml, self._handle
        sm = getattr(nvml, "NVML_CLOCK_SM", _NVML_CLOCK_SM)
        mem = getattr(nvml, "NVML_CLOCK_MEM", _NVML_CLOCK_MEM)
        gpu = getattr(nvml, "NVML_TEMPERATURE_GPU", _NVML_TEMPERATURE_GPU)
        # Newer NVML calls them clock-event reasons and deprecates the throttle-reasons name; both return the mask.
        mask = self._call("nvmlDeviceGetCurrentClocksEventReasons", h)
        if mask is None:
            mask = self._call("nvmlDeviceGetCurrentClocksThrottleReasons", h)
        power_mw = self._call("nvmlDeviceGetPowerUsage", h)
        return {
            "t_s": round(self._clock() - self._t0, 6),
            "sm_clock_mhz": self._call("nvmlDeviceGetClockInfo", h, sm),
            "mem_clock_mhz": self._call("nvmlDeviceGetClockInfo", h, mem),
            "power_w": power_mw / 1000.0 if power_mw is not None else None,
            "temperature_c": self._call("nvmlDeviceGetTemperature", h, gpu),
            "throttle_mask": mask,
            "throttle_reasons": decode_throttle_reasons(mask) if mask is not None else [],
        }

    def record_batch(self, before: dict[str, Any], after: dict[str, Any]) -> BatchTelemetry:
        """Judge a batch (`judge_batch` against the default SM clock) and keep it for `summary()`."""
        ok, reasons = judge_batch(before, after, self.default_sm_clock_mhz, keep_power_capped=self.keep_power_capped)
        batch = BatchTelemetry(index=len(self.batches), before=before, after=after, ok=ok, reasons=reasons)
        self.batches.append(batch)
        return batch

    def summary(self) -> dict[str, Any]:
        """`summarize_batches` of the recorded batches, for `Result.telemetry`."""
        if not self.available:
            return unavailable(self.reason)
        return summarize_batches(self.batches, self.default_sm_clock_mhz, device=self.device_name,
                                 max_sm_clock_mhz=self.max_sm_clock_mhz, power_limit_w=self.power_limit_w,
                                 keep_power_capped=self.keep_power_capped)

    def close(self) -> None:
        """Shut NVML down; later samples are the unavailable marker."""
        if self.available:
            self.available, self.reason = False, "telemetry was closed"
        if self._initialized:
            self._initialized = False
            self._call("nvmlShutdown")

    def __enter__(self) -> Telemetry:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
