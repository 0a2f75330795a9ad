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


class MeanSquaredError(torch.nn.Module):
    def forward(self, a, b):
        return torch.mean((a - b) ** 2)


class SummedAbsError(torch.nn.Module):
    def forward(self, a, b):
        return (a - b).abs().sum()


class LargestError(torch.nn.Module):
    def forward(self, a, b):
        return (a - b).abs().max()


def test_a_loss_that_averages_or_sums_its_rows_runs_in_slices_accumulated_in_float64(monkeypatch):
    # 2 x (inputs 2 x 1536 B + outputs 4 B) + 1536 x 2 B of native clones: about 9.2 kB; 6000 B free sends neither
    # loss whole to the device, and a slice of 3 rows fits the 20% share. The sliced float64 answer must equal the
    # whole float64 model's to float64 rounding; a max over the batch is neither a mean nor a sum and goes to the host.
    from workbench.eval.judge.reference import float64 as reference64

    monkeypatch.setattr(reference64, "_free_bytes", lambda device: 6000)
    torch.manual_seed(0)
    a, b = torch.randn(12, 16), torch.randn(12, 16)
    for model, how in ((MeanSquaredError(), "mean"), (SummedAbsError(), "sum")):
        plan = Float64Reference.plan(model, [a, b], model(a, b), "cuda", 0)
        assert (plan.placement, plan.combine) == ("device-chunked", how), plan
        assert plan.rows_per_chunk < 12 and f"returns the {how} over its rows" in plan.note
        sliced, note = plan(model, [a, b], model(a, b), 0)
        whole = Float64Reference(_as64(model, host=False), "device")(model, [a, b], None, 0)[0]
        assert note == "" and sliced[0].dtype == torch.float64 and sliced[0].dim() == 0
        assert abs(float(sliced[0]) - float(whole[0])) <= 1e-12 * abs(float(whole[0]))
    largest = LargestError()
    plan = Float64Reference.plan(largest, [a, b], largest(a, b), "cuda", 0)
    assert plan.placement == "host" and "nor returns their mean or sum" in plan.note, plan


class RandomInitialState(torch.nn.Module):
    """KernelBench's RNNs: the initial state drawn with `torch.randn` in forward, in the default dtype."""

    def __init__(self) -> None:
        super().__init__()
        self.rnn = torch.nn.GRU(6, 5, batch_first=True)

    def forward(self, x):
        h0 = torch.randn(1, x.shape[0], 5, device=x.device)
        return self.rnn(x, h0)[0]


def test_a_state_drawn_in_forward_is_drawn_as_the_native_run_draws_it_and_the_reference_stays_float64():
    torch.manual_seed(0)
    model, x = RandomInitialState(), torch.randn(3, 4, 6)
    torch.manual_seed(7)
    with torch.no_grad():
        native = model(x)
    (out,), note = Float64Reference(_as64(model, host=False), "device")(model, [x], native, 7)
    assert note == "" and out.dtype == torch.float64  # not the native result standing in
    gap = float((out - native.double()).abs().max())
    assert 0 < gap < 1e-5  # the same initial state: only float32's rounding apart
