"""Precision policy of a task: which reduced-precision shortcuts the library may take, for reference and candidate
alike (docs/verdicts.md, docs/anti-cheating.md, cheat 12).

Why a policy at all. PyTorch's defaults are not IEEE fp32: `torch.backends.cudnn.allow_tf32` is True, so every
fp32 convolution on an Ampere-or-newer GPU multiplies TF32 operands (10-bit mantissa), and fp16/bf16 GEMMs may
reduce in reduced precision. A candidate that rounds to TF32 on purpose would then look exactly as accurate as the
reference, and an honest IEEE candidate would look "wrong" against a TF32 reference. So the judge states the policy:
`ieee` (the default: every shortcut off) or a named relaxation a task opts into, applied around every reference and
candidate call with `applied(policy, device)`, and recorded in every Result by name.

The knobs (all process-global in PyTorch, so `applied` saves and restores them):

    torch.set_float32_matmul_precision          "highest" (IEEE) | "high" (TF32 allowed) | "medium"
    torch.backends.cuda.matmul.allow_tf32       cuBLAS fp32 GEMMs on TF32 tensor cores
    torch.backends.cudnn.allow_tf32             cuDNN fp32 convolutions on TF32 tensor cores (PyTorch default: True)
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction   fp16 GEMM split-K partial sums in fp16
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction   bf16 GEMM split-K partial sums in bf16

On the CPU there is no TF32 hardware: a policy that allows TF32 is *emulated* there (operands of matmul and
convolution rounded to a 10-bit mantissa before the op), so the native reference carries the same error a GPU's
would and the error budget (workbench/eval/judge/output_compare.py) judges CPU runs as it judges GPU runs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import asdict, dataclass, fields
from typing import Any

from workbench.errors import TaskError, UnknownNameError

_MATMUL_PRECISIONS = ("highest", "high", "medium")


@dataclass(frozen=True)
class PrecisionPolicy:
    """What the library may do to fp32 (and fp16/bf16) math. `name` is what Results record and widgets show."""

    name: str
    #: torch.set_float32_matmul_precision: "highest" keeps fp32 GEMMs IEEE.
    float32_matmul_precision: str = "highest"
    matmul_tf32: bool = False
    cudnn_tf32: bool = False
    fp16_reduced_precision_reduction: bool = False
    bf16_reduced_precision_reduction: bool = False

    def __post_init__(self) -> None:
        if not self.name or not isinstance(self.name, str):
            raise TaskError("a PrecisionPolicy needs a short name, e.g. 'ieee' or 'tf32'")
        if self.float32_matmul_precision not in _MATMUL_PRECISIONS:
            raise TaskError(f"precision policy {self.name!r}: float32_matmul_precision must be one of "
                            f"{', '.join(_MATMUL_PRECISIONS)}, not {self.float32_matmul_precision!r}")
        if self.float32_matmul_precision != "highest" and not self.matmul_tf32:
            raise TaskError(f"precision policy {self.name!r}: float32_matmul_precision="
                            f"{self.float32_matmul_precision!r} turns TF32 GEMMs on; set matmul_tf32=True too")

    @property
    def tf32(self) -> bool:
        """Whether any fp32 op may run on TF32 operands."""
        return self.matmul_tf32 or self.cudnn_tf32

    def to_spec(self) -> dict[str, Any]:
        """JSON-able form (tasks travel to worker processes as JSON specs)."""
        return asdict(self)

    @classmethod
    def from_spec(cls, spec: str | dict[str, Any] | PrecisionPolicy | None) -> PrecisionPolicy:
        """A policy from its spec dict, a registered name, a policy, or None (the default, "ieee")."""
        if spec is None:
            return IEEE
        if isinstance(spec, PrecisionPolicy):
            return spec
        if isinstance(spec, str):
            return get_precision(spec)
        if not isinstance(spec, dict):
            raise TaskError(f"a precision policy is a name, a dict or a PrecisionPolicy, not {type(spec).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(spec) - known)
        if unknown:
            raise TaskError(f"precision policy spec has unknown keys {', '.join(unknown)}; known: "
                            f"{', '.join(sorted(known))}")
        return cls(**spec)


#: IEEE fp32 everywhere: the default for every task.
IEEE = PrecisionPolicy("ieee")
#: TF32 allowed in fp32 GEMMs and convolutions; reductions stay full precision.
TF32 = PrecisionPolicy("tf32", float32_matmul_precision="high", matmul_tf32=True, cudnn_tf32=True)
#: Only cuDNN convolutions in TF32 (what PyTorch does by default for convolutions), GEMMs IEEE.
CONV_TF32 = PrecisionPolicy("conv-tf32", cudnn_tf32=True)
#: fp16/bf16 GEMMs may reduce partial sums in reduced precision; fp32 stays IEEE.
REDUCED = PrecisionPolicy("reduced-reductions", fp16_reduced_precision_reduction=True,
                          bf16_reduced_precision_reduction=True)
#: PyTorch's own defaults (cuDNN TF32 on, reduced-precision reductions on): what an unconfigured script gets.
TORCH_DEFAULT = PrecisionPolicy("torch-default", cudnn_tf32=True, fp16_reduced_precision_reduction=True,
                                bf16_reduced_precision_reduction=True)
#: Every shortcut allowed.
FAST = PrecisionPolicy("fast", float32_matmul_precision="high", matmul_tf32=True, cudnn_tf32=True,
                       fp16_reduced_precision_reduction=True, bf16_reduced_precision_reduction=True)

_REGISTRY: dict[str, PrecisionPolicy] = {p.name: p for p in (IEEE, TF32, CONV_TF32, REDUCED, TORCH_DEFAULT, FAST)}


def precisions() -> list[str]:
    """Names of the registered precision policies."""
    return sorted(_REGISTRY)


def get_precision(name: str) -> PrecisionPolicy:
    if name not in _REGISTRY:
        raise UnknownNameError("precision policy", name, list(_REGISTRY))
    return _REGISTRY[name]


def register_precision(policy: PrecisionPolicy) -> None:
    """Add a named policy (a study comparing, say, TF32 GEMMs with IEEE convolutions)."""
    _REGISTRY[policy.name] = policy


def current() -> dict[str, Any]:
    """The process's present settings of every knob the policy controls (to record, or to restore)."""
    import torch

    m = torch.backends.cuda.matmul
    return {
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "matmul_tf32": bool(m.allow_tf32),
        "cudnn_tf32": bool(torch.backends.cudnn.allow_tf32),
        "fp16_reduced_precision_reduction": bool(m.allow_fp16_reduced_precision_reduction),
        "bf16_reduced_precision_reduction": bool(m.allow_bf16_reduced_precision_reduction),
    }


