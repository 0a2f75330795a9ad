"""The float64 reference: where it runs, and that running it in slices of rows gives the whole answer."""

from __future__ import annotations

import torch

from workbench.eval.judge.reference.float64 import Float64Reference, _as64


class RowSoftmax(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.scale = torch.nn.Parameter(torch.linspace(0.5, 2.0, 7))

    def forward(self, x, y):
        return torch.softmax(x * self.scale, -1), (x + y).sum(-1)


def test_slices_of_rows_written_into_one_output_equal_the_whole_float64_model():
    torch.manual_seed(0)
    model = RowSoftmax()
    x, y = torch.randn(10, 7), torch.randn(10, 7)
    whole = Float64Reference(_as64(model, host=False), "device")(model, [x, y], None, 0)[0]
    for rows in (1, 3, 4, 10):  # slices that divide the batch and ones that leave a short last slice
        sliced, note = Float64Reference(_as64(model, host=False), "device-chunked", rows)(model, [x, y], None, 0)
        assert note == ""
        assert [t.dtype for t in sliced] == [torch.float64, torch.float64]
        assert [t.shape for t in sliced] == [t.shape for t in whole]
        assert all(torch.equal(a, b) for a, b in zip(sliced, whole, strict=True))


def test_the_placement_counts_the_native_clone_it_casts_from(monkeypatch):
    # 2 x (inputs 560 B + outputs 320 B + parameters 28 B) = 1816 B of float64 copies, plus the 560 B native clone
    # the copies are cast from: 2376 B. With 4000 B free, half is 2000 B: whole on the device only if the clone is
    # forgotten; counted, the model runs in slices of rows (it treats rows independently).
    from workbench.eval.judge.reference import float64 as reference64

    monkeypatch.setattr(reference64, "_free_bytes", lambda device: 4000)
    model = RowSoftmax()
    x, y = torch.randn(10, 7), torch.randn(10, 7)
    plan = Float64Reference.plan(model, [x, y], model(x, y), "cuda", 0)
    assert plan.placement == "device-chunked" and plan.rows_per_chunk == 3, plan
    monkeypatch.setattr(reference64, "_free_bytes", lambda device: 5000)
    assert Float64Reference.plan(model, [x, y], model(x, y), "cuda", 0).placement == "device"


class RowsWithBatchRounding(torch.nn.Module):
    """Rows computed alone, but with last-bit rounding that depends on the batch size (as a reduction kernel that
    splits a row differently at another batch size)."""

    def forward(self, x):
        return x / x.norm(dim=1, keepdim=True) * (1 + 1e-7 * (x.shape[0] % 5))


class CentresTheBatch(torch.nn.Module):
    def forward(self, x):
        return x - x.mean(dim=0, keepdim=True)


def test_rows_that_differ_only_by_rounding_run_in_slices_and_batch_statistics_do_not(monkeypatch):
    from workbench.eval.judge.reference import float64 as reference64

    monkeypatch.setattr(reference64, "_free_bytes", lambda device: 6000)
    x = torch.randn(12, 16)
    rounding = RowsWithBatchRounding()
    assert not torch.equal(rounding(x[:3]), rounding(x)[:3])  # not bit for bit: the old rule sent it to the host
    plan = Float64Reference.plan(rounding, [x], rounding(x), "cuda", 0)
    assert plan.placement == "device-chunked", plan
    mixing = CentresTheBatch()
    assert Float64Reference.plan(mixing, [x], mixing(x), "cuda", 0).placement == "host"
