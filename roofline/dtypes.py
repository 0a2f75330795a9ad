"""Which peak a dtype is judged against: torch dtype names (and short names) -> the keys of datasheet peaks and of
measured matmul rates. Shared by the datasheet table (`specs.py`) and the measured ceilings (`ceilings.py`), which
must not import each other.
"""

from __future__ import annotations

#: torch dtype names (and short names) -> peak keys.
DTYPE_KEYS = {
    "float64": "fp64", "double": "fp64", "fp64": "fp64",
    "float32": "fp32", "float": "fp32", "fp32": "fp32", "tf32": "tf32",
    "float16": "fp16", "half": "fp16", "fp16": "fp16",
    "bfloat16": "bf16", "bf16": "bf16",
    "float8_e4m3fn": "fp8", "float8_e5m2": "fp8", "float8_e4m3fnuz": "fp8", "float8_e5m2fnuz": "fp8", "fp8": "fp8",
    "int8": "int8", "uint8": "int8",
}


def dtype_key(dtype: object) -> str:
    """"float16", torch.float16 or "fp16" -> "fp16"; unknown names pass through unchanged."""
    name = str(dtype).removeprefix("torch.")
    return DTYPE_KEYS.get(name, name)
