"""Correctness protocol, run inside the worker (CHEATS.md rows 1, 2, 3, 11, 12 and the type checks).

Per round: fresh inputs from a fresh seed, cycling sizes and input distributions; memory poisoned with NaN;
candidate call #1 -> reference call (native dtype, output kept alive) -> allocator emptied -> candidate call #2
on fresh clones. Both candidate outputs must match the float64 reference within the dtype's tolerance and each
other; inputs must be bit-identical afterwards; outputs must be plain, materialized tensors of the reference's
shape, dtype and device, and not degenerate (constant) where the reference varies.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from workbench.errors import TaskError
from workbench.findings import REJECT, Finding
from workbench.task import LoadedReference, Tolerance


class CandidateFailure(Exception):
    """The candidate's constructor or forward raised; `stage` says which, `traceback_text` where."""

    def __init__(self, stage: str, original: BaseException):
        self.stage = stage
        self.original = original
        self.traceback_text = "".join(traceback.format_exception(type(original), original, original.__traceback__))
        super().__init__(f"{stage}: {type(original).__name__}: {original}")


@dataclass
class CheckReport:
    findings: list[Finding] = field(default_factory=list)
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    rounds: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error_map: list[list[float]] | None = None

    @property
    def passed(self) -> bool:
        return not any(f.severity == REJECT for f in self.findings)

    def add(self, flag: str, detail: str = "") -> None:
        if not any(f.flag == flag for f in self.findings):
            self.findings.append(Finding(flag, detail))


# ---- models ------------------------------------------------------------------------------------------

def build_models(ref: LoadedReference, candidate_cls: type, size: dict, device: str, seed: int):
    """Reference and candidate built from the same init inputs under the same seed (KernelBench's rule);
    the candidate gets the reference's weights when its state_dict has the same keys and shapes."""
    init = ref.init_inputs(size, seed)
    try:
        torch.manual_seed(seed)
        ref_model = ref.module.Model(*copy.deepcopy(init))
    except Exception as exc:
        raise TaskError(f"the reference Model could not be built: {type(exc).__name__}: {exc}") from exc
    try:
        torch.manual_seed(seed)
        cand_model = candidate_cls(*copy.deepcopy(init))
    except Exception as exc:
        raise CandidateFailure("init", exc) from exc
    ref_model = ref_model.to(device).eval() if isinstance(ref_model, torch.nn.Module) else ref_model
    try:
        if isinstance(cand_model, torch.nn.Module):
            _copy_weights(ref_model, cand_model)
            cand_model = cand_model.to(device).eval()
    except Exception as exc:
        raise CandidateFailure("init", exc) from exc
    return ref_model, cand_model


def _copy_weights(ref_model: Any, cand_model: torch.nn.Module) -> None:
    if not isinstance(ref_model, torch.nn.Module):
        return
    rs, cs = ref_model.state_dict(), cand_model.state_dict()
    if rs and rs.keys() == cs.keys() and all(rs[k].shape == cs[k].shape for k in rs):
        cand_model.load_state_dict(rs)


# ---- helpers -------------------------------------------------------------------------------------------

def _as_list(out: Any) -> list[Any]:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _clone(inputs: list[Any]) -> list[Any]:
    return [x.clone() if isinstance(x, torch.Tensor) else copy.deepcopy(x) for x in inputs]


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point() or a.is_complex():
        both_nan = torch.isnan(a) & torch.isnan(b)
        return bool(torch.equal(torch.where(both_nan, torch.zeros_like(a), a), torch.where(both_nan, torch.zeros_like(b), b)))
    return bool(torch.equal(a, b))


def _to64(x: Any) -> Any:
    if isinstance(x, torch.Tensor) and x.is_floating_point():
        return x.detach().to(torch.float64)
    return x


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def poison_memory(device: str, like: list[torch.Tensor]) -> None:
    """Leave NaN in the allocator's free blocks so an output the candidate never writes shows up as NaN.

    On a GPU the caching allocator hands a same-size request the block just freed, so blocks of the outputs'
    sizes filled with NaN and freed are what `torch.empty_like` returns next (CHEATS.md row 1).
    """
    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    blocks = []
    for t in like:
        if isinstance(t, torch.Tensor) and t.numel():
            dtype = t.dtype if t.is_floating_point() else torch.float32
            for _ in range(4):
                blocks.append(torch.full(t.shape, float("nan"), dtype=dtype, device=device))
    _sync(device)
    del blocks


