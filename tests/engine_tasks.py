"""Small tasks defined from KernelBench-format source, shared by the engine's tests (fast on the interpreter)."""

from __future__ import annotations

import workbench as wb

SOFTMAX = '''
import torch
import torch.nn as nn

batch_size = 8
dim = 64


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
'''

#: SOFTMAX with a parameter drawn in the constructor (where models are built: tests/test_model_init.py and its GPU
#: twin); variants replace its draw, `torch.rand(dim)`, or its name, `self.scale`.
SCALED_SOFTMAX = SOFTMAX.replace(
    "        super().__init__()\n", "        super().__init__()\n        self.scale = nn.Parameter(torch.rand(dim))\n"
).replace("torch.softmax(x, dim=-1)", "torch.softmax(x * self.scale, dim=-1)")

TWO_OUTPUTS = '''
import torch
import torch.nn as nn

n = 64


class Model(nn.Module):
    def forward(self, x):
        return x.sum(), x * 2


def get_inputs():
    return [torch.randn(n)]


def get_init_inputs():
    return []
'''

CONSTANT = '''
import torch
import torch.nn as nn

n = 32


class Model(nn.Module):
    def forward(self, x, y):
        return torch.zeros_like(x) + y.sum() * 0


def get_inputs():
    return [torch.randn(n), torch.randn(n)]


def get_init_inputs():
    return []
'''


def softmax_task() -> wb.Task:
    return wb.Task.from_source(SOFTMAX, name="tiny_softmax",
                               sweep={"cpu": [{"batch_size": 5, "dim": 37}, {"batch_size": 3, "dim": 100}]})


def evaluate_after_an_import_failure(task: wb.Task, device: str = "cpu") -> wb.Result:
    """A candidate that fails at import, then the task's reference as its candidate: what a judge keeps from an
    evaluation that never reached its checks (the reference's runner, the spare runner) must serve the next one."""
    from workbench.tasks.kernelbench import reference_as_candidate

    broken = wb.Candidate(source="import torch\nraise RuntimeError('fails at import')\n", language="torch")
    failed = wb.evaluate(task, broken, device=device)
    assert failed.status == "compile_error", failed.message
    res = wb.evaluate(task, reference_as_candidate(task), device=device)
    assert res.status == "ok", res.message
    return res
