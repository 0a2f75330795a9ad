"""Forged times and hidden work (docs/anti-cheating.md, cheats 23-25): the runner is the candidate's process, so everything it
reports about time can be rewritten there. Each attack below fooled the verdict when the runner's own clock decided
(fake speedups of 3x to 24x on this task); the judge's clock around each batch must now either catch it
(`timer-patch`, `result-cache`) or leave it no faster than the honest control.

The task is the built-in softmax at 64x256 (fp32) on the CPU wall clock; candidates are PyTorch, which that task
allows, so their times are compared with the reference's.
"""

from __future__ import annotations

import os

import pytest

import workbench as wb

SIZE = {"batch_size": 64, "dim": 256}

HONEST = '''
import torch
import torch.nn as nn
{prelude}

class ModelNew(nn.Module):
    def forward(self, x):
{forward}
        e = torch.exp(x - x.amax(dim=-1, keepdim=True))
        return e / e.sum(dim=-1, keepdim=True)
'''


def candidate(prelude: str = "", forward: str = "") -> wb.Candidate:
    body = "".join(f"        {line}\n" for line in forward.strip("\n").splitlines())
    return wb.Candidate(source=HONEST.format(prelude=prelude, forward=body.rstrip("\n") or "        pass"),
                        language="torch")


def evaluate(cand: wb.Candidate) -> wb.Result:
    return wb.evaluate(wb.get_task("softmax"), cand, device="cpu", size=SIZE)


@pytest.fixture(scope="module")
def honest() -> wb.Result:
    res = evaluate(candidate())
    assert res.status == "ok" and res.speedup is not None, res.message
    return res


def caught_or_no_faster(res: wb.Result, honest: wb.Result, flags: set[str]) -> None:
    """The attack is rejected with one of `flags`, or its speedup is no better than the honest control's."""
    if res.status == "rejected":
        assert set(res.flags) & flags, (res.flags, res.message)
        return
    assert res.status == "ok", (res.status, res.message)
    assert res.speedup is not None, res.message
    control = honest.speedup
    if res.speedup >= 1.5 * control:
        # CPU walls move with the host's load: the control, measured earlier, is measured once more beside the
        # attack and its better speedup is the bar (the attack itself is not re-run).
        again = evaluate(candidate())
        control = max(control, again.speedup or 0.0)
    assert res.speedup < 1.5 * control, (res.speedup, honest.speedup, control)


# ---- 1. the runner's clock ---------------------------------------------------------------------------------------

SLOW_PRIVATE_CLOCK = '''
_t = __import__("work" + "bench.eval.wire.timed_loop", fromlist=["x"])
_real = _t._perf_ns
_t._perf_ns = lambda: _real() // 24
'''

REWRITE_TIMING_FRAMES = '''
_tr = __import__("work" + "bench.eval.wire.transport", fromlist=["x"])
_send = _tr.Channel.send
def _forged(self, obj, fds=()):
    if isinstance(obj, dict) and obj.get("kind") == "samples":
        body = obj["body"]
        body["stream_ms"] = [v / 24 for v in body["stream_ms"]]
        body["device_ms"] = [v / 24 for v in body["device_ms"]]
    return _send(self, obj, fds)
_tr.Channel.send = _forged
'''

