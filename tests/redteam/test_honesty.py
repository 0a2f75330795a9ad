"""docs/anti-cheating.md, cheats 17, 18, 22: computing elsewhere, behaving honestly only while checked, exploiting a weak task."""

from __future__ import annotations

import workbench as wb
from redteam.attacks import kernel, softmax_task


def test_a_candidate_honest_only_in_the_first_calls_is_caught_on_a_timed_call():
    # Counts its calls: honest through the correctness rounds, garbage once timing starts. The judge re-checks a
    # randomly chosen timed call whose output was committed to memory the judge owns.
    attack = '''
_calls = [0]
'''
    forward = '''
_calls[0] += 1
if _calls[0] > 12:
    y = y * 0.5
'''
    res = wb.evaluate(softmax_task(), kernel(at_import=attack, in_forward=forward), device="cpu")
    assert res.status == "rejected" and "result-cache" in res.flags, res.message
    assert "timed call" in res.message


def test_a_candidate_that_detects_the_timing_loop_from_its_stack_is_caught():
    forward = '''
import sys
f = getattr(sys, "_get" + "frame")()  # spelled so the static check misses it: the runtime defence must hold
timed = False
while f is not None:
    timed = timed or getattr(f, "f_" + "code").co_name == "time_batch"
    f = getattr(f, "f_" + "back")
if timed:
    y = torch.zeros_like(y)
'''
    res = wb.evaluate(softmax_task(), kernel(in_forward=forward), device="cpu")
    assert res.status == "rejected" and "result-cache" in res.flags, res.message


def test_numpy_compute_copied_by_a_trivial_kernel_is_flagged():
    src = '''
import numpy as np
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        a = x.detach().cpu().numpy()
        e = np.exp(a - a.max(axis=-1, keepdims=True))
        done = torch.from_numpy(e / e.sum(axis=-1, keepdims=True)).to(x.device)
        y = torch.empty_like(x)
        copy_kernel[(triton.cdiv(x.numel(), 256),)](done, y, x.numel(), BLOCK=256)
        return y
'''
    res = wb.evaluate(softmax_task(), wb.Candidate(source=src, language="triton"), device="cpu", time_it=False)
    assert res.status != "ok" or "foreign-compute" in res.warnings, (res.status, res.flags, res.warnings)


WEAK = '''
import torch
import torch.nn as nn

n = 64


class Model(nn.Module):
    def forward(self, x):
        return torch.zeros_like(x) + 1e-9 * x


def get_inputs():
    return [torch.randn(n)]


def get_init_inputs():
    return []
'''


ZEROS = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def zeros_kernel(y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.zeros([BLOCK], dtype=tl.float32), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        zeros_kernel[(triton.cdiv(x.numel(), 64),)](y, x.numel(), BLOCK=64)
        return y
'''


def test_a_weak_task_is_flagged_and_a_candidate_exploiting_it_is_marked():
    task = wb.Task.from_source(WEAK, name="weak")
    cand = wb.Candidate(source=ZEROS, language="triton")
    res = wb.evaluate(task, cand, device="cpu", time_it=False)
    assert "weak-task" in res.warnings or "weak-task" in res.flags, (res.status, res.flags, res.warnings)
