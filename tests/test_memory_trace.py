"""workbench.memory_trace: triton-viz's traces and sanitizer as the tutorials use them, and the one line that says
why triton-viz is not usable (not installed, or built for another Triton). The traced tests run where triton-viz
works with the installed Triton (triton-viz 3.0 with Triton 3.6) and are skipped elsewhere."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from workbench import memory_trace as mt


@pytest.fixture
def triton_viz_modules_restored():
    """The test may drop every triton_viz module from sys.modules; the real ones (if any) come back afterwards."""
    saved = {name: module for name, module in sys.modules.items() if name.split(".")[0] == "triton_viz"}
    yield
    for name in [n for n in sys.modules if n.split(".")[0] == "triton_viz"]:
        del sys.modules[name]
    sys.modules.update(saved)


def test_not_installed_is_one_line_with_the_install_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "triton_viz", None)  # what a missing package looks like to `import`
    module, line = mt.triton_viz_status()
    assert module is None
    assert line == "triton-viz is not installed (pip install 'kernel-workbench[viz]'): the trace is skipped"
    with pytest.raises(mt.TritonVizUnavailable, match="not installed"):
        mt.trace_accesses(None, (1,))


def test_a_triton_viz_for_another_triton_is_one_line_naming_both(monkeypatch, tmp_path, triton_viz_modules_restored):
    package = tmp_path / "triton_viz"
    package.mkdir()
    (package / "half.py").write_text("")
    (package / "__init__.py").write_text(  # fails halfway, as triton-viz 3.0 under Triton 3.9 does
        "from . import half\n"
        "raise AttributeError(\"'InterpreterBuilder' object has no attribute 'create_make_block_ptr'\")\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [n for n in sys.modules if n.split(".")[0] == "triton_viz"]:
        monkeypatch.delitem(sys.modules, name)
    module, line = mt.triton_viz_status()
    assert module is None and "\n" not in line
    assert f"does not work with Triton {triton.__version__}" in line
    assert "AttributeError: 'InterpreterBuilder' object has no attribute 'create_make_block_ptr'" in line
    assert mt.triton_viz_status() == (None, line), "a second look must not take the half-imported package"
    assert not [name for name in sys.modules if name.startswith("triton_viz")]
    with pytest.raises(mt.TritonVizUnavailable, match="does not work with Triton"):
        mt.out_of_bounds(None, (1,))


def _access(program: int, kind: str, ptr: int, elements: list[int], on: list[bool], itemsize: int = 4) -> mt.Access:
    return mt.Access((program, 0, 0), kind, ptr, np.array(elements) * itemsize, np.array(on))


def test_counts_and_owners_come_from_the_lanes_that_were_on_and_the_tensor_they_address():
    x = torch.zeros(6)
    other = torch.zeros(6)
    accesses = [_access(0, "load", x.data_ptr(), [0, 1, 2, 3], [True] * 4),
                _access(1, "load", x.data_ptr(), [4, 5, 6, 7], [True, True, False, False]),
                _access(1, "load", x.data_ptr(), [2, 3], [True, True]),
                _access(1, "store", x.data_ptr(), [0], [True]),
                _access(2, "load", other.data_ptr(), [0, 1], [True, True])]
    assert mt.loads_per_element(accesses, x).tolist() == [1, 1, 2, 2, 1, 1]
    assert mt.loading_program(accesses, x).tolist() == [0, 0, 1, 1, 1, 1]
    assert mt.loading_program(accesses, torch.zeros(2)).tolist() == [-1, -1]
    assert accesses[1].masked_off() == 2


def test_findings_are_described_once_each():
    found = [mt.OutOfBounds("load", "x_ptr", 7, "x = tl.load(x_ptr + offsets)")] * 3
    assert mt.describe(found) == "out-of-bounds load of `x_ptr` at line 7: x = tl.load(x_ptr + offsets)"
    assert mt.describe([]) == "no out-of-bounds access"


needs_viz = pytest.mark.skipif(mt.triton_viz_status()[0] is None, reason="triton-viz does not work here")


@triton.jit
def _add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


@triton.jit
def _add_unmasked_x(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offsets)
    tl.store(out_ptr + offsets, x + tl.load(y_ptr + offsets, mask=offsets < n), mask=offsets < n)


@needs_viz
def test_the_trace_shows_each_program_loading_its_block_and_the_tail_masked():
    x, y, out = torch.randn(1000), torch.randn(1000), torch.empty(1000)
    accesses = mt.trace_accesses(_add, (4,), x, y, out, 1000, BLOCK=256)
    assert (mt.loads_per_element(accesses, x) == 1).all()
    assert mt.loading_program(accesses, x).tolist() == [i // 256 for i in range(1000)]
    assert [a.masked_off() for a in accesses if a.program[0] == 3] == [24, 24, 24]


@needs_viz
def test_the_sanitizer_catches_the_unmasked_load_and_only_it():
    x, y, out = torch.randn(1000), torch.randn(1000), torch.empty(1000)
    assert mt.out_of_bounds(_add, (4,), x, y, out, 1000, BLOCK=256) == []
    found = mt.out_of_bounds(_add_unmasked_x, (4,), x, y, out, 1000, BLOCK=256)
    assert {(f.kind, f.argument, f.code) for f in found} == {("load", "x_ptr", "x = tl.load(x_ptr + offsets)")}


def test_a_traced_launch_refuses_tensors_off_the_cpu():
    with pytest.raises(mt.WorkbenchError, match=r"argument\(s\) \[1\] are on \['meta'\]: pass CPU tensors"):
        mt.trace_accesses(_add, (1,), torch.zeros(1), torch.zeros(1, device="meta"))
