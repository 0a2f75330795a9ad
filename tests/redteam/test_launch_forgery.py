"""Forged launch evidence (docs/anti-cheating.md, cheats 5, 26; issue 22 item 3): a Triton candidate that never lets its own kernel
do the work, computes with torch fetched by name, and makes the runner's launch report say otherwise.

The runner is the candidate's own process, so everything it reports can be rewritten there. The runner binds its
launch accounting before the candidate is imported and checks, when it reports, that the hooks it installed are
still the ones in place (`harness-tamper` otherwise); the judge then corroborates every launch the runner reports
with what it measures itself: on the CPU the runner's CPU time, read from /proc, must cover the Triton
interpreter's cost of the launches reported (`unverified-evidence` otherwise). A strict-policy "ok" needs that.

Every attack below got "ok" under the strict policy on the CPU before; each must now be rejected, harm nothing, and
leave the next candidate's verdict alone. Spellings are assembled on purpose: the static scan must not be what
stops them.
"""

from __future__ import annotations

import time

import pytest

import workbench as wb
from redteam.attacks import HONEST, evaluate, softmax_task

#: A decoy: a real kernel is defined (the static checks see one) but the work is torch's softmax, fetched by name
#: so no torch compute appears in the source.
DECOY = '''
import importlib

import torch.nn as nn
import triton
import triton.language as tl

_torch = importlib.import_module("to" + "rch")
_softmax = getattr(_torch, "soft" + "max")
{prelude}


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=-float("inf"))
    e = tl.exp(x - tl.max(x, 0))
    tl.store(y_ptr + row * n_cols + cols, e / tl.sum(e, 0), mask=cols < n_cols)


class ModelNew(nn.Module):
    def forward(self, x):
{forward}
'''


def decoy(prelude: str = "", forward: str = "return _softmax(x, -1)") -> wb.Candidate:
    body = "".join(f"        {line}\n" for line in forward.strip("\n").splitlines())
    return wb.Candidate(source=DECOY.format(prelude=prelude, forward=body.rstrip("\n")), language="triton")


def rejected_for_evidence(res: wb.Result, flags: set[str]) -> None:
    assert res.status == "rejected", (res.status, res.flags, res.message)
    assert set(res.flags) & flags, (res.flags, res.message)
    assert res.evidence.get("launches") != "corroborated", res.evidence


def test_a_plain_decoy_is_still_a_decoy():
    res = evaluate(decoy())
    assert res.status == "rejected" and "decoy-kernel" in res.flags, (res.flags, res.message)


# ---- 1. the report function, replaced through an assembled import name (the attack) --------------------

REPLACED_REPORT = '''
_launches = importlib.import_module("work" + "bench.eval.run" + "ner.launches")
_real_report = _launches.report


def _forged_report(log, *args, **kwargs):
    real = _real_report(log, *args, **kwargs)
    fields = dict(vars(real)) if hasattr(real, "__dict__") else {
        k: getattr(real, k) for k in real.__dataclass_fields__}
    fields.update(launches=1, outputs_launched=True, outputs_prefilled_unchanged=False)
    return type(real)(**fields)


_launches.report = _forged_report
'''


def test_a_report_function_replaced_by_module_attribute_fools_nothing():
    # The runner reports through its own copy (so this is a plain decoy), and the seal names the replacement.
    res = evaluate(decoy(REPLACED_REPORT))
    rejected_for_evidence(res, {"harness-tamper"})
    assert "decoy-kernel" in res.flags and "workbench.eval.runner.launches.report" in res.message, res.message


# ---- 2. frame walks: the tracker's own log, and the runner's bound report function -------------------------------

FRAME_WALK = '''
import sys as _sys
_frame = getattr(_sys, "_get" + "frame")
_back, _locals, _globals = "f_" + "back", "f_" + "locals", "f_" + "globals"
'''

# Finds the launch log of the call in the runner's frame and writes into it what a launch would have: a launch of
# the candidate's kernel and the output's storage among the launched tensors.
FORGE_LOG = '''
y = _softmax(x, -1)
f = _frame()
while f is not None:
    for value in list(getattr(f, _locals).values()):
        if hasattr(value, "launches") and hasattr(value, "storages"):
            value.launches.append("softmax_kernel")
            getattr(value.storages, "ad" + "d")(getattr(y, "untyped_" + "storage")().data_ptr())
    f = getattr(f, _back)
return y
'''