def _set(settings: dict[str, Any]) -> None:
    import torch

    m = torch.backends.cuda.matmul
    # The matmul precision also sets allow_tf32, so it goes first and the explicit flag after it.
    torch.set_float32_matmul_precision(settings["float32_matmul_precision"])
    m.allow_tf32 = settings["matmul_tf32"]
    torch.backends.cudnn.allow_tf32 = settings["cudnn_tf32"]
    m.allow_fp16_reduced_precision_reduction = settings["fp16_reduced_precision_reduction"]
    m.allow_bf16_reduced_precision_reduction = settings["bf16_reduced_precision_reduction"]


def apply(policy: PrecisionPolicy | str | None) -> dict[str, Any]:
    """Set the backend flags of `policy` for the whole process; returns the previous settings for `restore`."""
    policy = PrecisionPolicy.from_spec(policy)
    before = current()
    wanted = {f.name: getattr(policy, f.name) for f in fields(policy) if f.name != "name"}
    _set(wanted)
    return before


def restore(settings: dict[str, Any]) -> None:
    """Put back what `apply` (or `current`) returned."""
    _set(settings)


@contextlib.contextmanager
def applied(policy: PrecisionPolicy | str | None, device: str = "cuda") -> Iterator[PrecisionPolicy]:
    """Run a block under `policy` and restore the previous settings afterwards, even on error. On a CPU device a
    policy that allows TF32 is emulated (operands of matmul/convolution rounded to TF32), as the module doc says."""
    policy = PrecisionPolicy.from_spec(policy)
    before = apply(policy)
    try:
        if policy.tf32 and not str(device).startswith("cuda"):
            with _Tf32Emulation(matmul=policy.matmul_tf32, conv=policy.cudnn_tf32):
                yield policy
        else:
            yield policy
    finally:
        restore(before)


# ---- TF32 on the CPU ---------------------------------------------------------------------------------------------

def round_to_tf32(x: Any) -> Any:
    """fp32 values rounded to TF32's 10-bit mantissa (round to nearest, ties away from zero on the bit pattern, as
    the tensor cores' conversion does to within one unit); other dtypes and non-tensors unchanged."""
    import torch

    if not isinstance(x, torch.Tensor) or x.dtype != torch.float32:
        return x
    bits = x.contiguous().view(torch.int32)
    rounded = ((bits + 0x1000) & ~0x1FFF).view(torch.float32)
    # Inf/NaN keep their bit patterns: rounding must not turn a large finite value's carry into a NaN payload.
    return torch.where(torch.isfinite(x), rounded, x).reshape(x.shape)


def _tf32_ops(matmul: bool, conv: bool) -> set[Any]:
    import torch
    import torch.nn.functional as F

    ops: set[Any] = set()
    if matmul:
        ops |= {torch.matmul, torch.mm, torch.bmm, torch.addmm, torch.baddbmm, torch.addbmm, torch.einsum,
                torch.Tensor.matmul, torch.Tensor.mm, torch.Tensor.bmm, torch.Tensor.__matmul__,
                torch.Tensor.__rmatmul__, F.linear, F.bilinear}
    if conv:
        ops |= {F.conv1d, F.conv2d, F.conv3d, F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d,
                torch.conv1d, torch.conv2d, torch.conv3d, torch.conv_transpose1d, torch.conv_transpose2d,
                torch.conv_transpose3d}
    return ops


def _round_tree(obj: Any) -> Any:
    if isinstance(obj, (list, tuple)):
        return type(obj)(_round_tree(o) for o in obj)
    return round_to_tf32(obj)


class _Tf32Emulation:
    """A torch function mode that rounds the fp32 tensor operands of GEMMs and convolutions to TF32."""

    def __init__(self, matmul: bool, conv: bool):
        from torch.overrides import TorchFunctionMode

        ops = _tf32_ops(matmul, conv)

        class Mode(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                if func in ops:
                    args = _round_tree(args)
                    kwargs = {k: _round_tree(v) for k, v in kwargs.items()}
                return func(*args, **kwargs)

        self._mode = Mode()

    def __enter__(self) -> _Tf32Emulation:
        self._mode.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._mode.__exit__(*exc)