def _downsample(ratio: torch.Tensor, limit: int = 64) -> list[list[float]]:
    r = ratio.detach().to(torch.float32).cpu()
    h, w = r.shape
    kh, kw = max(1, -(-h // limit)), max(1, -(-w // limit))
    if kh > 1 or kw > 1:
        r = torch.nn.functional.max_pool2d(r[None, None], (kh, kw), ceil_mode=True)[0, 0]
    return [[round(float(v), 4) for v in row] for row in r]


# ---- comparisons ---------------------------------------------------------------------------------------

@dataclass
class _Compare:
    ok: bool
    max_abs: float
    max_rel: float
    ratio: torch.Tensor | None
    flags: list[tuple[str, str]]


def compare(out: Any, ref64: Any, ref_native: Any, tol_for: Callable[[str], Tolerance]) -> _Compare:
    """Type, shape, dtype, device, finiteness and tolerance of `out` against the reference."""
    outs, refs64, natives = _as_list(out), _as_list(ref64), _as_list(ref_native)
    flags: list[tuple[str, str]] = []
    if isinstance(ref_native, (tuple, list)) != isinstance(out, (tuple, list)) or len(outs) != len(natives):
        return _Compare(False, float("inf"), float("inf"), None,
                        [("wrong-type", f"returned {type(out).__name__} with {len(outs)} item(s), the reference "
                                        f"returns {type(ref_native).__name__} with {len(natives)}")])
    max_abs = max_rel = 0.0
    ratio_map = None
    for i, (o, r64, rn) in enumerate(zip(outs, refs64, natives)):
        where = f"output {i}: " if len(outs) > 1 else ""
        if not isinstance(rn, torch.Tensor):
            if o != rn:
                flags.append(("mismatch", f"{where}{o!r} != {rn!r}"))
            continue
        if not isinstance(o, torch.Tensor):
            flags.append(("wrong-type", f"{where}returned {type(o).__name__}, expected torch.Tensor"))
            continue
        if type(o) is not torch.Tensor:
            flags.append(("lazy-output", f"{where}returned {type(o).__module__}.{type(o).__name__}, a Tensor subclass"))
            continue
        if o.device.type == "meta" or o.is_sparse or (hasattr(o, "_is_view") and o.layout != torch.strided):
            flags.append(("lazy-output", f"{where}output is not a materialized dense tensor ({o.device}, {o.layout})"))
            continue
        if o.shape != rn.shape:
            flags.append(("wrong-shape", f"{where}shape {tuple(o.shape)}, expected {tuple(rn.shape)}"))
            continue
        if o.dtype != rn.dtype:
            flags.append(("wrong-dtype", f"{where}dtype {o.dtype}, expected {rn.dtype}"))
            continue
        if o.device.type != rn.device.type:
            flags.append(("wrong-device", f"{where}device {o.device}, expected {rn.device}"))
            continue
        if not o.is_floating_point():
            if not torch.equal(o.cpu(), rn.cpu()):
                flags.append(("mismatch", f"{where}{int((o.cpu() != rn.cpu()).sum())} integer elements differ"))
            continue
        tol = tol_for(str(rn.dtype).removeprefix("torch."))
        o64 = o.detach().to(torch.float64)
        r64 = r64.to(o64.device)
        ref_finite = torch.isfinite(r64)
        out_bad = ~torch.isfinite(o64) & ref_finite
        if bool(out_bad.any()):
            n = int(out_bad.sum())
            flags.append(("non-finite", f"{where}{n} of {o.numel()} elements are NaN/Inf where the reference is finite"))
        err = torch.where(ref_finite, (o64 - r64).abs(), torch.zeros_like(o64))
        err = torch.where(torch.isnan(err), torch.full_like(err, float("inf")), err)
        bound = tol.atol + tol.rtol * r64.abs()
        ratio = torch.where(ref_finite, err / bound, torch.zeros_like(err))
        a = float(err.max()) if err.numel() else 0.0
        rel = float((err / r64.abs().clamp_min(tol.atol)).max()) if err.numel() else 0.0
        max_abs, max_rel = max(max_abs, a), max(max_rel, rel)
        if o.dim() == 2 and ratio_map is None:
            ratio_map = ratio
        bad = ratio > 1
        if bool(bad.any()) and not out_bad.any():
            idx = tuple(int(v) for v in torch.nonzero(bad)[0])
            flags.append(("mismatch", f"{where}{int(bad.sum())} of {o.numel()} elements beyond atol={tol.atol:g}, "
                                      f"rtol={tol.rtol:g}; max abs error {a:.3g}, first at index {idx}: got "
                                      f"{float(o64[idx]):.6g}, expected {float(r64[idx]):.6g}"))
        elif bool(bad.any()):
            pass  # already reported as non-finite
        # Degenerate output: constant where the reference varies (may pass a loose tolerance; CHEATS.md row 2).
        if o.numel() > 1:
            ref_spread = float((r64[ref_finite].max() - r64[ref_finite].min())) if bool(ref_finite.any()) else 0.0
            out_spread = float(o64.max() - o64.min())
            if out_spread == 0.0 and ref_spread > 0.0:
                flags.append(("degenerate-output", f"{where}every element equals {float(o64.flatten()[0]):.6g} while "
                                                   f"the reference spans {ref_spread:.3g}"))
    return _Compare(not flags, max_abs, max_rel, ratio_map, flags)


# ---- the protocol ----------------------------------------------------------------------------------------

def _call(model: Any, inputs: list[Any], guard: Callable[[], Any] | None):
    ctx = guard() if guard else contextlib.nullcontext()
    try:
        with ctx as watcher, torch.no_grad():
            out = model(*inputs)
            if watcher is not None and hasattr(watcher, "observe"):
                watcher.observe(out)  # the launch guard checks the output came from the candidate's kernels
            return out
    except CandidateFailure:
        raise
    except Exception as exc:
        raise CandidateFailure("forward", exc) from exc


def _reference64(ref_model: Any, inputs: list[Any], notes: list[str]):
    """The reference in float64 where the op allows; else its native precision (with a note)."""
    try:
        model64 = copy.deepcopy(ref_model)
        if isinstance(model64, torch.nn.Module):
            model64 = model64.double()
        with torch.no_grad():
            out = model64(*[_to64(x) for x in inputs])
        return [_to64(o) for o in _as_list(out)]
    except Exception as exc:
        note = f"reference ran in its native precision (float64 failed: {type(exc).__name__})"
        if note not in notes:
            notes.append(note)
        with torch.no_grad():
            out = ref_model(*_clone(inputs))
        return [_to64(o) for o in _as_list(out)]


def run_correctness(ref: LoadedReference, candidate_cls: type, *, device: str, sizes: list[dict], seed: int,
                    rounds: int = 5, tolerance: Callable[[str], Tolerance],
                    distributions: tuple[str, ...] = ("default", "normal", "heavy", "negative", "uniform"),
                    call_guard: Callable[[], Any] | None = None) -> CheckReport:
    report = CheckReport()
    rounds = max(rounds, 5)
    sizes = sizes or [{}]
    dists = list(distributions) or ["default"]
    models: dict[int, tuple[Any, Any]] = {}
    skipped: set[str] = set()
    ref_spreads: list[float] = []
    worst_ratio = -1.0
    prev_ref: list[torch.Tensor] = []
    for r in range(rounds):
        size_i = r % len(sizes)
        size = sizes[size_i]
        dist = dists[r % len(dists)]
        if dist in skipped:
            dist = "default"
        round_seed = seed * 1_000_003 + 7919 * (r + 1)
        if size_i not in models:
            models[size_i] = build_models(ref, candidate_cls, size, device, seed)
        ref_model, cand_model = models[size_i]
        try:
            inputs = ref.make_inputs(size, round_seed, device, dist)
            ref64 = _reference64(ref_model, inputs, report.notes)
        except Exception as exc:
            raise TaskError(f"the reference failed at size {size} ({dist} inputs): {type(exc).__name__}: {exc}") from exc
        if any(isinstance(t, torch.Tensor) and t.is_floating_point() and not bool(torch.isfinite(t).all()) for t in ref64):
            if dist != "default":
                skipped.add(dist)
                report.notes.append(f"skipped {dist} inputs: the reference is not finite on them")
                dist = "default"
                inputs = ref.make_inputs(size, round_seed, device, dist)
                ref64 = _reference64(ref_model, inputs, report.notes)
        record = {"size": size, "dist": dist, "seed": round_seed, "max_abs": None, "max_rel": None, "ok": False}
        report.rounds.append(record)

        # Candidate call #1 on clones; inputs compared bit-exactly afterwards.
        with torch.no_grad():
            shape_probe = [o for o in _as_list(ref_model(*_clone(inputs))) if isinstance(o, torch.Tensor)]
        c_in = _clone(inputs)  # cloned before poisoning so the clones do not take the poisoned blocks
        poison_memory(device, shape_probe)
        del shape_probe
        out1 = _call(cand_model, c_in, call_guard)
        _sync(device)
        if any(isinstance(a, torch.Tensor) and not _same_bits(a, b) for a, b in zip(c_in, inputs)):
            changed = [i for i, (a, b) in enumerate(zip(c_in, inputs)) if isinstance(a, torch.Tensor) and not _same_bits(a, b)]
            report.add("input-mutation", f"input(s) {changed} changed during forward")

        # Reference in native precision; its output stays alive while the candidate runs again.
        with torch.no_grad():
            ref_native = ref_model(*_clone(inputs))
        first = compare(out1, ref64, ref_native, tolerance)
        _stale_or_unwritten(report, out1, prev_ref, first)
        for flag, detail in first.flags:
            report.add(flag, f"round {r + 1} ({dist} inputs, size {size}): {detail}")
        record.update(max_abs=first.max_abs, max_rel=first.max_rel, ok=first.ok)
        if report.max_abs_err is None or first.max_abs > report.max_abs_err:
            report.max_abs_err = first.max_abs
        report.max_rel_err = max(report.max_rel_err or 0.0, first.max_rel)
        if first.ratio is not None:
            worst = float(first.ratio.max()) if first.ratio.numel() else 0.0
            if worst > worst_ratio:
                worst_ratio, report.error_map = worst, _downsample(first.ratio)

        # Candidate call #2 on fresh clones, after the allocator was emptied: must agree with call #1.
        out1_cpu = [o.detach().cpu().clone() if isinstance(o, torch.Tensor) else o for o in _as_list(out1)]
        del out1
        c_in2 = _clone(inputs)
        poison_memory(device, [o for o in out1_cpu if isinstance(o, torch.Tensor)])
        out2 = _call(cand_model, c_in2, call_guard)
        _sync(device)
        second = compare(out2, ref64, ref_native, tolerance)
        o2_cpu = [o.detach().cpu() if isinstance(o, torch.Tensor) else o for o in _as_list(out2)]
        if not first.ok and any(isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape
                                and a.dtype == b.dtype and not _same_bits(a, b) for a, b in zip(out1_cpu, o2_cpu)):
            # Same inputs, different memory state, different wrong answer: it reads memory it never wrote.
            report.add("stale-memory", f"round {r + 1}: two calls on the same inputs returned different wrong "
                                       "values, so the output depends on leftover memory")
        if first.ok and not second.ok:
            prior = [o.detach().cpu() for o in prev_ref]
            names = {f for f, _ in second.flags}
            if _matches_any(out2, prior) or _matches_any(out2, [o.cpu() for o in _as_list(ref_native) if isinstance(o, torch.Tensor)]):
                report.add("stale-memory", f"round {r + 1}: the second call returned memory holding an earlier result")
            elif names & {"non-finite"}:
                report.add("unwritten-output", f"round {r + 1}: the second call left elements unwritten")
            else:
                report.add("nondeterministic", f"round {r + 1}: the second call disagrees: {second.flags[0][1]}")
        elif first.ok and second.ok:
            for a, b in zip(out1_cpu, o2_cpu):
                if isinstance(a, torch.Tensor) and a.is_floating_point():
                    tol = tolerance(str(a.dtype).removeprefix("torch."))
                    if not torch.allclose(a.to(torch.float64), b.to(torch.float64), atol=tol.atol, rtol=tol.rtol, equal_nan=True):
                        report.add("nondeterministic", f"round {r + 1}: two calls on the same inputs disagree")
        if any(isinstance(a, torch.Tensor) and not _same_bits(a, b) for a, b in zip(c_in2, inputs)):
            report.add("input-mutation", f"round {r + 1}: inputs changed during the second call")
        del out2
        prev_ref = [o.detach() for o in _as_list(ref_native) if isinstance(o, torch.Tensor)]
        ref_spreads.append(max((float(t.max() - t.min()) for t in ref64 if isinstance(t, torch.Tensor) and t.numel() and t.is_floating_point()), default=0.0))
        del ref_native
    _weak_task_checks(report, ref, models, sizes, seed, device, ref_spreads)
    return report


def _matches_any(out: Any, candidates: list[torch.Tensor]) -> bool:
    for o in _as_list(out):
        if not isinstance(o, torch.Tensor):
            continue
        oc = o.detach().cpu()
        for c in candidates:
            if c.shape == oc.shape and c.dtype == oc.dtype and bool(torch.equal(c.cpu(), oc)):
                return True
    return False


def _stale_or_unwritten(report: CheckReport, out: Any, prev_ref: list[torch.Tensor], cmp: _Compare) -> None:
    """Name the failure when the candidate returned memory it never wrote (poison or an old result)."""
    if cmp.ok:
        return
    for o in _as_list(out):
        if not isinstance(o, torch.Tensor) or type(o) is not torch.Tensor or not o.is_floating_point() or o.device.type == "meta":
            continue
        nan = torch.isnan(o)
        if prev_ref and _matches_any(o, [p.cpu() for p in prev_ref]):
            report.add("stale-memory", "the output is the reference's result from an earlier call (memory it never wrote)")
        elif float(nan.float().mean()) >= 0.5:
            # (A few elements may hold allocator bookkeeping instead of the poison.)
            report.add("stale-memory", f"{int(nan.sum())} of {o.numel()} output elements were never written: it "
                                       "returns allocated memory as the result")
        elif bool(nan.any()):
            report.add("unwritten-output", f"{int(nan.sum())} of {o.numel()} output elements still hold the NaN poison")


def _weak_task_checks(report: CheckReport, ref: LoadedReference, models: dict, sizes: list[dict], seed: int,
                      device: str, ref_spreads: list[float]) -> None:
    """Warn when the task itself cannot tell right from wrong (constant output, an input that is ignored)."""
    if ref_spreads and max(ref_spreads) == 0.0:
        report.add("weak-task", "the reference output is constant on every round")
        report.notes.append("weak task: the reference output is constant")
        return
    ref_model = models[0][0]
    try:
        base = ref.make_inputs(sizes[0], seed + 17, device, "default")
        with torch.no_grad():
            base_out = [o for o in _as_list(ref_model(*_clone(base))) if isinstance(o, torch.Tensor)]
        other = ref.make_inputs(sizes[0], seed + 18, device, "default")
        for i, x in enumerate(base):
            if not (isinstance(x, torch.Tensor) and x.is_floating_point()):
                continue
            swapped = list(_clone(base))
            swapped[i] = other[i]
            with torch.no_grad():
                out = [o for o in _as_list(ref_model(*swapped)) if isinstance(o, torch.Tensor)]
            if all(a.shape == b.shape and torch.equal(a, b) for a, b in zip(base_out, out)):
                report.add("weak-task", f"the reference output does not depend on input {i}")
                report.notes.append(f"weak task: input {i} does not change the reference output")
    except Exception as exc:  # the probe is advisory; a failure here must not fail the candidate
        report.notes.append(f"weak-task probe skipped ({type(exc).__name__})")
