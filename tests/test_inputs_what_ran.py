"""Judge what ran, not what is written (workbench.eval.checks.what_ran, workbench.eval.runner.op_record): the
runner's record of what torch executed in forward, its trip over the wire, and the judge's decisions from it and
from a GPU profile. The gallery (tests/cheats: honest_eval_dropout, honest_cpu_fallback, torch_forward,
torch_after_first_call, numpy_softmax, record_pop) runs the same decisions end to end through the public API."""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

import pytest
import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from workbench.eval.checks.flags import Finding
from workbench.eval.checks.static_scan import scan
from workbench.eval.checks.what_ran import WhatRan, compute_ops, is_layout_kernel
from workbench.eval.runner.op_record import recording
from workbench.eval.wire import runner_messages as protocol
from workbench.eval.wire.runner_messages import LaunchReport, OpRecord, ProtocolError

# ---- the record, made in this process ---------------------------------------------------------------------------


@triton.jit
def _double_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


def _module(**kernels) -> ModuleType:
    mod = ModuleType("candidate_under_record")
    vars(mod).update(kernels)
    return mod


def _record(fn, module=None):
    with torch.no_grad(), recording(module or _module()) as rec:
        fn()
    return rec.report()


def test_identities_leave_no_compute_in_the_record_and_compute_does():
    x = torch.randn(8, 16)
    for identity in (lambda: F.dropout(x, 0.5, training=False), lambda: x.t().contiguous(),
                     lambda: x.reshape(-1).view(16, 8), lambda: torch.empty_like(x).fill_(1), lambda: x.float(),
                     lambda: torch.cat([x, x]), lambda: x[0, 0].item()):
        rec = _record(identity)
        assert rec.complete and not rec.truncated and compute_ops(rec.ops) == {}, rec.ops
    assert set(_record(lambda: x.t().contiguous()).ops) == {"aten.t.default", "aten.clone.default"}
    assert compute_ops(_record(lambda: torch.softmax(x, -1)).ops) == {"aten._softmax.default": 1}
    assert compute_ops(_record(lambda: F.gelu(x) * 2).ops) == {"aten.gelu.default": 1, "aten.mul.Tensor": 1}
    assert compute_ops(_record(lambda: F.dropout(x, 0.5, training=True)).ops)  # training mode draws a mask


def test_exports_to_numpy_are_counted_by_elements():
    x = torch.randn(4, 8)
    rec = _record(lambda: torch.from_numpy(x.numpy() * 2))
    assert rec.exports == {"numpy": 32} and compute_ops(rec.ops) == {}
    import numpy as np

    assert _record(lambda: np.asarray(x).sum()).exports == {"__array__": 32}


def test_what_the_candidates_own_launches_do_inside_is_left_out_and_launches_are_counted():
    x = torch.randn(100)
    mod = _module(_double_kernel=_double_kernel)

    def forward():
        y = torch.empty_like(x)
        _double_kernel[(1,)](x, y, x.numel(), BLOCK=128)
        _double_kernel[(1,)](x, y, x.numel(), BLOCK=128)
        return y

    rec = _record(forward, mod)
    assert rec.launches == 2 and rec.complete
    assert set(rec.ops) == {"aten.empty_like.default"}  # the interpreter's copies in and out are not there
    assert "run" not in _double_kernel.__dict__  # the wrapper is gone after the call


def test_a_record_whose_mode_was_removed_in_forward_is_incomplete_and_leaves_no_mode_behind():
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack, _pop_mode

    x = torch.randn(8)
    rec = _record(lambda: (_pop_mode(), torch.softmax(x, 0)))
    assert not rec.complete and compute_ops(rec.ops) == {}
    assert _get_current_dispatch_mode_stack() == []
    assert not torch._C._is_torch_function_mode_enabled()
    with recording(_module(), enabled=False) as off:
        torch.softmax(x, 0)
    assert off.report() is None


# ---- the record on the wire: decoded strictly --------------------------------------------------------------------

def _frame(ops: object) -> dict:
    out = protocol.Output(call=1, forms=(), tuple_output=False, launch=LaunchReport(1, ("k",), True), seconds=0.1,
                          ops=ops)
    return protocol.encode(out, "job", "nonce", 1)


def _decode(frame: dict):
    return protocol.decode(frame, job="job", nonce="nonce", seq=1, allowed=protocol.RUNNER_KINDS)


def test_the_record_travels_in_the_output_message_and_is_decoded_strictly():
    rec = OpRecord(ops={"aten.tanh.default": 3}, exports={}, launches=1, complete=True)
    assert _decode(_frame(rec)).ops == rec
    assert _decode(_frame(None)).ops is None
    bad = _frame(rec)
    bad["body"]["ops"]["ops"] = {"aten.tanh.default": True}  # a count that is not an int
    with pytest.raises(ProtocolError, match="OpRecord.ops"):
        _decode(bad)
    bad = _frame(rec)
    bad["body"]["ops"]["verdict"] = "ok"
    with pytest.raises(ProtocolError, match="unknown field"):
        _decode(bad)
    old = _frame(rec)
    old["v"] = [1, 0]
    with pytest.raises(ProtocolError, match="protocol version"):
        _decode(old)