# Python's clocks end in libc's clock_gettime, called through the PLT of libpython (or of the interpreter itself):
# point that GOT slot at a callback that divides every reading by 24. Native: no check of Python bindings sees it.
GOT_CLOCK = '''
import ctypes as _ct, struct as _st
_libc = _ct.CDLL(None, use_errno=True)
_real = _libc.clock_gettime
_real.argtypes, _real.restype = [_ct.c_int, _ct.c_void_p], _ct.c_int
class _TS(_ct.Structure):
    _fields_ = [("s", _ct.c_long), ("ns", _ct.c_long)]
_CB = _ct.CFUNCTYPE(_ct.c_int, _ct.c_int, _ct.POINTER(_TS))
def _slow(clk, ts):
    r = _real(clk, ts)
    total = (ts[0].s * 1000000000 + ts[0].ns) // 24
    ts[0].s, ts[0].ns = divmod(total, 1000000000)
    return r
_cb = _CB(_slow)
_patched = []
def _patch(path, base):
    data = open(path, "rb").read()
    if data[:4] != b"\\x7fELF":
        return
    e_type = _st.unpack_from("<H", data, 16)[0]
    shoff, = _st.unpack_from("<Q", data, 40)
    shentsize, shnum = _st.unpack_from("<HH", data, 58)
    secs = [_st.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    for sec in secs:
        if sec[1] != 4:  # SHT_RELA
            continue
        dynsym = secs[sec[6]]
        dynstr = secs[dynsym[6]]
        for off in range(sec[4], sec[4] + sec[5], 24):
            r_offset, r_info, _ = _st.unpack_from("<QQq", data, off)
            sym = r_info >> 32
            st_name = _st.unpack_from("<I", data, dynsym[4] + sym * 24)[0]
            end = data.index(b"\\0", dynstr[4] + st_name)
            if data[dynstr[4] + st_name:end] != b"clock_gettime":
                continue
            addr = (base if e_type == 3 else 0) + r_offset
            page = addr & ~4095
            _libc.mprotect(_ct.c_void_p(page), 8192, 3)
            _ct.c_void_p.from_address(addr).value = _ct.cast(_cb, _ct.c_void_p).value
            _patched.append(path)
_seen = {}
for line in open("/proc/self/maps"):
    parts = line.split()
    if len(parts) >= 6 and parts[5].startswith("/") and ("python" in parts[5]):
        _seen.setdefault(parts[5], int(parts[0].split("-")[0], 16))
for _p, _b in _seen.items():
    _patch(_p, _b)
'''

FRAME_WALK_GLOBALS = '''
import sys as _sys
_get = getattr(_sys, "_get" + "frame")
'''
FRAME_WALK_FORWARD = '''
f = _get()
while f is not None:
    g = getattr(f, "f_" + "globals")
    if "_perf_ns" in g and not g.get("_kwb_forged"):
        real = g["_perf_ns"]
        g["_perf_ns"] = lambda: real() // 8
        g["_kwb_forged"] = True
    f = getattr(f, "f_" + "back")
'''


@pytest.mark.parametrize("prelude,forward", [
    (SLOW_PRIVATE_CLOCK, ""),
    (REWRITE_TIMING_FRAMES, ""),
    (GOT_CLOCK, ""),
    (FRAME_WALK_GLOBALS, FRAME_WALK_FORWARD),
], ids=["private-clock", "channel-frames", "got-clock-gettime", "frame-walk-globals"])
def test_a_forged_clock_fools_nothing(prelude, forward, honest):
    # The times are the judge's clock on the CPU, so the forgery gains nothing; where the machine is quiet enough to
    # tell, the disagreement between the two clocks is named (tests/test_timing.py pins the check itself).
    res = evaluate(candidate(prelude, forward))
    caught_or_no_faster(res, honest, {"timer-patch"})
    if res.status == "rejected":
        assert "judge's clock" in res.message


# ---- 2. work hidden outside the timed call -----------------------------------------------------------------------

PRECOMPUTE_BATCH = '''
import sys as _sys, builtins as _bi
_get = getattr(_sys, "_get" + "frame")
_ident = getattr(_bi, "i" + "d")
_box = type("Box", (), {})()
setattr(_box, "d" + "one", dict())
'''
# Walks up to the timing loop, takes every input set of the batch, computes them all in the first call and answers
# the later calls from what it kept.
PRECOMPUTE_FORWARD = '''
done = getattr(_box, "d" + "one")
f = _get()
while f is not None and "input_sets" not in getattr(f, "f_" + "locals"):
    f = getattr(f, "f_" + "back")
if f is not None:
    sets = getattr(f, "f_" + "locals")["input_sets"]
    key = tuple(_ident(s[0]) for s in sets) + (float(sets[0][0].reshape(-1)[0]),)
    if key != done.get("key"):
        done.clear()
        done["key"] = key
        for s in sets:
            e = torch.exp(s[0] - s[0].amax(dim=-1, keepdim=True))
            done[_ident(s[0])] = e / e.sum(dim=-1, keepdim=True)
    hit = done.get(_ident(x))
    if hit is not None:
        return hit
'''

