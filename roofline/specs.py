"""Datasheet peaks of common accelerators, and detection of the device a result ran on.

Every rate is DENSE (no 2:4 structured sparsity: datasheets print the sparse figure first, twice the dense
one) in FLOP/s (int8 in OP/s); bandwidth in bytes/s (decimal TB/s as printed). Keys:

    fp64         FP64 on the vector units          fp64_tensor  FP64 on tensor/matrix cores (IEEE fp64)
    fp32         FP32 on the vector (CUDA) cores   tf32         TF32 tensor cores (10-bit mantissa inputs)
    fp16, bf16   tensor cores, FP32 accumulate     fp8, int8    tensor cores

Datasheet numbers are boost-clock leads that real kernels rarely reach: `roofline.ceilings` measures what the
machine does, and both are shown side by side. An entry lists where its numbers come from in `source`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from roofline.dtypes import DTYPE_KEYS, dtype_key
from workbench.errors import UnknownNameError

if TYPE_CHECKING:
    from roofline.ceilings import Ceilings

T = 1e12
MiB = 1 << 20

#: Kept for older imports.
_DTYPE_KEYS = DTYPE_KEYS


@dataclass(frozen=True)
class DeviceSpec:
    """One device's datasheet (or, with `measured=True`, measured) ceilings."""

    name: str
    vendor: str
    peaks: dict[str, float]
    memory_bandwidth: float
    l2_bytes: int = 0
    sm_count: int = 0
    source: str = ""
    notes: str = ""
    #: Extra names `get_spec` accepts.
    aliases: tuple[str, ...] = ()
    #: Tokens a torch device name must contain (all) / must not contain (any) to be this device.
    requires: tuple[str, ...] = ()
    excludes: tuple[str, ...] = ()
    measured: bool = False
    details: dict = field(default_factory=dict, compare=False)

    def peak(self, dtype: object) -> float:
        """The SOL rate of arithmetic in `dtype`: the fastest path that keeps its precision. fp32 is the CUDA-core
        rate (TF32 tensor cores drop mantissa bits), fp64 the better of vector and fp64 tensor cores (IEEE
        fp64 either way), 16/8-bit types their tensor-core rate. Falls back to fp32 for unknown types."""
        key = dtype_key(dtype)
        if key == "fp64":
            return max(self.peaks.get("fp64", 0.0), self.peaks.get("fp64_tensor", 0.0)) or self._fp32()
        return self.peaks.get(key) or self._fp32()

    def limit(self, dtype: object) -> float:
        """The most any kernel could reach on `dtype` operands: for fp32 that includes TF32 tensor cores (split
        3xTF32 schemes pass fp32 tolerances), for 16-bit types the faster of fp16/bf16 tensor cores. Used by
        the faster-than-physics check, which must never reject a legitimate trick."""
        key = dtype_key(dtype)
        if key == "fp32":
            return max(self._fp32(), self.peaks.get("tf32", 0.0))
        if key in ("fp16", "bf16"):
            return max(self.peak(key), self.peaks.get("fp16", 0.0), self.peaks.get("bf16", 0.0))
        return self.peak(key)

    def ridge(self, dtype: object) -> float:
        """Arithmetic intensity (FLOP/byte) where the memory roof meets the compute roof."""
        return self.peak(dtype) / self.memory_bandwidth

    def _fp32(self) -> float:
        return self.peaks.get("fp32") or max(self.peaks.values(), default=0.0)


def _nv(name, peaks, bw, l2, sms, source, notes="", aliases=(), requires=(), excludes=()):
    return DeviceSpec(name, "NVIDIA", {k: v * T for k, v in peaks.items()}, bw, l2, sms, source, notes,
                      aliases, requires, excludes)


