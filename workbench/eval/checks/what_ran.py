"""Judge what ran, not what is written (docs/anti-cheating.md, "What ran"): a static `torch-compute-in-forward` finding
waits for the dispatcher's record (CPU) or the profiled forward (GPU). Views, allocations, copies and casts never
count; torch compute in a record confirms it, a clean record clears it only when complete and agreeing with the launch
tracker. On the CPU under "strict" the record also finds unnamed torch compute and numpy/DLPack exports."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from workbench import languages
from workbench.eval.checks.flags import REJECT, Finding
from workbench.eval.checks.runtime import is_own

DEFERRED = "torch-compute-in-forward"

#: ATen operators that view, allocate, fill (random fills too), copy, cast or describe data: everything else computes.
LAYOUT_OPS = frozenset({
    # views and aliases
    "view", "_unsafe_view", "reshape", "_reshape_alias", "as_strided", "expand", "t", "transpose", "permute",
    "select", "slice", "squeeze", "unsqueeze", "alias", "detach", "split", "split_with_sizes", "chunk", "unbind",
    "narrow", "view_as_real", "view_as_complex", "unflatten", "flatten", "movedim", "diagonal", "unfold",
    "_unsafe_split", "lift_fresh", "lift_fresh_copy", "set_", "resize_", "_neg_view", "_conj",
    # allocation and fills
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like", "new_zeros",
    "ones", "ones_like", "new_ones", "full", "full_like", "new_full", "fill_", "zero_", "arange", "scalar_tensor",
    "normal_", "uniform_", "random_", "randn", "rand", "randint", "randperm", "randn_like", "rand_like",
    # copies and casts
    "copy_", "_to_copy", "clone", "_copy_from", "_copy_from_and_resize", "contiguous", "to", "cat", "stack",
    # describing
    "_local_scalar_dense", "sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "is_same_size",
    "_has_compatible_shallow_copy_type", "record_stream",
})

#: Substrings of library kernel names that only copy or fill memory: the GPU counterpart of LAYOUT_OPS.
LAYOUT_KERNEL_MARKERS = ("copy", "fillfunctor", "fill_kernel", "memset", "memcpy")


class CallRecordLike(Protocol):
    """One correctness call as the runner reported it (`CallRecord`)."""

    launch: Any
    ops: Any


def op_name(op: str) -> str:
    """'aten._softmax.default' -> '_softmax'; an operator of another namespace keeps its full name."""
    parts = op.split(".")
    return parts[1] if len(parts) >= 2 and parts[0] == "aten" else op


def compute_ops(ops: dict[str, int]) -> dict[str, int]:
    return {op: n for op, n in ops.items() if op_name(op) not in LAYOUT_OPS}


def is_layout_kernel(name: str) -> bool:
    low = name.lower()
    return any(m in low for m in LAYOUT_KERNEL_MARKERS)


def record_gap(calls: Sequence[CallRecordLike]) -> str:
    """Why the records of these calls cannot clear a static finding ('' when they can)."""
    if not calls:
        return "no correctness call was recorded"
    for k, call in enumerate(calls, 1):
        rec = call.ops
        if rec is None:
            return f"call {k} came back without a record"
        if not rec.complete:
            return f"the record of call {k} did not last to the end of forward"
        if rec.truncated:
            return f"the record of call {k} was cut short"
        if rec.launches != call.launch.launches:
            return (f"the record of call {k} counted {rec.launches} launches of the candidate's kernels where the "
                    f"launch tracker counted {call.launch.launches}")
    return ""


def _summary(per_call: list[dict[str, int]]) -> str:
    """'aten.tanh x20, aten.mul x40 in 10 of 10 calls (first in call 1)' for the calls that ran compute."""
    totals: Counter[str] = Counter()
    for ops in per_call:
        totals.update(ops)
    ran = [k for k, ops in enumerate(per_call, 1) if ops]
    names = ", ".join(f"{op} x{n}" for op, n in totals.most_common(4))
    more = f" and {len(totals) - 4} more" if len(totals) > 4 else ""
    return f"{names}{more} in {len(ran)} of {len(per_call)} calls (first in call {ran[0]})"


@dataclass
class WhatRan:
    """A static torch-compute finding on its way to a verdict (`after_check`, then `after_profile` while `pending`)."""

    suspicions: list[Finding]
    device: str
    policy: str
    language: str
    pending: bool = False
    notes: list[str] = field(default_factory=list)

    @classmethod
    def from_scan(cls, findings: list[Finding], device: str, policy: str,
                  language: str) -> tuple[list[Finding], WhatRan]:
        """(findings to judge now, the deferred decision); nothing waits when another finding rejects already."""
        suspect = [f for f in findings if f.flag == DEFERRED]
        others = [f for f in findings if f.flag != DEFERRED]
        if not languages.get(language).compiled or not suspect or any(f.severity == REJECT for f in others):
            return findings, cls([], device, policy, language)
        return others, cls(suspect, device, policy, language, pending=True)

    @property
    def on_gpu(self) -> bool:
        return self.device.startswith("cuda")

    @property
    def wants_record(self) -> bool:
        return bool(self.suspicions) or (not self.on_gpu and self.policy == "strict"
                                         and languages.get(self.language).interpreted_on_cpu)

    def after_check(self, calls: Sequence[CallRecordLike], passed: bool) -> list[Finding]:
        """Findings from the correctness calls' records (on a GPU a clean one leaves the decision to the profile)."""
        per_call = [compute_ops(c.ops.ops) if c.ops is not None else {} for c in calls]
        ran = any(per_call)
        findings: list[Finding] = []
        if self.pending and ran:
            findings.append(self._decided(f"confirmed by the runtime record of the dispatcher: torch ran "
                                          f"{_summary(per_call)}"))
        elif self.pending and self.on_gpu and not passed:
            findings.append(self._decided("the static finding stands: the correctness rounds failed before a GPU "
                                          "profile could show what ran"))
        elif self.pending and not self.on_gpu:
            if gap := record_gap(calls):
                findings.append(self._decided(f"the static finding stands: {gap}"))
            else:
                self._clear(f"the runtime record of the dispatcher: no torch compute ran in forward in any of "
                            f"{len(calls)} calls (views, copies and allocations do not count)")
        elif ran and not self.suspicions and not self.on_gpu and self.policy == "strict":
            findings.append(Finding(DEFERRED, f"the runtime record of the dispatcher shows torch computing in forward "
                                              f"though the source names no torch compute: {_summary(per_call)}"))
        if not self.on_gpu and self.policy == "strict":
            findings += _exports(calls)
        return findings

    def after_profile(self, kernels: dict[str, float], own: set[str]) -> list[Finding]:
        """Decide a pending finding from one profiled forward (kernel microseconds by name)."""
        if not self.pending:
            return []
        total = sum(kernels.values())
        foreign = {k: us for k, us in kernels.items() if us > 0 and not is_own(k, own) and not is_layout_kernel(k)}
        mine = sum(us for k, us in kernels.items() if is_own(k, own))
        if foreign:
            top = sorted(foreign.items(), key=lambda kv: -kv[1])[:3]
            names = ", ".join(f"{_short(k)} {us:.1f} us" for k, us in top)
            return [self._decided(f"confirmed by the GPU profile: library kernels ran in a profiled forward ({names} "
                                  f"of {total:.1f} us)")]
        if mine <= 0:
            return [self._decided("the static finding stands: the GPU profile of a forward shows none of the "
                                  "candidate's kernels")]
        self._clear("the GPU profile: a profiled forward ran only the candidate's kernels"
                    + (" and copies or fills" if total > mine else ""))
        return []

    def after_failure(self, how: str) -> Finding:
        """The pending finding, decided: no profile can clear it now."""
        return self._decided(f"the static finding stands: {how}")

    def take_notes(self) -> list[str]:
        notes, self.notes = self.notes, []
        return notes

    def _decided(self, how: str) -> Finding:
        self.pending = False
        static = self.suspicions[0]
        return Finding(static.flag, f"{static.detail}; {how}")

    def _clear(self, evidence: str) -> None:
        self.pending = False
        self.notes.append(f"static finding cleared by {evidence}: {self.suspicions[0].detail} did not run "
                          "or was an identity")


