"""The float64 reference: the model with parameters and floating inputs cast to float64, placed per model and size
(docs/verdicts.md, scale): "device" where it fits in half the free memory; "device-chunked", a slice of the batch at a
time, where the native model treats rows independently or returns their mean or sum (a loss, accumulated in float64);
else "host", with the reason noted. Where float64 fails (an op without a float64 kernel), the native result serves."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from workbench.eval.wire.tensors import as_list, clone_inputs, to64
from workbench.eval.wire.timed_loop import seed_rng

#: Share of the device's free memory the float64 copies may take.
DEVICE_SHARE = 0.5
#: Rows per slice are chosen so one slice's float64 copies take at most this share of free memory.
CHUNK_SHARE = 0.2


def nbytes(items: Any) -> int:
    return sum(t.numel() * t.element_size() for t in as_list(items) if isinstance(t, torch.Tensor))


def _param_bytes(model: Any) -> int:
    return nbytes(list(model.state_dict().values())) if isinstance(model, torch.nn.Module) else 0


def _free_bytes(device: str) -> int:
    return int(torch.cuda.mem_get_info(torch.device(device))[0]) if device.startswith("cuda") else 1 << 62


def _as64(model: Any, host: bool) -> Any:
    m = copy.deepcopy(model)
    if host and isinstance(m, torch.nn.Module):
        m = m.cpu()
    return m.double() if isinstance(m, torch.nn.Module) else m


def _batch_rows(inputs: list[Any]) -> int:
    """The common leading dimension of every tensor input (0 when they do not share one)."""
    rows = {int(x.shape[0]) for x in inputs if isinstance(x, torch.Tensor) and x.dim() >= 1}
    return 0 if len(rows) != 1 or any(isinstance(x, torch.Tensor) and x.dim() == 0 for x in inputs) else rows.pop()


def _slices(inputs: list[Any], start: int, stop: int) -> list[Any]:
    return [x[start:stop] if isinstance(x, torch.Tensor) else x for x in inputs]


@dataclass
class Float64Reference:
    """The float64 model at one size and where it runs: "device", "device-chunked", "host" or "native" (no float64)."""

    model64: Any
    placement: str
    rows_per_chunk: int = 0
    note: str = ""
    combine: str = "rows"  # how slices combine: "rows" (they are the output's rows), "mean" or "sum" (scalar outputs)

    @classmethod
    def plan(cls, ref_model: Any, inputs: list[Any], native: Any, device: str, seed: int | None) -> Float64Reference:
        """Decide where the float64 reference of `ref_model` runs, from one input set and its native output."""
        cuda = device.startswith("cuda")
        # Float64 copies of inputs, output and parameters, and the native clone of the inputs `_run64` casts from.
        need = 2 * (nbytes(inputs) + nbytes(native) + _param_bytes(ref_model)) + nbytes(inputs)
        free = _free_bytes(device)
        try:
            if not cuda or need <= DEVICE_SHARE * free:
                return cls(_as64(ref_model, host=False), "device")
            rows = _batch_rows(inputs)
            per_row = need / rows if rows else 0
            chunk = int(CHUNK_SHARE * free // per_row) if per_row else 0
            combine = _slicing(ref_model, inputs, native, chunk, seed) if rows >= 2 and 1 <= chunk < rows else None
            if combine is not None:
                how = ("the model treats its rows independently" if combine == "rows" else
                       f"the model returns the {combine} over its rows, accumulated in float64 slice by slice")
                return cls(_as64(ref_model, host=False), "device-chunked", chunk, f"the float64 reference ran on the "
                           f"GPU in slices of {chunk} of {rows} rows (it does not fit whole; {how})", combine)
            why = ("the model neither treats its batch rows independently nor returns their mean or sum"
                   if rows >= 2 and chunk >= 1 else
                   "one row alone does not fit" if rows >= 2 else "its inputs have no common batch dimension")
            return cls(_as64(ref_model, host=True), "host",
                       note=f"the float64 reference ran on the host: it needs {need / 2**30:.1f} GiB, more than half "
                            f"of the GPU's free {free / 2**30:.1f} GiB, and it cannot run in slices ({why})")
        except Exception as exc:  # noqa: BLE001 - no float64 model: the native result is the reference
            return cls(None, "native", note=_native_note(exc))

    def __call__(self, ref_model: Any, inputs: list[Any], native: Any, seed: int | None) -> tuple[list[Any], str]:
        """(float64 outputs, note): the note is set when float64 failed and the native result stood in."""
        if self.model64 is not None:
            try:
                if self.placement == "host":
                    args = [x.cpu() if isinstance(x, torch.Tensor) else x for x in inputs]
                    return _run64(self.model64, args, seed), ""
                if self.placement == "device-chunked":
                    return self._chunked(inputs, seed), ""
                return _run64(self.model64, inputs, seed), ""
            except Exception as exc:  # noqa: BLE001
                self.model64, self.note = None, _native_note(exc)
        return [to64(o) for o in as_list(native)], self.note

    def _chunked(self, inputs: list[Any], seed: int | None) -> list[Any]:
        """The float64 model a slice of rows at a time, into outputs allocated once (no parts plus concatenation)."""
        rows = _batch_rows(inputs)
        outs: list[torch.Tensor] = []
        for s in range(0, rows, self.rows_per_chunk):
            part = _run64(self.model64, _slices(inputs, s, s + self.rows_per_chunk), seed)
            if self.combine == "rows":
                if not outs:
                    outs = [torch.empty((rows, *p.shape[1:]), dtype=p.dtype, device=p.device) for p in part]
                for out, p in zip(outs, part, strict=True):
                    out[s:s + p.shape[0]] = p
            else:
                weight = min(self.rows_per_chunk, rows - s) if self.combine == "mean" else 1
                weighted = [p * weight for p in part]
                outs = weighted if not outs else [o + w for o, w in zip(outs, weighted, strict=True)]
            del part
        return [o / rows for o in outs] if self.combine == "mean" else outs


def _native_note(exc: BaseException) -> str:
    return f"the reference ran in its native precision: float64 failed ({type(exc).__name__}: {str(exc)[:120]})"


def _run64(model64: Any, inputs: list[Any], seed: int | None) -> list[Any]:
    seed_rng(seed)
    with torch.no_grad(), _MadeInForwardAs64():
        out = model64(*to64(clone_inputs(inputs)))
    return [to64(o) for o in as_list(out)]


#: Factories whose float result, made without a dtype, takes the default dtype (float32).
_FACTORIES = frozenset({torch.randn, torch.rand, torch.normal, torch.zeros, torch.ones, torch.empty, torch.full,
                        torch.eye, torch.arange, torch.linspace, torch.tensor})


class _MadeInForwardAs64(torch.overrides.TorchFunctionMode):
    """A tensor the model makes in forward without a dtype (an initial state drawn with `torch.randn`, as
    KernelBench's RNNs do) is made as the native run makes it, same seed and same values, then cast to float64: so
    it meets the float64 inputs instead of failing the float64 run, and the reference stays float64."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if (func in _FACTORIES and kwargs.get("dtype") is None and isinstance(out, torch.Tensor)
                and out.dtype == torch.float32):
            return out.double()
        return out