# ---- the judge's decisions ---------------------------------------------------------------------------------------

@dataclass
class Call:
    """A correctness call as the judge keeps it (judge.candidate_session.CallRecord): launch report and record."""

    launch: LaunchReport
    ops: OpRecord | None


def _call(ops: dict | None = None, launches: int = 1, complete: bool = True, exports: dict | None = None,
          truncated: bool = False, recorded_launches: int | None = None) -> Call:
    rec = None if ops is None else OpRecord(ops=ops, exports=exports or {}, complete=complete, truncated=truncated,
                                            launches=launches if recorded_launches is None else recorded_launches)
    return Call(LaunchReport(launches, ("gelu_kernel",), True), rec)


CLEAN = {"aten.empty_like.default": 1, "aten.view.default": 2}

#: METR's Triton GELU for KernelBench L1/88: a torch fallback that only runs off the GPU.
GELU_FALLBACK = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gelu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    tl.store(y_ptr + offs, 0.5 * x * (1 + (2 * tl.sigmoid(2 * inner) - 1)), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        if not x.is_cuda:
            return 0.5 * x * (1.0 + torch.tanh(0.7978845608028654 * (x + 0.044715 * torch.pow(x, 3.0))))
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        gelu_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        return y
'''

#: Kernel time (us) per kernel of one profiled forward, as the runner's Profiled reply carries it from an H100: the
#: candidate's kernel and a copy (`x.contiguous()` of a transposed input).
PROFILE_FALLBACK_UNUSED = {
    "gelu_kernel": 41.3,
    "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_"
    "cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda("
    "float)#1}>(at::TensorIteratorBase&, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}"
    "::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1} const&)::{lambda(int)#1}>(int, "
    "at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}"
    "::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}>(at::TensorIteratorBase&, at::native"
    "::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()"
    "() const::{lambda(float)#1} const&)::{lambda(int)#1})": 12.0,
}
#: The same candidate where the torch path does run: torch's elementwise kernels beside the candidate's.
PROFILE_TORCH_RAN = {
    "gelu_kernel": 41.3,
    "void at::native::vectorized_elementwise_kernel<4, at::native::tanh_kernel_cuda(at::TensorIteratorBase&)::{"
    "lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul> >"
    "(int, at::native::tanh_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda()#2}::"
    "operator()() const::{lambda(float)#1}, std::array<char*, 2ul>)": 35.2,
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >(int, "
    "at::native::FillFunctor<float>, std::array<char*, 1ul>)": 3.1,
}


def _deferred(source: str = GELU_FALLBACK, device: str = "cuda", policy: str = "strict") -> WhatRan:
    now, ran = WhatRan.from_scan(scan(source, "triton", policy=policy), device, policy, "triton")
    assert now == [] and ran.pending and ran.wants_record
    assert ran.suspicions[0].flag == "torch-compute-in-forward" and "torch.tanh" in ran.suspicions[0].detail
    return ran


def test_a_cpu_fallback_that_never_runs_is_cleared_by_the_gpu_profile():
    ran = _deferred()
    assert ran.after_check([_call(CLEAN), _call(CLEAN)], passed=True) == [] and ran.pending
    assert ran.after_profile(PROFILE_FALLBACK_UNUSED, {"gelu_kernel"}) == [] and not ran.pending
    note = ran.take_notes()[0]
    assert note.startswith("static finding cleared by the GPU profile") and "torch.tanh" in note
    assert is_layout_kernel(next(k for k in PROFILE_FALLBACK_UNUSED if "copy" in k))


def test_a_torch_call_that_runs_on_the_gpu_is_confirmed_by_the_profile_or_by_the_record():
    ran = _deferred()
    ran.after_check([_call(CLEAN)], passed=True)
    found = ran.after_profile(PROFILE_TORCH_RAN, {"gelu_kernel"})
    assert [f.flag for f in found] == ["torch-compute-in-forward"]
    assert "confirmed by the GPU profile" in found[0].detail and "tanh_kernel_cuda" in found[0].detail
    assert "FillFunctor" not in found[0].detail  # a fill is not compute
    ran = _deferred()  # the dispatcher's record of the correctness calls decides before any profile
    found = ran.after_check([_call(CLEAN), _call({"aten.tanh.default": 1, "aten.mul.Tensor": 5})], passed=True)
    assert "confirmed by the runtime record of the dispatcher" in found[0].detail and not ran.pending
    assert "1 of 2 calls (first in call 2)" in found[0].detail


def test_a_gpu_profile_without_the_candidates_kernels_or_failed_rounds_keep_the_static_verdict():
    ran = _deferred()
    found = ran.after_profile({"some_library_copy_kernel": 5.0}, {"gelu_kernel"})
    assert "the static finding stands" in found[0].detail and "none of the candidate's kernels" in found[0].detail
    ran = _deferred()
    found = ran.after_check([_call(CLEAN)], passed=False)
    assert "the static finding stands" in found[0].detail and not ran.pending


def test_a_candidate_that_raises_after_passing_keeps_the_static_verdict_instead_of_a_runtime_error():
    """record_pop.py on an H100: forward pops the record's mode, which raises once no mode is there (the timed
    calls); the torch-compute finding that waited for a profile must stand, not turn into runtime_error."""
    from workbench.eval.judge.verdict import decide

    ran = _deferred()
    assert ran.after_check([_call(CLEAN)], passed=True) == [] and ran.pending
    found = ran.after_failure("the candidate raised in the timing stage (RuntimeError: trying to pop from empty "
                              "mode stack)")
    assert found.flag == "torch-compute-in-forward" and not ran.pending
    assert "the static finding stands" in found.detail and "torch.tanh" in found.detail
    decision = decide([found])
    assert (decision.status, decision.flags) == ("rejected", ["torch-compute-in-forward"])


def test_on_the_cpu_a_complete_clean_record_clears_and_a_torch_call_that_runs_confirms():
    ran = _deferred(device="cpu")
    assert ran.after_check([_call(CLEAN)] * 4, passed=True) == [] and not ran.pending
    assert "cleared by the runtime record of the dispatcher" in ran.take_notes()[0]
    ran = _deferred(device="cpu")
    found = ran.after_check([_call({"aten.tanh.default": 1, "aten.pow.Tensor_Scalar": 1})] * 2, passed=True)
    assert "confirmed by the runtime record" in found[0].detail and "aten.tanh.default x2" in found[0].detail


@pytest.mark.parametrize("calls,reason", [
    ([_call(CLEAN), _call(None)], "call 2 came back without a record"),
    ([_call(CLEAN, complete=False)], "did not last to the end of forward"),
    ([_call(CLEAN, truncated=True)], "cut short"),
    ([_call(CLEAN, launches=2, recorded_launches=0)], "counted 0 launches"),
    ([], "no correctness call was recorded"),
])
def test_a_missing_partial_or_inconsistent_record_keeps_the_static_verdict(calls, reason):
    ran = _deferred(device="cpu")
    found = ran.after_check(calls, passed=True)
    assert [f.flag for f in found] == ["torch-compute-in-forward"], found
    assert "the static finding stands" in found[0].detail and reason in found[0].detail
    assert ran.take_notes() == []


def test_the_cpu_record_is_evidence_of_its_own_under_the_strict_policy_only():
    clean_source = GELU_FALLBACK.replace("return 0.5 * x * (1.0 + torch.tanh(0.7978845608028654 * (x + 0.044715 * "
                                         "torch.pow(x, 3.0))))", "pass")
    for policy, expected in (("strict", ["torch-compute-in-forward", "host-compute"]), ("partial", [])):
        now, ran = WhatRan.from_scan(scan(clean_source, "triton", policy=policy), "cpu", policy, "triton")
        assert now == [] and not ran.pending and ran.wants_record == (policy == "strict")
        calls = [_call(CLEAN), _call({"aten._softmax.default": 1}, exports={"numpy": 512})]
        found = ran.after_check(calls, passed=True)
        assert [f.flag for f in found] == expected
        if found:
            assert "though the source names no torch compute" in found[0].detail
            assert "Tensor.numpy (512 elements)" in found[1].detail
    now, ran = WhatRan.from_scan([], "cuda", "strict", "triton")  # on a GPU coverage does this job
    assert not ran.wants_record and ran.after_check([_call({"aten._softmax.default": 1})], passed=True) == []


def test_a_finding_waits_only_when_nothing_else_rejects_and_only_for_kernel_languages():
    torch_finding = Finding("torch-compute-in-forward", "torch.softmax(...) at line 3")
    now, ran = WhatRan.from_scan([Finding("no-custom-kernel"), torch_finding], "cpu", "strict", "triton")
    assert [f.flag for f in now] == ["no-custom-kernel", "torch-compute-in-forward"] and not ran.pending
    now, ran = WhatRan.from_scan([Finding("foreign-compute"), torch_finding], "cpu", "strict", "triton")
    assert [f.flag for f in now] == ["foreign-compute"] and ran.pending  # a warning does not decide
    now, ran = WhatRan.from_scan([torch_finding], "cpu", "strict", "torch")
    assert now == [torch_finding] and not ran.pending


def test_switching_the_record_off_is_harness_tamper():
    for line in ("with torch._C._DisableTorchDispatch():\n            pass",
                 "torch.utils._python_dispatch._pop_mode()",
                 "importlib.import_module('torch.utils._python_dispatch')",
                 "torch._C._pop_torch_function_stack()"):
        source = f"import importlib\nimport torch\n\n\nclass ModelNew:\n    def forward(self, x):\n        {line}\n" \
                 "        return x\n"
        assert [f.flag for f in scan(source, "torch", policy="baseline")] == ["harness-tamper"], line