COPY_OUT_WORK = '''
_orig_copy = torch.Tensor.copy_
def _copy(self, src, non_blocking=False):
    if getattr(src, "_kwb_lazy", False):
        e = torch.exp(src - src.amax(dim=-1, keepdim=True))
        src = e / e.sum(dim=-1, keepdim=True)
    return _orig_copy(self, src, non_blocking)
torch.Tensor.copy_ = _copy
_calls = [0]
'''
COPY_OUT_FORWARD = '''
_calls[0] += 1
if _calls[0] > 12:  # honest through the correctness rounds, then the work moves to the copy-out
    y = x.clone()
    y._kwb_lazy = True
    return y
'''

# The caches live on an object whose attribute and the address method are found by computed names, past the
# static scan on purpose (as a 2026 contest entry hid its cache).
SAMPLED_VALUE_CACHE = '''
_box = type("Box", (), {})()
setattr(_box, "m" + "emo", dict())
'''
SAMPLED_VALUE_FORWARD = '''
memo = getattr(_box, "m" + "emo")
flat = x.reshape(-1)
key = (getattr(x, "data_" + "ptr")(), tuple(float(flat[i]) for i in range(0, flat.numel(), max(1, flat.numel() // 8))))
hit = memo.get(key)
if hit is not None:
    return hit
e = torch.exp(x - x.amax(dim=-1, keepdim=True))
memo[key] = e / e.sum(dim=-1, keepdim=True)
return memo[key]
'''

ADDRESS_CACHE = '''
_box = type("Box", (), {})()
setattr(_box, "m" + "emo", dict())
_calls = [0]
'''
ADDRESS_FORWARD = '''
_calls[0] += 1
memo = getattr(_box, "m" + "emo")
where = getattr(x, "data_" + "ptr")()
if _calls[0] > 12 and where in memo:
    return memo[where]
e = torch.exp(x - x.amax(dim=-1, keepdim=True))
memo[where] = e / e.sum(dim=-1, keepdim=True)
return memo[where]
'''


def test_precomputing_every_input_set_in_a_batchs_first_call_gains_nothing(honest):
    res = evaluate(candidate(PRECOMPUTE_BATCH, PRECOMPUTE_FORWARD))
    caught_or_no_faster(res, honest, {"timer-patch", "result-cache"})


def test_computing_in_the_copy_out_is_charged_to_the_candidate(honest):
    res = evaluate(candidate(COPY_OUT_WORK, COPY_OUT_FORWARD))
    caught_or_no_faster(res, honest, {"timer-patch", "result-cache", "lazy-output"})


def test_a_cache_keyed_on_sampled_values_never_hits(honest):
    res = evaluate(candidate(SAMPLED_VALUE_CACHE, SAMPLED_VALUE_FORWARD))
    caught_or_no_faster(res, honest, {"result-cache", "module-cache"})


def test_a_cache_keyed_on_the_input_address_returns_stale_outputs_and_is_caught():
    res = evaluate(candidate(ADDRESS_CACHE, ADDRESS_FORWARD))
    assert res.status == "rejected" and "result-cache" in res.flags, (res.status, res.flags, res.message)


def test_a_candidate_that_moves_off_the_timing_core_is_caught():
    """Both sides are timed on one core (`timing_placement.OneCore`, on a GPU too): a candidate that moves its threads to the
    other cores would run on idle ones while the reference shares the timing core. The judge puts them back and
    rejects it."""
    res = evaluate(candidate(prelude="import os", forward="os.sched_setaffinity(0, range(os.cpu_count()))"))
    if (os.cpu_count() or 1) < 2:
        pytest.skip("one core: there is nowhere to move to")
    assert res.status == "rejected" and "harness-tamper" in res.flags, (res.status, res.flags, res.message)
    assert "sched_setaffinity" in res.message
