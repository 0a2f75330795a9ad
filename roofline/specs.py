"""Datasheet peaks of common accelerators, and detection of the current device.

Rates are dense (no 2:4 sparsity), in FLOP/s; bandwidth in bytes/s. "fp32" is the CUDA-core rate, "tf32",
"fp16", "bf16", "fp8", "int8" the tensor-core rates. Sources: the vendors' datasheets/whitepapers named in
`source`. Datasheet numbers are leads; `roofline.ceilings` measures the real ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from workbench.errors import UnknownNameError

T = 1e12


@dataclass(frozen=True)
class DeviceSpec:
    name: str
    vendor: str
    peaks: dict[str, float]
    memory_bandwidth: float
    l2_bytes: int = 0
    sm_count: int = 0
    source: str = ""
    notes: str = ""
    aliases: tuple[str, ...] = field(default=())

    def peak(self, dtype: str) -> float:
        """Peak rate for a dtype name ("float16", "fp16", "bfloat16", ...); falls back to fp32."""
        key = _DTYPE_KEYS.get(dtype, dtype)
        return self.peaks.get(key) or self.peaks["fp32"]

    def ridge(self, dtype: str) -> float:
        """Arithmetic intensity (FLOP/byte) where the memory roof meets the compute roof."""
        return self.peak(dtype) / self.memory_bandwidth


_DTYPE_KEYS = {"float64": "fp64", "float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "tf32": "tf32",
               "float8_e4m3fn": "fp8", "float8_e5m2": "fp8", "int8": "int8"}

_SPECS = [
    DeviceSpec("H100 SXM", "NVIDIA", {"fp64": 67 * T, "fp32": 67 * T, "tf32": 495 * T, "fp16": 989 * T, "bf16": 989 * T,
                                       "fp8": 1979 * T, "int8": 1979 * T}, 3.35e12, 50 * 2**20, 132,
               "NVIDIA H100 Tensor Core GPU datasheet (SXM5)", aliases=("H100 80GB HBM3", "H100 SXM5", "H100")),
    DeviceSpec("H100 PCIe", "NVIDIA", {"fp64": 51 * T, "fp32": 51 * T, "tf32": 378 * T, "fp16": 756 * T, "bf16": 756 * T,
                                        "fp8": 1513 * T, "int8": 1513 * T}, 2.0e12, 50 * 2**20, 114,
               "NVIDIA H100 Tensor Core GPU datasheet (PCIe)", aliases=("H100 PCIe",)),
    DeviceSpec("H200", "NVIDIA", {"fp64": 67 * T, "fp32": 67 * T, "tf32": 495 * T, "fp16": 989 * T, "bf16": 989 * T,
                                   "fp8": 1979 * T, "int8": 1979 * T}, 4.8e12, 60 * 2**20, 132,
               "NVIDIA H200 Tensor Core GPU datasheet (SXM)", aliases=("H200",)),
    DeviceSpec("A100 SXM 80GB", "NVIDIA", {"fp64": 19.5 * T, "fp32": 19.5 * T, "tf32": 156 * T, "fp16": 312 * T,
                                            "bf16": 312 * T, "int8": 624 * T}, 2.039e12, 40 * 2**20, 108,
               "NVIDIA A100 Tensor Core GPU datasheet (SXM 80GB)", aliases=("A100-SXM4-80GB", "A100 80GB", "A100")),
    DeviceSpec("L4", "NVIDIA", {"fp64": 0.49 * T, "fp32": 30.3 * T, "tf32": 60 * T, "fp16": 121 * T, "bf16": 121 * T,
                                 "fp8": 242.5 * T, "int8": 242.5 * T}, 0.3e12, 48 * 2**20, 58, "NVIDIA L4 datasheet",
               aliases=("L4",)),
    DeviceSpec("L40S", "NVIDIA", {"fp64": 1.4 * T, "fp32": 91.6 * T, "tf32": 183 * T, "fp16": 362 * T, "bf16": 362 * T,
                                   "fp8": 733 * T, "int8": 733 * T}, 0.864e12, 96 * 2**20, 142, "NVIDIA L40S datasheet",
               aliases=("L40S",)),
    DeviceSpec("RTX 4090", "NVIDIA", {"fp64": 1.29 * T, "fp32": 82.6 * T, "tf32": 82.6 * T, "fp16": 165 * T,
                                       "bf16": 165 * T, "fp8": 330 * T, "int8": 661 * T}, 1.008e12, 72 * 2**20, 128,
               "NVIDIA Ada Lovelace architecture whitepaper (GeForce RTX 4090, dense, fp32 accumulate)",
               aliases=("GeForce RTX 4090", "RTX 4090")),
    DeviceSpec("B200", "NVIDIA", {"fp64": 40 * T, "fp32": 80 * T, "tf32": 1100 * T, "fp16": 2250 * T, "bf16": 2250 * T,
                                   "fp8": 4500 * T, "int8": 4500 * T}, 8.0e12, 126 * 2**20, 148,
               "NVIDIA DGX B200 / HGX B200 datasheet, per GPU, dense", aliases=("B200",)),
    DeviceSpec("MI300X", "AMD", {"fp64": 81.7 * T, "fp32": 163.4 * T, "tf32": 653.7 * T, "fp16": 1307.4 * T,
                                  "bf16": 1307.4 * T, "fp8": 2614.9 * T, "int8": 2614.9 * T}, 5.3e12, 256 * 2**20, 304,
               "AMD Instinct MI300X datasheet (dense; L2 here is the 256 MB Infinity Cache)", aliases=("MI300X",)),
]
_BY_NAME = {s.name: s for s in _SPECS}


def specs() -> list[str]:
    return [s.name for s in _SPECS]


def get_spec(name: str) -> DeviceSpec:
    if name in _BY_NAME:
        return _BY_NAME[name]
    matched = match_device_name(name)
    if matched is None:
        raise UnknownNameError("device spec", name, list(_BY_NAME))
    return matched


def register_spec(spec: DeviceSpec) -> None:
    _SPECS.insert(0, spec)
    _BY_NAME[spec.name] = spec


def match_device_name(device_name: str) -> DeviceSpec | None:
    """The table entry for a name as torch reports it ("NVIDIA H100 80GB HBM3" -> H100 SXM)."""
    low = device_name.lower()
    if "h100" in low and "pcie" in low:
        return _BY_NAME["H100 PCIe"]
    best, best_len = None, 0
    for spec in _SPECS:
        for alias in (spec.name, *spec.aliases):
            if alias.lower() in low and len(alias) > best_len:
                best, best_len = spec, len(alias)
    return best


def detect(device: str | None = None) -> DeviceSpec:
    """The current device's spec: the table entry for a known GPU, else one built from measured ceilings."""
    import torch

    if (device or "").startswith("cuda") or (device is None and torch.cuda.is_available()):
        props = torch.cuda.get_device_properties(torch.device(device or "cuda"))
        spec = match_device_name(props.name)
        if spec is not None:
            return spec
        return _from_measurement(device or "cuda", f"{props.name} (not in the table; measured)",
                                 l2=int(getattr(props, "L2_cache_size", 0)), sms=props.multi_processor_count)
    return _from_measurement("cpu", "cpu (measured)")


def _from_measurement(device: str, name: str, l2: int = 0, sms: int = 0) -> DeviceSpec:
    from roofline.ceilings import get_ceilings

    c = get_ceilings(device)
    peaks = {k: v for k, v in c.matmul_flops.items()}
    peaks.setdefault("fp32", max(peaks.values()) if peaks else 1e9)
    return DeviceSpec(name, "measured", peaks, c.copy_bandwidth, l2, sms, "measured by roofline.ceilings",
                      notes="no datasheet entry: these are measured ceilings")