#: ATen's generic launch templates: a kernel named after one of them is told apart by the functor it runs.
_WRAPPERS = {"vectorized_elementwise_kernel", "elementwise_kernel", "unrolled_elementwise_kernel",
             "gpu_kernel_impl_nocast", "gpu_kernel_impl", "elementwise_kernel_with_index", "reduce_kernel"}


def _short(kernel: str) -> str:
    """A library kernel's telling name (ATen's templates named by their functor)."""
    base = languages.base_name(kernel)
    if base in _WRAPPERS:
        inner = [n for n in re.findall(r"at::native::(?:\(anonymous namespace\)::)?(\w+)", kernel)
                 if n not in _WRAPPERS]
        if inner:
            return f"{base}<{inner[0]}>"
    return base[:60]


def _exports(calls: Sequence[CallRecordLike]) -> list[Finding]:
    """`host-compute` when forward handed more than one element of tensor data to numpy or DLPack."""
    for k, call in enumerate(calls, 1):
        exported = {name: n for name, n in (call.ops.exports if call.ops is not None else {}).items() if n > 1}
        if exported:
            what = ", ".join(f"Tensor.{name} ({n} elements)" for name, n in exported.items())
            return [Finding("host-compute", f"on the CPU, the runtime record shows forward handing tensor data to "
                                            f"another library outside the candidate's kernels in call {k}: {what}")]
    return []