def test_a_forged_launch_log_written_from_a_frame_walk_is_not_corroborated():
    res = evaluate(decoy(FRAME_WALK, FORGE_LOG))
    rejected_for_evidence(res, {"unverified-evidence", "harness-tamper"})
    assert res.evidence.get("launches") == "contradicted", res.evidence


# Replaces, in every module the frames reach, whatever the runner reports launches with (a function named `report`,
# or a module holding one), however it was bound.
FORGE_BOUND_REPORT = '''
def _forged(log, *args, **kwargs):
    real = _forged.real(log, *args, **kwargs)
    fields = {k: getattr(real, k) for k in real.__dataclass_fields__}
    fields.update(launches=1, outputs_launched=True, outputs_prefilled_unchanged=False, tampered=())
    fields = {k: v for k, v in fields.items() if k in real.__dataclass_fields__}
    return type(real)(**fields)


f = _frame()
while f is not None:
    g = getattr(f, _globals)
    for key, value in list(g.items()):
        if callable(value) and getattr(value, "__name__", "") == "report" and value is not _forged:
            _forged.real = value
            g[key] = _forged
        elif hasattr(value, "report") and callable(getattr(value, "report")) and \\
                getattr(value, "report") is not _forged and type(value).__name__ == "module":
            _forged.real = value.report
            value.report = _forged
    f = getattr(f, _back)
return _softmax(x, -1)
'''


def test_the_runners_bound_report_function_replaced_from_a_frame_walk_is_not_corroborated():
    res = evaluate(decoy(FRAME_WALK, FORGE_BOUND_REPORT))
    rejected_for_evidence(res, {"unverified-evidence", "harness-tamper", "decoy-kernel"})


# ---- 3. the channel: Output frames rewritten on their way out (job id, nonce and sequence kept) -------------------

# The runner sends through its own bound copy of the channel's writer, so this goes one level down: the JSON encoder
# every frame passes through rewrites the launch report of each Output.
REWRITE_OUTPUT_FRAMES = '''
_json = importlib.import_module("js" + "on")
_dumps = _json.dumps


def _forged_dumps(obj, *args, **kwargs):
    if isinstance(obj, dict) and obj.get("kind") == "output" and isinstance(obj.get("body"), dict):
        launch = obj["body"].get("launch")
        if isinstance(launch, dict):
            launch.update(launches=1, outputs_launched=True, outputs_prefilled_unchanged=False,
                          outputs_changed_after_launch=False, tampered=[])
    return _dumps(obj, *args, **kwargs)


_json.dumps = _forged_dumps
'''


def test_launch_reports_rewritten_in_the_channel_writer_are_not_corroborated():
    res = evaluate(decoy(REWRITE_OUTPUT_FRAMES))
    rejected_for_evidence(res, {"unverified-evidence"})
    assert res.evidence["launches"] == "contradicted" and "probe call" in res.message, res.message


# ---- 4. the launch itself: Triton's interpreter entry replaced by torch compute -----------------------------------

# Every launch of the candidate's kernel goes through the tracker (counted, its tensors recorded), but Triton's
# interpreter is replaced by a function that writes torch's softmax into the output: the "kernel" wrote its output.
REPLACED_INTERPRETER = '''
_interpreter = importlib.import_module("tri" + "ton.runtime.inter" + "preter")


def _fake_launch(self, *args, **kwargs):
    x, y = args[0], args[1]
    getattr(y, "co" + "py_")(_softmax(x, -1).reshape(y.shape))


_interpreter.GridExecutor.__call__ = _fake_launch
'''
LAUNCH_INTO_EMPTY = '''
y = _torch.empty_like(x)
softmax_kernel[(x.shape[0],)](x, y, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
return y
'''


def test_an_interpreter_replaced_by_torch_compute_is_caught():
    # Caught twice over: the seal sees Triton's launch entry replaced, and the probe calls burn nothing.
    res = evaluate(decoy(REPLACED_INTERPRETER, LAUNCH_INTO_EMPTY))
    rejected_for_evidence(res, {"harness-tamper"})
    assert "unverified-evidence" in res.flags and "GridExecutor.__call__" in res.message, res.message
    assert res.evidence["launches"] == "contradicted", res.evidence


# ---- 5. the tracker's own view of memory ----------------------------------------------------------------------

# The output is torch's, handed to a kernel that stores nothing; torch.equal is patched so the tracker believes the
# launch changed it.
TOUCH_KERNEL = '''
@triton.jit
def touch_kernel(y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(y_ptr + offs, mask=offs < n, other=0.0)
    tl.store(y_ptr + offs, v, mask=(offs < n) & (v != v))
'''
PATCHED_EQUAL = '''
setattr(_torch, "eq" + "ual", lambda a, b: False)
''' + TOUCH_KERNEL
TOUCH = '''
y = _softmax(x, -1)
touch_kernel[(1,)](y, y.numel(), BLOCK=16)
return y
'''