# Dense figures; the sparse ones in the datasheets are exactly twice these tensor-core numbers.
_TABLE: list[DeviceSpec] = [
    _nv("H100 SXM", dict(fp64=34, fp64_tensor=67, fp32=67, tf32=494.7, fp16=989.4, bf16=989.4, fp8=1978.9,
                         int8=1978.9), 3.35e12, 50 * MiB, 132,
        "https://www.nvidia.com/en-us/data-center/h100/ (H100 SXM5 80GB datasheet)",
        aliases=("H100", "H100 SXM5", "H100 80GB HBM3"), requires=("h100",), excludes=("pcie", "nvl")),
    _nv("H100 PCIe", dict(fp64=25.6, fp64_tensor=51.2, fp32=51.2, tf32=378, fp16=756, bf16=756, fp8=1513,
                          int8=1513), 2.0e12, 50 * MiB, 114,
        "https://www.nvidia.com/en-us/data-center/h100/ (H100 PCIe 80GB datasheet)",
        requires=("h100", "pcie")),
    _nv("H200", dict(fp64=34, fp64_tensor=67, fp32=67, tf32=494.7, fp16=989.4, bf16=989.4, fp8=1978.9,
                     int8=1978.9), 4.8e12, 50 * MiB, 132,
        "https://www.nvidia.com/en-us/data-center/h200/ (H200 SXM 141GB datasheet)",
        notes="same GH100 compute as H100 SXM; HBM3e", aliases=("H200 SXM",), requires=("h200",),
        excludes=("nvl",)),
    _nv("A100 SXM 80GB", dict(fp64=9.7, fp64_tensor=19.5, fp32=19.5, tf32=156, fp16=312, bf16=312, int8=624),
        2.039e12, 40 * MiB, 108,
        "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
        "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf (A100 80GB SXM)",
        notes="no fp8", aliases=("A100", "A100-SXM4-80GB"), requires=("a100", "80gb"), excludes=("pcie",)),
    _nv("L4", dict(fp64=0.47, fp32=30.3, tf32=60, fp16=121, bf16=121, fp8=242.5, int8=242.5), 0.3e12,
        48 * MiB, 58, "https://www.nvidia.com/en-us/data-center/l4/ (L4 datasheet)",
        notes="fp64 is 1/64 of fp32 (not printed in the datasheet)", requires=("l4",)),
    _nv("L40S", dict(fp64=1.43, fp32=91.6, tf32=183, fp16=362, bf16=362, fp8=733, int8=733), 0.864e12,
        96 * MiB, 142, "https://www.nvidia.com/en-us/data-center/l40s/ (L40S datasheet)",
        notes="fp64 is 1/64 of fp32 (not printed in the datasheet)", requires=("l40s",)),
    _nv("RTX 4090", dict(fp64=1.29, fp32=82.6, tf32=82.6, fp16=165.2, bf16=165.2, fp8=330.3, int8=660.6),
        1.008e12, 72 * MiB, 128,
        "https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf "
        "(Ada whitepaper, GeForce RTX 4090)",
        notes="tensor rates with FP32 accumulate (GeForce runs FP16-accumulate at twice these)",
        aliases=("GeForce RTX 4090",), requires=("4090",), excludes=("d", "laptop", "mobile")),
    _nv("B200", dict(fp64=37, fp64_tensor=37, fp32=75, tf32=1100, fp16=2250, bf16=2250, fp8=4500, int8=4500),
        8.0e12, 126 * MiB, 148,
        "https://www.nvidia.com/en-us/data-center/hgx/ (HGX B200, per GPU: eight-GPU totals / 8)",
        notes="HGX B200 at 1000 W; later datasheets print 7.7 TB/s for the 180 GB part (8 TB/s kept: the "
              "faster-than-physics check must not be stricter than the hardware)", requires=("b200",),
        excludes=("gb200",)),
]
_TABLE.append(DeviceSpec(
    "MI300X", "AMD", {"fp64": 81.7 * T, "fp64_tensor": 163.4 * T, "fp32": 163.4 * T, "tf32": 653.7 * T,
                      "fp16": 1307.4 * T, "bf16": 1307.4 * T, "fp8": 2614.9 * T, "int8": 2614.9 * T},
    5.3e12, 32 * MiB, 304,
    "https://www.amd.com/en/products/accelerators/instinct/mi300/mi300x.html (MI300X datasheet)",
    notes="sm_count is compute units; l2 is 8 x 4 MB per-XCD L2 (the 256 MB Infinity Cache is not counted)",
    aliases=("Instinct MI300X",), requires=("mi300x",)))