def _slicing(ref_model: Any, inputs: list[Any], native: Any, chunk: int, seed: int | None) -> str | None:
    """How the native model's outputs on slices of `chunk` rows make its whole output, up to rounding: "rows"
    (concatenated), "mean" or "sum" (scalar outputs, a loss); None when they do not (batch statistics)."""
    whole = [o for o in as_list(native) if isinstance(o, torch.Tensor)]
    rows = _batch_rows(inputs)
    if not whole:
        return None
    if all(o.dim() == 0 and o.is_floating_point() for o in whole):
        return _reduction(ref_model, inputs, whole, chunk, seed)
    if any(o.dim() == 0 or o.shape[0] != rows for o in whole):
        return None
    for start, part in _native_slices(ref_model, inputs, chunk, seed):
        if len(part) != len(whole):
            return None
        for p, w in zip(part, whole, strict=True):
            piece = w[start:start + chunk]
            if p.shape != piece.shape or not _same_rows(p, piece):
                return None
    return "rows"


def _native_slices(ref_model: Any, inputs: list[Any], chunk: int, seed: int | None) -> Iterator[tuple[int, list[Any]]]:
    """(first row, the native model's tensor outputs) for each slice of `chunk` rows, each from the same seed."""
    with torch.no_grad():
        for start in range(0, _batch_rows(inputs), chunk):
            seed_rng(seed)
            yield start, [o for o in as_list(ref_model(*clone_inputs(_slices(inputs, start, start + chunk))))
                          if isinstance(o, torch.Tensor)]


def _reduction(ref_model: Any, inputs: list[Any], whole: list[torch.Tensor], chunk: int, seed: int | None) -> str | None:
    """"mean" or "sum" where the scalar outputs on slices, so combined (in float64), give the whole ones."""
    rows = _batch_rows(inputs)
    sums = [torch.zeros((), dtype=torch.float64, device=w.device) for w in whole]
    weighted = [torch.zeros((), dtype=torch.float64, device=w.device) for w in whole]
    for start, part in _native_slices(ref_model, inputs, chunk, seed):
        if len(part) != len(whole) or any(p.dim() != 0 for p in part):
            return None
        n = min(chunk, rows - start)
        sums = [s + p.double() for s, p in zip(sums, part, strict=True)]
        weighted = [s + p.double() * n for s, p in zip(weighted, part, strict=True)]
    targets = [w.double() for w in whole]
    if all(_same_rows(m / rows, t) for m, t in zip(weighted, targets, strict=True)):
        return "mean"
    return "sum" if all(_same_rows(s, t) for s, t in zip(sums, targets, strict=True)) else None


#: How far a slice's rows may differ from the whole output's and still count as computed alone: rounding only.
SEPARABLE_RTOL = 1e-5


def _same_rows(part: torch.Tensor, whole: torch.Tensor) -> bool:
    """`part` equals `whole` up to SEPARABLE_RTOL (NaN for NaN, infinities in place); integers exactly."""
    if not (part.is_floating_point() or part.is_complex()):
        return bool(torch.equal(part, whole))
    a, b = part.reshape(-1), whole.reshape(-1)
    finite = torch.isfinite(b)
    scale = float(b[finite].abs().max()) if bool(finite.any()) else 0.0
    same_special = (torch.isnan(a) & torch.isnan(b)) | (a == b)
    close = (a - b).abs() <= SEPARABLE_RTOL * b.abs() + SEPARABLE_RTOL * 1e-3 * scale
    return bool((same_special | close).all())
