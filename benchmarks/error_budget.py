"""Measure the error budget's k: honest fp32 reorderings against lower-precision math, relative to the native error.

For every problem (the KernelBench-format problems in tests/kernelbench/, and KernelBench's own L1/L2 when its
folder is given), at a moderate CPU size (workbench.tasks.fit with a larger cap than fit="cpu", so reductions stay
long), on two input distributions (the file's own, and standard normal: cancellation), this computes

    E_native  = max |native - ref64|        the reference in fp32, as the judge runs it
    E_variant = max |variant - ref64|       one alternative implementation

and, per variant, the k it would need to pass `max(atol + rtol |ref64|, k E_native)` elementwise (0 when the
tolerance alone passes it). Variants (torch function modes swapping each op's implementation, in fp32):

    honest      split-k     matmul/linear/conv (conv via unfold + matmul) summed over K in chunks of 32, reductions
                            (sum, mean, layer/group/instance norm statistics) in blocks of 32, cumsum as a blocked
                            scan, softmax/log-softmax/logsumexp chunked online (running max and sum)
                reversed    the same chunks accumulated in reverse order
                sequential  one term at a time (chunk 1): a naive loop over K, the least accurate honest order
    dishonest   fp16-inputs / bf16-inputs      inputs and weights rounded to fp16 / bf16, then fp32 math
                tf32-operands                  matmul and convolution operands rounded to TF32 (10-bit mantissa)
                fp16-operands / bf16-operands  every op's operands rounded to fp16 / bf16 (half-precision math
                                               with fp32 accumulation)

A variant that leaves a problem's output bit-identical to the native one (no op it replaces) is not counted there.
The printed tables (percentiles of the ratio E_variant / E_native and of the k each variant needs) are what
docs/verdicts.md quotes:

    python benchmarks/error_budget.py --problems .kernelbench/KernelBench --levels 1,2 --out budget.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

ROOT = Path(__file__).resolve().parents[1]
HONEST = ("split-k", "reversed", "sequential")
DISHONEST = ("fp16-inputs", "bf16-inputs", "tf32-operands", "fp16-operands", "bf16-operands")
CHUNK = 32
#: Sequential accumulation loops in Python: longer reductions fall back to chunks of this size.
SEQUENTIAL_LIMIT = 4096


# ---- honest fp32 reorderings ------------------------------------------------------------------------------

def _accumulate(parts: list[torch.Tensor], reverse: bool) -> torch.Tensor:
    acc = None
    for p in (reversed(parts) if reverse else parts):
        acc = p if acc is None else acc + p
    return acc


class Reorder:
    """One honest ordering: `chunk` terms per partial result, partials accumulated in order (or reversed)."""

    def __init__(self, chunk: int, reverse: bool):
        self.chunk, self.reverse = chunk, reverse

    def _size(self, n: int) -> int:
        return max(self.chunk, math.ceil(n / SEQUENTIAL_LIMIT)) if self.chunk == 1 else self.chunk

    def matmul(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        if a.dim() == 1 or b.dim() == 1:
            out = self.matmul(a.unsqueeze(0) if a.dim() == 1 else a, b.unsqueeze(-1) if b.dim() == 1 else b)
            return out.squeeze(-1) if b.dim() == 1 else out.squeeze(-2)
        k = a.shape[-1]
        step = self._size(k)
        parts = [torch.matmul(a[..., i:i + step], b[..., i:i + step, :]) for i in range(0, k, step)]
        return _accumulate(parts, self.reverse)

    def sum(self, x: torch.Tensor, dims: tuple[int, ...] | None, keepdim: bool = False) -> torch.Tensor:
        dims = tuple(range(x.dim())) if dims is None or dims == () else tuple(d % max(x.dim(), 1) for d in dims)
        if x.dim() == 0:
            return x.clone()
        moved = x.movedim(dims, tuple(range(x.dim() - len(dims), x.dim()))).flatten(x.dim() - len(dims))
        n = moved.shape[-1]
        step = self._size(n)
        out = _accumulate([moved[..., i:i + step].sum(-1) for i in range(0, n, step)], self.reverse)
        if keepdim:
            for d in sorted(dims):
                out = out.unsqueeze(d)
        return out

    def cumsum(self, x: torch.Tensor, dim: int) -> torch.Tensor:
        dim = dim % x.dim()
        n = x.shape[dim]
        step = self._size(n)
        outs, carry = [], None
        for i in range(0, n, step):
            part = x.narrow(dim, i, min(step, n - i)).cumsum(dim)
            if carry is not None:
                part = part + carry
            carry = part.narrow(dim, part.shape[dim] - 1, 1)
            outs.append(part)
        return torch.cat(outs, dim)

    def logsumexp_parts(self, x: torch.Tensor, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(running max M, sum of exp(x - M)) along `dim`, chunk by chunk as an online softmax does."""
        dim = dim % x.dim()
        n = x.shape[dim]
        step = self._size(n)
        starts = list(range(0, n, step))
        if self.reverse:
            starts.reverse()
        m = s = None
        for i in starts:
            c = x.narrow(dim, i, min(step, n - i))
            cm = c.amax(dim, keepdim=True)
            cs = torch.exp(c - _finite(cm)).sum(dim, keepdim=True)
            if m is None:
                m, s = cm, cs
            else:
                new = torch.maximum(m, cm)
                # A chunk that is all -inf (a masked row start) contributes exp(-inf) = 0, never inf - inf.
                s = s * torch.exp(m - _finite(new)).nan_to_num(0.0) + cs * torch.exp(cm - _finite(new)).nan_to_num(0.0)
                m = new
        return _finite(m), s