_REGISTRY: dict[str, DeviceSpec] = {}


def _norm(name: str) -> str:
    return re.sub(r"[\s_\-]+", " ", name.strip().lower())


def _tokens(name: str) -> set[str]:
    return set(re.split(r"[\s_\-/()]+", name.lower())) - {""}


def register_spec(spec: DeviceSpec) -> None:
    """Add (or replace) a device; later registrations win name matches over the built-in table."""
    _REGISTRY[spec.name] = spec


for _spec in _TABLE:
    register_spec(_spec)


def specs() -> list[str]:
    """Names in the table (the measured "cpu" entry is built on request, not listed)."""
    return list(_REGISTRY)


def match_device_name(device_name: str) -> DeviceSpec | None:
    """The table entry for a name as torch reports it ("NVIDIA H100 80GB HBM3" -> H100 SXM), None when the
    device is not in the table or is a variant with other clocks/bandwidth (H100 NVL, A100 40GB, GB200)."""
    tokens = _tokens(device_name)
    for spec in reversed(list(_REGISTRY.values())):  # registered later = more specific, checked first
        if spec.requires and all(t in tokens for t in spec.requires) and not any(t in tokens for t in spec.excludes):
            return spec
    return None


def get_spec(name: str) -> DeviceSpec:
    """A table entry by name or alias ("H100 SXM", "h100-sxm"), by torch device name, or "cpu" (measured)."""
    key = _norm(name)
    if key == "cpu":
        return cpu_spec()
    for spec in _REGISTRY.values():
        if key in {_norm(spec.name), *(_norm(a) for a in spec.aliases)}:
            return spec
    matched = match_device_name(name)
    if matched is None:
        raise UnknownNameError("device spec", name, [*_REGISTRY, "cpu"])
    return matched


def from_ceilings(ceilings: Ceilings, name: str | None = None, l2_bytes: int = 0, sm_count: int = 0,
                  notes: str = "") -> DeviceSpec:
    """A spec whose roofs are measured ceilings: for the CPU, and for GPUs that are not in the table."""
    peaks = dict(ceilings.matmul_flops)
    return DeviceSpec(name or ceilings.device_name, "measured", peaks, ceilings.copy_bandwidth, l2_bytes, sm_count,
                      f"measured by roofline.ceilings on {ceilings.measured_at or 'this machine'}",
                      notes or "no datasheet entry: these are measured ceilings, not physical limits", measured=True)


def cpu_spec(refresh: bool = False) -> DeviceSpec:
    """The CPU, measured (CPU datasheets do not give a usable FLOP/s or bandwidth for torch code)."""
    from roofline.ceilings import get_ceilings, last_level_cache_bytes

    c = get_ceilings("cpu", refresh=refresh)
    return from_ceilings(c, "cpu", l2_bytes=last_level_cache_bytes(),
                         notes="measured with torch on this CPU (copy and matmul); not a datasheet")


def detect(device: str | None = None) -> DeviceSpec:
    """The spec of `device` (default: the current CUDA device, else the CPU). A GPU missing from the table gets
    an honest measured spec whose notes say so; the CPU always gets a measured one."""
    import torch

    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if not str(device).startswith("cuda"):
        return cpu_spec()
    props = torch.cuda.get_device_properties(torch.device(device))
    spec = match_device_name(props.name)
    if spec is not None:
        return spec
    from roofline.ceilings import get_ceilings

    return from_ceilings(get_ceilings(device), f"{props.name} (measured)",
                         l2_bytes=int(getattr(props, "L2_cache_size", 0) or 0), sm_count=props.multi_processor_count,
                         notes=f"{props.name} is not in the datasheet table: roofs are measured ceilings")
