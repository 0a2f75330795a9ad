"""NVML telemetry around timed batches: like nvbench, a batch timed on a throttled GPU is dropped (`judge_batch`);
samples go to `Result.telemetry`. Without `pynvml`, a driver or the device: an "unavailable" marker, never a raise."""

from __future__ import annotations

import importlib
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

#: NVML's clock-event ("throttle") reason bits (its nvmlClocksEventReason* constants).
THROTTLE_REASONS: dict[int, str] = {
    0x001: "gpu_idle", 0x002: "applications_clocks_setting", 0x004: "sw_power_cap", 0x008: "hw_slowdown",
    0x010: "sync_boost", 0x020: "sw_thermal_slowdown", 0x040: "hw_thermal_slowdown",
    0x080: "hw_power_brake_slowdown", 0x100: "display_clock_setting",
}
#: Reasons that say nothing about the timed work.
BENIGN_REASONS = frozenset({"gpu_idle", "applications_clocks_setting", "sync_boost", "display_clock_setting"})
#: Reasons that drop a batch: thermal protection or a hardware slowdown cut the clock.
SLOWDOWN_REASONS = frozenset({"hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"})
# sw_power_cap is neither: a heavy kernel runs at its power limit in production too (flagged).

#: A batch whose SM clock fell below this share of the default SM clock is dropped (nvbench's default 75%).
THROTTLE_THRESHOLD = 0.75
UNAVAILABLE = "unavailable"
INSTALL_HINT = "pip install 'kernel-workbench[gpu]' (or pip install nvidia-ml-py)"

# pynvml's constants, for an injected object that lacks them.
_NVML_CLOCK_SM, _NVML_CLOCK_MEM, _NVML_TEMPERATURE_GPU = 1, 2, 0
_GPU_IDLE, _SW_POWER_CAP = 0x001, 0x004


def decode_throttle_reasons(mask: int) -> list[str]:
    """Names of the bits set in an NVML throttle-reason mask, lowest first ("unknown_0x<bit>" past the table)."""
    names, bit = [], 1
    while bit <= mask:
        if mask & bit:
            names.append(THROTTLE_REASONS.get(bit, f"unknown_0x{bit:x}"))
        bit <<= 1
    return names


def unavailable(reason: str) -> dict[str, Any]:
    return {"status": UNAVAILABLE, "reason": reason}


def is_available(sample: dict[str, Any] | None) -> bool:
    return bool(sample) and sample.get("status") != UNAVAILABLE


def _mask(sample: dict[str, Any]) -> int:
    return int(sample.get("throttle_mask") or 0)


def _idle(sample: dict[str, Any]) -> bool:
    return bool(_mask(sample) & _GPU_IDLE)


def nvml_uuid(uuid: str) -> str:
    """NVML's spelling of a device UUID (torch's lacks the "GPU-" prefix)."""
    uuid = str(uuid)
    return uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"


@dataclass(frozen=True)
class BatchTelemetry:
    """The NVML samples around one timed batch and `judge_batch`'s verdict on it."""

    index: int
    before: dict[str, Any]
    after: dict[str, Any]
    ok: bool  # False: measured on a throttled GPU, dropped
    reasons: tuple[str, ...]  # why it was dropped, or (with ok) flagged

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "reasons": list(self.reasons)}


def judge_batch(before: dict[str, Any], after: dict[str, Any], default_sm_clock: float | None,
                threshold: float = THROTTLE_THRESHOLD, *, keep_power_capped: bool = False,
                ) -> tuple[bool, tuple[str, ...]]:
    """(ok, reasons) for a batch between two samples: not ok on a SLOWDOWN_REASONS bit or a busy SM clock below
    `threshold` x `default_sm_clock` (unless `keep_power_capped` and capped by power); other bits are flagged."""
    samples = [s for s in (before, after) if is_available(s)]
    if not samples:
        return True, ("telemetry-unavailable",)
    mask = _mask(samples[0]) | _mask(samples[-1])  # before | after (one of them where the other is unavailable)
    reasons = [name for name in decode_throttle_reasons(mask) if name not in BENIGN_REASONS]
    ok = not any(name in SLOWDOWN_REASONS for name in reasons)
    busy = [s for s in samples if s.get("sm_clock_mhz") is not None and not _idle(s)]
    low = [s for s in busy if default_sm_clock and s["sm_clock_mhz"] < threshold * default_sm_clock]
    if low:
        reasons.append(f"sm_clock {min(s['sm_clock_mhz'] for s in low):g} MHz < {threshold:.0%} of "
                       f"{default_sm_clock:g} MHz")
        if not (keep_power_capped and all(_mask(s) & _SW_POWER_CAP for s in low)):
            ok = False
    return ok, tuple(reasons)


def _stats(values: Sequence[float], *keys: str) -> dict[str, float] | None:
    funcs: dict[str, Callable[[Sequence[float]], float]] = {"min": min, "median": statistics.median, "max": max}
    return {k: float(funcs[k](values)) for k in keys} if values else None


def summarize_batches(batches: Iterable[BatchTelemetry], default_sm_clock: float | None, *, device: str = "",
                      threshold: float = THROTTLE_THRESHOLD, **extra: Any) -> dict[str, Any]:
    """The dict for `Result.telemetry`: every batch, the dropped and flagged counts, the busy GPU's clocks and power."""
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
    """NVML sampler for one GPU that never raises (`reason` says why it is not `available`). `uuid` rather than
    `index` where CUDA_VISIBLE_DEVICES applies (NVML ignores it); `nvml` a pynvml-like object (tests)."""

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
        self.default_sm_clock_mhz = (self._call("nvmlDeviceGetDefaultApplicationsClock", self._handle, sm)
                                     or self.max_sm_clock_mhz)
        limit_mw = self._call("nvmlDeviceGetEnforcedPowerLimit", self._handle)
        self.power_limit_w = limit_mw / 1000.0 if limit_mw is not None else None

    def _call(self, name: str, *args: Any) -> Any:
        try:
            return getattr(self._nvml, name)(*args)
        except Exception:  # not in this binding, or NVMLError_NotSupported and friends: the field is absent
            return None

    def sample(self) -> dict[str, Any]:
        """One reading; a field the GPU does not report is None."""
        if not self.available:
            return unavailable(self.reason)
        nvml, h = self._nvml, self._handle
        sm = getattr(nvml, "NVML_CLOCK_SM", _NVML_CLOCK_SM)
        mem = getattr(nvml, "NVML_CLOCK_MEM", _NVML_CLOCK_MEM)
        gpu = getattr(nvml, "NVML_TEMPERATURE_GPU", _NVML_TEMPERATURE_GPU)
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
        ok, reasons = judge_batch(before, after, self.default_sm_clock_mhz, keep_power_capped=self.keep_power_capped)
        batch = BatchTelemetry(index=len(self.batches), before=before, after=after, ok=ok, reasons=reasons)
        self.batches.append(batch)
        return batch

    def summary(self) -> dict[str, Any]:
        if not self.available:
            return unavailable(self.reason)
        return summarize_batches(self.batches, self.default_sm_clock_mhz, device=self.device_name,
                                 max_sm_clock_mhz=self.max_sm_clock_mhz, power_limit_w=self.power_limit_w,
                                 keep_power_capped=self.keep_power_capped)

    def close(self) -> None:
        if self.available:
            self.available, self.reason = False, "telemetry was closed"
        if self._initialized:
            self._initialized = False
            self._call("nvmlShutdown")

    def __enter__(self) -> Telemetry:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