def test_patching_torch_equal_does_not_make_a_noop_launch_look_like_it_wrote_the_output():
    res = evaluate(decoy(PATCHED_EQUAL, TOUCH))
    assert res.status == "rejected" and "decoy-kernel" in res.flags, (res.flags, res.message)


# The kernel launches on the empty output (so the output was "given to a launch"), then torch overwrites it.
OVERWRITE_AFTER_LAUNCH = '''
y = _torch.empty_like(x)
softmax_kernel[(x.shape[0],)](x, y, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
getattr(y, "co" + "py_")(_softmax(x * 1.0, -1))
return y
'''


def test_an_output_overwritten_after_its_launch_is_a_decoy():
    res = evaluate(decoy(forward=OVERWRITE_AFTER_LAUNCH))
    assert res.status == "rejected" and "decoy-kernel" in res.flags, (res.flags, res.message)
    assert "after" in res.message


# Honest on the first call (an in-place kernel rewrites a clone of the input, so the tracker's per-module history
# records a kernel that rewrote a prefilled output), then torch's output passed through a kernel that stores nothing.
HONEST_ONCE = TOUCH_KERNEL + """
_calls = [0]
"""
CHEAT_AFTER_ONCE = '''
_calls[0] += 1
if _calls[0] == 1:
    y = getattr(x, "clo" + "ne")()
    softmax_kernel[(x.shape[0],)](y, y, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
    return y
y = _softmax(x, -1)
touch_kernel[(1,)](y, y.numel(), BLOCK=16)
return y
'''


def test_one_honest_rewrite_does_not_excuse_every_later_passthrough():
    res = evaluate(decoy(HONEST_ONCE, CHEAT_AFTER_ONCE))
    assert res.status == "rejected" and "decoy-kernel" in res.flags, (res.flags, res.message)


# ---- the honest controls, and no harm -------------------------------------------------------------------------

def test_the_honest_kernel_is_ok_with_corroborated_launches():
    res = evaluate(wb.Candidate(source=HONEST, language="triton"))
    assert res.status == "ok", res.message
    assert res.evidence.get("launches") == "corroborated" and res.evidence.get("outputs") == "judge", res.evidence
    assert "probe call" in res.protocol["evidence"]["launches"], res.protocol.get("evidence")


@pytest.mark.parametrize("prelude,forward", [
    (REPLACED_REPORT, "return _softmax(x, -1)"),
    (REPLACED_INTERPRETER, LAUNCH_INTO_EMPTY),
], ids=["report", "interpreter"])
def test_a_forger_harms_nothing_and_the_next_candidate_is_judged_on_its_own(prelude, forward, tmp_path):
    import hashlib
    import importlib.util
    from pathlib import Path

    # What the forgers patch lives in their runner's memory only: the files behind it, here, stay as they were.
    files = [Path(importlib.util.find_spec(m).origin) for m in
             ("workbench.eval.runner.launches", "triton.runtime.interpreter", "workbench.eval.runner.main")]
    digests = [hashlib.sha256(f.read_bytes()).hexdigest() for f in files]
    store = wb.Store(tmp_path / "r.db")
    forged = wb.evaluate(softmax_task(), decoy(prelude, forward), device="cpu", time_it=False, store=store)
    assert forged.status == "rejected"
    assert [hashlib.sha256(f.read_bytes()).hexdigest() for f in files] == digests
    # The runner goes with its evaluation: the judge ends it right after the reply (the caller does not wait for it).
    runner = Path(f"/proc/{forged.protocol['runner_pid']}/cmdline")

    def runner_alive() -> bool:
        try:
            return b"workbench" in runner.read_bytes()
        except OSError:  # gone
            return False

    deadline = time.monotonic() + 20
    while runner_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not runner_alive()
    honest = wb.evaluate(softmax_task(), wb.Candidate(source=HONEST, language="triton"), device="cpu",
                         time_it=False, store=store)
    assert honest.status == "ok" and honest.flags == [], honest.message
    # Both verdicts, with the evidence they rest on, are what the store gives back.
    frame = store.frame()
    assert list(frame["status"]) == ["rejected", "ok"]
    again = store.get(int(frame["id"].iloc[-1]))
    assert again.evidence == honest.evidence and again.evidence["launches"] == "corroborated"
