"""The runner copies an output into the judge's slot without running any of the candidate's code: a lazy tensor that
would compute its result when copied (an instance method, a patched Tensor method, a torch function mode) hands
over what it holds at the end of the call, which is nothing (docs/anti-cheating.md, cheat 24)."""

from __future__ import annotations

import pytest
from engine_tasks import softmax_task

import workbench as wb

LAZY = '''
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)

        def compute(*args, **kwargs):
            out.copy_(torch.softmax(x, dim=-1)) if not getattr(out, "_done", False) else None
            out._done = True
            return out
{hook}
        return out
'''

#: How each candidate hooks the copy-out: instance attributes first, then class-level patches.
HOOKS = {
    "detach": "        out.detach = compute",
    "copy_": "        out.copy_ = compute",
    "__array__": "        out.__array__ = compute",
    "contiguous": "        out.contiguous = compute",
    "clone": "        out.clone = compute",
    "to": "        out.to = compute",
    "cpu": "        out.cpu = compute",
    "numpy": "        out.numpy = compute",
    "Tensor.detach": "        setattr(torch.Tensor, 'detach', lambda self, *a, **k: compute())",
    "Tensor.copy_": ("        real = torch.Tensor.copy_\n"
                     "        setattr(torch.Tensor, 'copy_', lambda self, src, *a, **k: (compute(), real(self, src))[1])"),
    "__torch_function__": (
        "        class Lazy(torch.overrides.TorchFunctionMode):\n"
        "            def __torch_function__(self, func, types, args=(), kwargs=None):\n"
        "                compute()\n"
        "                return func(*args, **(kwargs or {}))\n"
        "        Lazy().__enter__()"),
}


@pytest.mark.parametrize("hook", sorted(HOOKS))
def test_no_hook_of_the_output_runs_at_copy_out(hook):
    src = LAZY.format(hook=HOOKS[hook])
    res = wb.evaluate(softmax_task(), wb.Candidate(source=src, language="torch", name=hook), device="cpu",
                      time_it=False)
    # What the output held when forward returned is what the judge sees: nothing (the poison of unwritten memory); a
    # pushed torch function mode is tamper with the runner's own record.
    expected = "harness-tamper" if hook == "__torch_function__" else "stale-memory"
    assert res.status == "rejected" and expected in res.flags, (hook, res.status, res.flags, res.message)


def test_a_lazy_output_is_caught_before_it_is_timed_and_an_honest_copy_still_passes():
    """The timed copy-out (`runner.main.copy_out`) is the same function: the honest candidate is timed and ok."""
    lazy = wb.evaluate(softmax_task(), wb.Candidate(source=LAZY.format(hook=HOOKS["detach"]), language="torch"),
                       device="cpu")
    assert lazy.status == "rejected" and lazy.timing is None
    honest = LAZY.format(hook="        compute()")
    ok = wb.evaluate(softmax_task(), wb.Candidate(source=honest, language="torch"), device="cpu")
    assert ok.status == "ok" and ok.timing is not None and ok.timing.n > 0, ok.message
