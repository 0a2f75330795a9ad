"""What the fork server does once for every runner it forks: the Triton interpreter's set-up (CPU only)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch
import triton.language as tl
from triton.runtime import interpreter

from workbench.eval.runner import forkserver

SOLUTION = Path(__file__).resolve().parents[1] / "workbench" / "tasks" / "solutions" / "softmax.py"


def _counting_launches(monkeypatch) -> list[int]:
    launches: list[int] = []
    original = interpreter.GridExecutor.__call__

    def counted(self, *args, **kwargs):
        launches.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(interpreter.GridExecutor, "__call__", counted)
    return launches


def test_the_interpreter_is_set_up_by_one_launch_only_where_runners_interpret(monkeypatch):
    launches = _counting_launches(monkeypatch)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    forkserver._warm_interpreter()
    assert launches == []  # compiled Triton: nothing to set up, and no CUDA call in the fork server
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    forkserver._warm_interpreter()
    assert launches == [1]


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU machine this process imported Triton compiled, "
                    "not interpreted (tests/conftest.py), so a CPU kernel cannot run here")
def test_after_the_warm_up_triton_is_as_it_was_and_a_candidates_kernel_computes(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    entry, load, exp = interpreter.GridExecutor.__call__, tl.load, tl.exp
    forkserver._warm_interpreter()
    assert (interpreter.GridExecutor.__call__, tl.load, tl.exp) == (entry, load, exp)  # what the seal records
    spec = importlib.util.spec_from_file_location("warm_softmax_solution", SOLUTION)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    x = torch.randn(5, 300)
    torch.testing.assert_close(module.ModelNew()(x), torch.softmax(x, dim=-1))