def _finite(m: torch.Tensor) -> torch.Tensor:
    """A row maximum usable as a shift: -inf (every value masked) becomes 0."""
    return torch.where(torch.isfinite(m), m, torch.zeros_like(m))


class HonestMode(TorchFunctionMode):
    """Runs a model with every supported op replaced by `Reorder`'s ordering; counts what it replaced."""

    def __init__(self, order: Reorder):
        super().__init__()
        self.o = order
        self.replaced = 0
        self.table: dict[Any, Callable[..., Any]] = {}
        for f in (torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__, torch.mm, torch.Tensor.mm, torch.bmm,
                  torch.Tensor.bmm):
            self.table[f] = lambda a, b, **_: self.o.matmul(a, b)
        self.table[torch.Tensor.__rmatmul__] = lambda b, a, **_: self.o.matmul(a, b)
        self.table[F.linear] = self._linear
        self.table[torch.addmm] = lambda c, a, b, *, beta=1, alpha=1, **_: beta * c + alpha * self.o.matmul(a, b)
        self.table[torch.baddbmm] = lambda c, a, b, *, beta=1, alpha=1, **_: beta * c + alpha * self.o.matmul(a, b)
        for f in (torch.sum, torch.Tensor.sum):
            self.table[f] = self._sum
        for f in (torch.mean, torch.Tensor.mean):
            self.table[f] = self._mean
        for f in (torch.cumsum, torch.Tensor.cumsum):
            self.table[f] = lambda x, dim, **kw: self.o.cumsum(x, dim) if not kw.get("dtype") else None
        for f in (torch.softmax, torch.Tensor.softmax, F.softmax):
            self.table[f] = lambda x, dim=None, *a, **kw: self._softmax(x, dim, log=False)
        for f in (torch.log_softmax, torch.Tensor.log_softmax, F.log_softmax):
            self.table[f] = lambda x, dim=None, *a, **kw: self._softmax(x, dim, log=True)
        for f in (torch.logsumexp, torch.Tensor.logsumexp):
            self.table[f] = self._logsumexp
        for f in (F.conv1d, torch.conv1d):
            self.table[f] = self._conv1d
        for f in (F.conv2d, torch.conv2d):
            self.table[f] = self._conv2d
        for f in (F.conv_transpose1d, torch.conv_transpose1d):
            self.table[f] = self._conv_transpose1d
        for f in (F.conv_transpose2d, torch.conv_transpose2d):
            self.table[f] = self._conv_transpose2d
        self.table[F.layer_norm] = self._layer_norm
        self.table[F.group_norm] = self._group_norm
        self.table[F.instance_norm] = self._instance_norm

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        impl = self.table.get(func)
        if impl is not None and all(not isinstance(a, torch.Tensor) or a.dtype == torch.float32 for a in args):
            try:
                out = impl(*args, **kwargs)
            except _Native:
                out = None
            if out is not None:
                self.replaced += 1
                return out
        return func(*args, **kwargs)

    # -- ops --
    def _linear(self, x, w, b=None):
        y = self.o.matmul(x, w.t())
        return y if b is None else y + b

    def _sum(self, x, dim=None, keepdim=False, *, dtype=None):
        if dtype is not None or not x.is_floating_point():
            raise _Native
        dims = None if dim is None else (dim,) if isinstance(dim, int) else tuple(dim)
        return self.o.sum(x, dims, keepdim)

    def _mean(self, x, dim=None, keepdim=False, *, dtype=None):
        if dtype is not None or not x.is_floating_point():
            raise _Native
        dims = None if dim is None else (dim,) if isinstance(dim, int) else tuple(dim)
        n = x.numel() if dims is None else math.prod(x.shape[d] for d in dims)
        return self.o.sum(x, dims, keepdim) / n

    def _softmax(self, x, dim, log):
        if dim is None:
            raise _Native
        m, s = self.o.logsumexp_parts(x, dim)
        return x - m - torch.log(s) if log else torch.exp(x - m) / s

    def _logsumexp(self, x, dim, keepdim=False):
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        if len(dims) != 1:
            raise _Native
        m, s = self.o.logsumexp_parts(x, dims[0])
        out = m + torch.log(s)
        return out if keepdim else out.squeeze(dims[0])

    def _stats(self, x, dims):
        n = math.prod(x.shape[d] for d in dims)
        mean = self.o.sum(x, dims, keepdim=True) / n
        var = self.o.sum((x - mean) ** 2, dims, keepdim=True) / n
        return mean, var

    def _layer_norm(self, x, shape, weight=None, bias=None, eps=1e-5):
        dims = tuple(range(x.dim() - len(shape), x.dim()))
        mean, var = self._stats(x, dims)
        y = (x - mean) / torch.sqrt(var + eps)
        y = y * weight if weight is not None else y
        return y + bias if bias is not None else y

    def _group_norm(self, x, groups, weight=None, bias=None, eps=1e-5):
        n, c = x.shape[:2]
        g = x.reshape(n, groups, -1)
        mean, var = self._stats(g, (2,))
        y = ((g - mean) / torch.sqrt(var + eps)).reshape(x.shape)
        shape = (1, c) + (1,) * (x.dim() - 2)
        y = y * weight.reshape(shape) if weight is not None else y
        return y + bias.reshape(shape) if bias is not None else y

    def _instance_norm(self, x, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                       momentum=0.1, eps=1e-5):
        if not use_input_stats:
            raise _Native
        mean, var = self._stats(x, tuple(range(2, x.dim())))
        y = (x - mean) / torch.sqrt(var + eps)
        shape = (1, x.shape[1]) + (1,) * (x.dim() - 2)
        y = y * weight.reshape(shape) if weight is not None else y
        return y + bias.reshape(shape) if bias is not None else y

    def _conv2d(self, x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
        if groups != 1 or isinstance(padding, str) or x.dim() != 4:
            raise _Native
        kh, kw = w.shape[2:]
        cols = F.unfold(x, (kh, kw), dilation=dilation, padding=padding, stride=stride)
        out = self.o.matmul(w.reshape(w.shape[0], -1), cols)
        p, s, d = (_pair(padding), _pair(stride), _pair(dilation))
        ho = (x.shape[2] + 2 * p[0] - d[0] * (kh - 1) - 1) // s[0] + 1
        wo = (x.shape[3] + 2 * p[1] - d[1] * (kw - 1) - 1) // s[1] + 1
        out = out.reshape(x.shape[0], w.shape[0], ho, wo)
        return out if b is None else out + b.reshape(1, -1, 1, 1)

    def _conv1d(self, x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
        if isinstance(padding, str) or x.dim() != 3:
            raise _Native
        return self._conv2d(x.unsqueeze(2), w.unsqueeze(2), b, (1, _one(stride)), (0, _one(padding)),
                            (1, _one(dilation)), groups).squeeze(2)

    def _conv_transpose2d(self, x, w, b=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
        if groups != 1 or x.dim() != 4:
            raise _Native
        cin, cout, kh, kw = w.shape
        n, _, h, wd = x.shape
        cols = self.o.matmul(w.reshape(cin, -1).t(), x.reshape(n, cin, h * wd))
        p, s, d, op = _pair(padding), _pair(stride), _pair(dilation), _pair(output_padding)
        ho = (h - 1) * s[0] - 2 * p[0] + d[0] * (kh - 1) + op[0] + 1
        wo = (wd - 1) * s[1] - 2 * p[1] + d[1] * (kw - 1) + op[1] + 1
        out = F.fold(cols, (ho, wo), (kh, kw), dilation=d, padding=p, stride=s)
        return out if b is None else out + b.reshape(1, -1, 1, 1)

    def _conv_transpose1d(self, x, w, b=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
        if x.dim() != 3:
            raise _Native
        return self._conv_transpose2d(x.unsqueeze(2), w.unsqueeze(2), b, (1, _one(stride)), (0, _one(padding)),
                                      (0, _one(output_padding)), groups, (1, _one(dilation))).squeeze(2)


class _Native(Exception):
    """This call's arguments are outside what the reordering covers: run the op natively."""


def _pair(v: Any) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else tuple(v)


def _one(v: Any) -> int:
    return v if isinstance(v, int) else v[0]


# ---- lower-precision variants ------------------------------------------------------------------------------

def _round(x: Any, dtype: torch.dtype) -> Any:
    if isinstance(x, torch.Tensor) and x.dtype == torch.float32:
        return x.to(dtype).to(torch.float32)
    if isinstance(x, (list, tuple)):
        return type(x)(_round(v, dtype) for v in x)
    return x


class OperandMode(TorchFunctionMode):
    """Every op's fp32 tensor operands rounded to `dtype` first: half-precision math, fp32 accumulation."""

    def __init__(self, dtype: torch.dtype):
        super().__init__()
        self.dtype = dtype

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name in ("__get__", "__set__", "size", "dim", "shape", "numel", "stride", "__setitem__") or \
                name.startswith(("is_", "_")):
            return func(*args, **kwargs)
        return func(*_round(args, self.dtype), **{k: _round(v, self.dtype) for k, v in kwargs.items()})


# ---- measurement -------------------------------------------------------------------------------------------

def _outputs(out: Any) -> list[torch.Tensor]:
    outs = out if isinstance(out, (tuple, list)) else [out]
    return [o for o in outs if isinstance(o, torch.Tensor) and o.is_floating_point()]


def _run(model: torch.nn.Module, inputs: list[Any], variant: str) -> tuple[list[torch.Tensor], int]:
    """(outputs, ops replaced) of `model` under `variant` ("native" or one of HONEST/DISHONEST)."""
    from workbench.tasks.precision import _Tf32Emulation

    with torch.no_grad():
        if variant == "native":
            return _outputs(model(*inputs)), 0
        if variant in HONEST:
            order = {"split-k": Reorder(CHUNK, False), "reversed": Reorder(CHUNK, True),
                     "sequential": Reorder(1, False)}[variant]
            mode = HonestMode(order)
            with mode:
                out = model(*inputs)
            return _outputs(out), mode.replaced
        if variant in ("fp16-inputs", "bf16-inputs"):
            dtype = torch.float16 if variant.startswith("fp16") else torch.bfloat16
            rounded = _copy_model(model, dtype)
            return _outputs(rounded(*_round(list(inputs), dtype))), 1
        if variant == "tf32-operands":
            with _Tf32Emulation(matmul=True, conv=True):
                return _outputs(model(*inputs)), 1
        dtype = torch.float16 if variant.startswith("fp16") else torch.bfloat16
        with OperandMode(dtype):
            return _outputs(model(*inputs)), 1


def _copy_model(model: torch.nn.Module, dtype: torch.dtype) -> torch.nn.Module:
    import copy

    m = copy.deepcopy(model)
    with torch.no_grad():
        for t in list(m.parameters()) + list(m.buffers()):
            if t.dtype == torch.float32:
                t.copy_(t.to(dtype).to(torch.float32))
    return m


def measure(task: Any, size: dict[str, Any], dist: str, seed: int = 0, device: str = "cpu") -> list[dict[str, Any]]:
    """One record per (variant, output) of `task` at `size` on `dist` inputs, on `device` under the task's
    precision policy (IEEE unless the task says otherwise: on a GPU this turns cuDNN's default TF32 off)."""
    from workbench.tasks.precision import applied

    ref = task.load()
    inputs = ref.make_inputs(size, seed, device, dist)
    torch.manual_seed(seed)
    model = ref.module.Model(*ref.init_inputs(size, seed)).eval().to(device)
    m64 = _copy64(model)
    with torch.no_grad():
        ref64 = _outputs(m64(*[x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x
                               for x in inputs]))
    with applied(task.precision, device):
        return _variants(task, model, inputs, ref64)


def _variants(task: Any, model: torch.nn.Module, inputs: list[Any], ref64: list[torch.Tensor]) -> list[dict]:
    native, _ = _run(model, inputs, "native")
    tol = task.tolerance("float32")
    records = []
    for variant in HONEST + DISHONEST:
        try:
            outs, replaced = _run(model, inputs, variant)
        except Exception as exc:  # noqa: BLE001 - a variant that cannot run this problem is skipped, visibly
            records.append({"variant": variant, "skipped": f"{type(exc).__name__}: {exc}"[:160]})
            continue
        for i, (o, n, r) in enumerate(zip(outs, native, ref64, strict=False)):
            records.append({"variant": variant, "output": i, "replaced": replaced,
                            "identical": bool(torch.equal(o, n)), **_errors(o, n, r, tol)})
    return records


def _copy64(model: torch.nn.Module) -> torch.nn.Module:
    import copy

    return copy.deepcopy(model).double()


def _errors(o: torch.Tensor, n: torch.Tensor, r: torch.Tensor, tol: Any) -> dict[str, float]:
    finite = torch.isfinite(r) & torch.isfinite(n.double())
    o64, n64, r = o.double()[finite], n.double()[finite], r[finite]
    if not r.numel():
        return {"native": 0.0, "error": 0.0, "ratio": float("nan"), "k_needed": 0.0, "tolerance_ok": True}
    e_native = float((n64 - r).abs().max())
    err = (o64 - r).abs()
    err = torch.nan_to_num(err, nan=float("inf"))
    over = err > tol.atol + tol.rtol * r.abs()
    worst_over = float(err[over].max()) if bool(over.any()) else 0.0
    k_needed = 0.0 if not worst_over else (worst_over / e_native if e_native > 0 else float("inf"))
    e_var = float(err.max())
    ratio = e_var / e_native if e_native > 0 else (float("nan") if e_var == 0 else float("inf"))
    return {"native": e_native, "error": e_var, "ratio": ratio, "k_needed": k_needed,
            "tolerance_ok": not bool(over.any())}


# ---- problems and reporting --------------------------------------------------------------------------------

def load_problems(folders: list[Path], levels: list[int]) -> list[Path]:
    paths: list[Path] = []
    for folder in folders:
        for level in levels:
            paths += sorted((folder / f"level{level}").glob("*.py"), key=lambda p: (len(p.name), p.name))
    return paths


def percentiles(values: list[float], qs=(0.5, 0.9, 0.95, 0.99, 1.0)) -> list[float]:
    vals = sorted(v for v in values if not math.isnan(v))
    if not vals:
        return [float("nan")] * len(qs)
    return [vals[min(len(vals) - 1, max(0, math.ceil(q * len(vals)) - 1))] for q in qs]


def report(rows: list[dict[str, Any]]) -> str:
    """Markdown tables: per variant, percentiles of E_variant / E_native (over problem x distribution x output where
    the variant changed the output and the native error is non-zero), and of the k it needs (where the tolerance
    alone rejects it)."""
    lines = ["| variant | kind | n | ratio p50 | p90 | p95 | p99 | max | beyond tolerance | k needed p50 | "
             "k min | k max |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for variant in HONEST + DISHONEST:
        kind = "honest" if variant in HONEST else "lower precision"
        rs = [r for r in rows if r.get("variant") == variant and "ratio" in r and not r["identical"]
              and r["native"] > 0]
        ratios = [r["ratio"] for r in rs]
        ks = [r["k_needed"] for r in rows if r.get("variant") == variant and "ratio" in r and not r["identical"]
              and not r["tolerance_ok"]]
        p = percentiles(ratios)
        kp = percentiles(ks, (0.5,)) + [min(ks) if ks else float("nan"), max(ks) if ks else float("nan")]
        lines.append(f"| {variant} | {kind} | {len(ratios)} | " + " | ".join(_fmt(v) for v in p) +
                     f" | {len(ks)} | " + " | ".join(_fmt(v) for v in kp) + " |")
    return "\n".join(lines)


def _fmt(v: float) -> str:
    if math.isnan(v):
        return "-"
    if math.isinf(v):
        return "inf"
    return f"{v:.3g}"


def main(argv: list[str] | None = None) -> int:
    import workbench as wb
    from workbench.tasks.fit import FitRules

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problems", action="append", default=[],
                        help="a folder with level1/, level2/ (repeatable; tests/kernelbench is always included)")
    parser.add_argument("--levels", default="1,2")
    parser.add_argument("--cap", type=int, default=256, help="fit cap per dimension (default 256)")
    parser.add_argument("--budget", type=int, default=1 << 18, help="fit element budget (default 2^18)")
    parser.add_argument("--limit", type=int, help="at most this many problems")
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda: whose native error is measured")
    parser.add_argument("--seconds", type=float, help="stop starting new problems after this many seconds")
    parser.add_argument("--out", help="JSON file for every record")
    args = parser.parse_args(argv)
    began = time.perf_counter()
    torch.set_num_threads(max(1, torch.get_num_threads()))
    rules = FitRules("error-budget", cap=args.cap, batch_cap=8, element_budget=args.budget, min_cap=16)
    levels = [int(v) for v in args.levels.split(",")]
    paths = load_problems([ROOT / "tests" / "kernelbench", *map(Path, args.problems)], levels)[:args.limit]
    rows: list[dict[str, Any]] = []
    for i, path in enumerate(paths, 1):
        started = time.perf_counter()
        if args.seconds and started - began > args.seconds:
            print(f"stopped after {i - 1} problems: --seconds {args.seconds:g} reached", flush=True)
            break
        try:
            task = wb.load_kernelbench(path, fit=rules)
            size = task.size("cpu")
            for dist in ("default", "normal"):
                for rec in measure(task, size, dist, device=args.device):
                    rows.append({"problem": f"{path.parent.parent.name}/{path.parent.name}/{path.name}",
                                 "dist": dist, **rec})
            status = "done"
        except Exception as exc:  # noqa: BLE001 - report and go on
            status = f"skipped ({type(exc).__name__}: {str(exc)[:120]})"
        print(f"[{i}/{len(paths)}] {path.parent.name}/{path.name}: {status} ({time.perf_counter() - started:.1f} s)",
              flush=True)
        if args.out:
            Path(args.out).write_text(json.dumps(rows, default=str))
    print(report(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
