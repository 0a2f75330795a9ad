"""Correctness protocol, run inside the worker (CHEATS.md rows 1, 2, 3, 11, 12 and the output type checks).

At least five rounds, each with fresh inputs from its own seed; sizes and input distributions cycle. A round:

1. candidate call #1 on clones of the inputs, with unused memory poisoned;
2. the reference in its native dtype (its output stays alive until the round ends), then in float64;
3. allocator cache emptied, memory poisoned again, candidate call #2 on fresh clones.

Why this order. A candidate that returns `torch.empty_like(x)` without writing it hopes the allocator hands it
the block that held the reference's result (KernelBench runs the reference first and frees its output). Call #1
runs before this round's reference has run at all; during call #2 the reference's output is alive, so its block
cannot be handed out. Every block the candidate can get instead holds the poison word: on a GPU the caching
allocator is emptied and refilled with poisoned blocks; on the CPU, where glibc may hand back any freed chunk, c10's
own allocator "junk fill" is switched on for the duration of the call, so every fresh CPU tensor starts poisoned.
Unwritten elements therefore show the poison pattern on both devices (`unwritten-output`, or `stale-memory` when
most of the output is unwritten); an output equal to an earlier round's reference result is `stale-memory` too.

Both calls are compared with the float64 reference using the tolerance of the reference's native output dtype
(|out - ref| <= atol + rtol |ref|), and with each other within the same bound: not bitwise, because honest GPU
kernels that reduce with atomics differ run to run in the last bits; a difference beyond the tolerance is a
race or a read of memory the kernel never wrote (`nondeterministic`).

Before the rounds, each input distribution is tried on the reference with separate probe inputs: one on which
the reference is not finite (log of negatives) while it is on the task's own inputs is skipped, with a note.
After them the task itself is judged (`weak-task`, a warning): when a constant passes the tolerance in every
round, or a fresh draw of one input leaves the reference within tolerance, a wrong candidate could pass.
"""

from __future__ import annotations

import contextlib
import copy
import ctypes
import gc
import os
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from workbench.errors import TaskError
from workbench.eval.findings import REJECT, Finding
from workbench.tasks.task import DISTRIBUTIONS, LoadedReference, Tolerance

#: The poison word: c10's CPU junk-fill pattern, also written into the GPU cache so one detector covers both.
#: As float32 it is a NaN; float64 reads two of them as 1.67e308; 16-bit types alternate 0xBEEF and 0x7FED.
POISON_WORD = 0x7FEDBEEF
#: An output with at least this share of its elements unwritten (or stale) was returned without being computed.
STALE_SHARE = 0.5
#: degenerate-output: the output's spread is below this fraction of the reference's.
DEGENERATE_RATIO = 1e-2
#: The reference's variation must exceed this many units in the last place of its dtype to be told apart.
RESOLVABLE_ULPS = 4
MIN_ROUNDS = 5
#: Earlier rounds' reference outputs kept (on the host) to recognise a stale result.
PRIOR_ROUNDS = 2
#: Error maps are max-pooled to at most this many cells per side.
MAP_CELLS = 64
_MAP_CAP = 1e6  # ratio cells are clamped here so the map stays finite (JSON)

_MIB = 1 << 20


class CandidateFailure(Exception):
    """The candidate's constructor (`stage="init"`) or forward (`stage="forward"`) raised.

    Kept apart from reference failures (TaskError): a broken task is not the candidate's fault.
    """

    def __init__(self, stage: str, original: BaseException):
        self.stage = stage
        self.original = original
        self.traceback_text = "".join(traceback.format_exception(type(original), original, original.__traceback__))
        super().__init__(f"candidate {stage} raised {type(original).__name__}: {original}")


@dataclass
class CheckReport:
    """What the protocol saw. `rounds`: one dict per round {size, dist, seed, max_abs, max_rel, ok, flags};
    `error_map`: |err| / (atol + rtol |ref|) of a 2-D output (leading dims flattened for N-D), max-pooled to at
    most 64 x 64, from the worst failing round, else the last one."""

    findings: list[Finding] = field(default_factory=list)
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    rounds: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error_map: list[list[float]] | None = None

    @property
    def passed(self) -> bool:
        return not any(f.severity == REJECT for f in self.findings)

    @property
    def flags(self) -> list[str]:
        return [f.flag for f in self.findings]

    def add(self, flag: str, detail: str = "") -> None:
        """Record a finding once per flag (the first occurrence's detail is the most telling)."""
        if not any(f.flag == flag for f in self.findings):
            self.findings.append(Finding(flag, detail))

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)


# ---- models ------------------------------------------------------------------------------------------------

def build_models(ref: LoadedReference, candidate_cls: type, size: dict, device: str, seed: int):
    """Reference `Model(*init_inputs)` and `candidate_cls(*init_inputs)`, each built under the same seed
    (KernelBench's rule); the candidate gets the reference's weights when its state_dict has the same keys and
    shapes, so parameters match even when it creates them in another order. Both on `device`, in eval mode."""
    init = ref.init_inputs(size, seed)
    try:
        torch.manual_seed(seed)
        ref_model = ref.module.Model(*copy.deepcopy(init))
        if isinstance(ref_model, torch.nn.Module):
            ref_model = ref_model.to(device).eval()
    except Exception as exc:
        raise TaskError(f"the reference Model could not be built at size {size}: {type(exc).__name__}: {exc}. "
                        "The task is broken, not the candidate: fix its Model or get_init_inputs.") from exc
    try:
        torch.manual_seed(seed)
        cand_model = candidate_cls(*copy.deepcopy(init))
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


# ---- small helpers ---------------------------------------------------------------------------------------------

def _as_list(out: Any) -> list[Any]:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _plain(t: Any) -> bool:
    """Exactly torch.Tensor: anything else may run code on access, so it is never touched."""
    return type(t) is torch.Tensor


def _clone(inputs: list[Any]) -> list[Any]:
    """Fresh memory with the same values (nested lists and tuples of tensors included)."""
    out = []
    for x in inputs:
        if isinstance(x, torch.Tensor):
            out.append(x.detach().clone())
        elif isinstance(x, (list, tuple)):
            out.append(type(x)(_clone(list(x))))
        else:
            out.append(copy.deepcopy(x))
    return out


def _bytes(t: torch.Tensor) -> torch.Tensor:
    return t.detach().contiguous().reshape(-1).view(torch.uint8)


def _same_bits(a: Any, b: Any) -> bool:
    """Bit-exact equality: NaN payloads compare equal, -0.0 differs from 0.0."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (_plain(a) and _plain(b)) or a.shape != b.shape or a.dtype != b.dtype:
            return False
        return bool(torch.equal(_bytes(a).cpu(), _bytes(b).cpu())) if a.device != b.device else \
            bool(torch.equal(_bytes(a), _bytes(b)))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same_bits(x, y) for x, y in zip(a, b, strict=False))
    try:
        return bool(a == b)
    except Exception:
        return False


def _to64(x: Any) -> Any:
    if isinstance(x, torch.Tensor) and x.is_floating_point():
        return x.detach().to(torch.float64)
    if isinstance(x, (list, tuple)):
        return type(x)(_to64(v) for v in x)
    return x


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _int_view(t: torch.Tensor) -> torch.Tensor | None:
    kind = {2: torch.int16, 4: torch.int32, 8: torch.int64}.get(t.element_size())
    if kind is None or t.is_complex():
        return None
    return t.detach().contiguous().view(kind)


def poison_mask(t: torch.Tensor) -> torch.Tensor | None:
    """Elements whose bits are the poison pattern (memory never written since it was poisoned)."""
    bits = _int_view(t)
    if bits is None:
        return None
    if bits.dtype == torch.int32:
        return bits == POISON_WORD
    if bits.dtype == torch.int64:
        return bits == (POISON_WORD << 32 | POISON_WORD)
    return (bits == (POISON_WORD & 0xFFFF) - 0x10000) | (bits == POISON_WORD >> 16)


# ---- poisoning ----------------------------------------------------------------------------------------------

_JUNK: list[Any] = []  # [flag] once looked up; [None] when this build has no junk-fill flag


def _junk_fill_flag() -> Any:
    """c10's `caffe2_cpu_allocator_do_junk_fill` switch (fills every new CPU allocation with POISON_WORD), or
    None where the library does not export it."""
    if not _JUNK:
        flag = None
        lib_dir = os.path.join(os.path.dirname(torch.__file__), "lib")
        for name in ("libc10.so", "libc10.dylib", "c10.dll"):
            path = os.path.join(lib_dir, name)
            if not os.path.exists(path):
                continue
            try:
                lib = ctypes.CDLL(path)
                junk = ctypes.c_bool.in_dll(lib, "FLAGS_caffe2_cpu_allocator_do_junk_fill")
                zero = ctypes.c_bool.in_dll(lib, "FLAGS_caffe2_cpu_allocator_do_zero_fill")
                # c10 refuses both fills at once (it raises on every allocation): leave a zero-fill setup alone.
                flag = None if zero.value else junk
            except (OSError, ValueError):
                flag = None
            break
        _JUNK.append(flag)
    return _JUNK[0]


class _Poison:
    """Makes memory a candidate allocates but never writes hold the poison pattern."""

    def __init__(self, device: str):
        self.device = device
        self.cuda = device.startswith("cuda")
        self.junk = None if self.cuda else _junk_fill_flag()

    def prepare(self, like: list[Any]) -> None:
        """Before a candidate call, after its inputs were cloned (so the clones do not take poisoned blocks)."""
        tensors = [t for t in like if _plain(t) and t.numel()]
        if self.cuda:
            self._refill_cuda_cache(tensors)
        elif self.junk is None:
            self._leave_poisoned_cpu_chunks(tensors)

    @contextlib.contextmanager
    def during_call(self) -> Iterator[None]:
        if self.junk is None:
            yield
            return
        before = self.junk.value
        self.junk.value = True
        try:
            yield
        finally:
            self.junk.value = before

    def _refill_cuda_cache(self, tensors: list[torch.Tensor]) -> None:
        # Free what the collector holds and hand every wholly free segment back to the driver. What the cache
        # still holds free are fragments of segments with live tensors in them; the allocator's best fit prefers
        # those, so each is taken with a request of its exact size and poisoned. Then new, wholly poisoned
        # segments: 2 MiB ones (pairs of 1 MiB blocks) for requests <= 1 MiB, and one >= 20 MiB block (its own
        # segment) that larger requests are split from. Freed, all of them stay cached for the candidate.
        gc.collect()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        dev = torch.device(self.device)
        index = dev.index if dev.index is not None else torch.cuda.current_device()
        blocks = [torch.empty(size, dtype=torch.uint8, device=dev) for size in _free_fragments(index)]
        need = sum(t.numel() * t.element_size() for t in tensors)
        free, _total = torch.cuda.mem_get_info(dev)
        big = min(max(4 * need, 32 * _MIB), free // 2) // (2 * _MIB) * (2 * _MIB)
        blocks += [torch.empty(_MIB, dtype=torch.uint8, device=dev) for _ in range(8)]
        if big >= 20 * _MIB:
            blocks.append(torch.empty(big, dtype=torch.uint8, device=dev))
        for b in blocks:
            b.view(torch.int32).fill_(POISON_WORD)
        torch.cuda.synchronize()
        del blocks

    def _leave_poisoned_cpu_chunks(self, tensors: list[torch.Tensor]) -> None:
        # Without the junk-fill switch: poisoned chunks of the sizes the candidate will likely ask for, freed
        # last, are what malloc tends to hand out next (not guaranteed; the other checks remain).
        blocks = []
        for t in tensors:
            n = -(-t.numel() * t.element_size() // 4)
            blocks += [torch.full((n,), POISON_WORD, dtype=torch.int32) for _ in range(2)]
        del blocks


def _free_fragments(device_index: int) -> list[int]:
    """Sizes of the free blocks the CUDA caching allocator holds on this device (bytes; empty where the allocator
    cannot say, e.g. with the cudaMallocAsync backend)."""
    try:
        segments = torch.cuda.memory_snapshot()
        stream = torch.cuda.current_stream(device_index).cuda_stream  # blocks serve requests of their own stream
    except Exception:  # pragma: no cover - depends on the allocator backend
        return []
    return [b["size"] for seg in segments if seg.get("device") == device_index and seg.get("stream", 0) == stream
            for b in seg.get("blocks", []) if b.get("state") == "inactive" and b.get("size", 0) >= 512]


# ---- comparison ---------------------------------------------------------------------------------------------

@dataclass
class Comparison:
    """One candidate output against the reference. `bad[i]`: elements of output i beyond tolerance (None where
    output i is not a comparable floating tensor); `ratio`: |err| / bound of the first >= 2-D output."""

    ok: bool
    max_abs: float | None
    max_rel: float | None
    ratio: torch.Tensor | None
    flags: list[tuple[str, str]]
    bad: list[torch.Tensor | None] = field(default_factory=list)
    worst: float = 0.0
    #: The output (or an element of a tuple) is not a plain tensor of the reference's kind: no value checks.
    malformed: bool = False
    poisoned: bool = False


_Compare = Comparison  # older name


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _form_problem(o: Any, rn: torch.Tensor, where: str) -> tuple[str, str] | None:
    """Type, materialization, shape, dtype and device of one output; None when it is a plain tensor like rn."""
    if not isinstance(o, torch.Tensor):
        return "wrong-type", f"{where}returned {type(o).__name__}, expected torch.Tensor"
    if not _plain(o):
        return "lazy-output", f"{where}returned {type(o).__module__}.{type(o).__name__}, a torch.Tensor subclass"
    if o.device.type == "meta" or o.layout != torch.strided or o.is_nested:
        return "lazy-output", f"{where}output is not a materialized dense tensor ({o.device}, {o.layout})"
    if o.shape != rn.shape:
        return "wrong-shape", f"{where}shape {tuple(o.shape)}, expected {tuple(rn.shape)}"
    if o.dtype != rn.dtype:
        return "wrong-dtype", f"{where}dtype {_dtype_name(o.dtype)}, expected {_dtype_name(rn.dtype)}"
    if o.device != rn.device:
        return "wrong-device", f"{where}device {o.device}, expected {rn.device}"
    return None


def compare(out: Any, ref64: Any, ref_native: Any, tol_for: Callable[[str], Tolerance]) -> Comparison:
    """`out` against the reference: form (type, shape, dtype, device), finiteness, poison, tolerance against the
    float64 result `ref64`, degenerate (constant) output. `ref_native` is the reference in its own dtype: it fixes
    the expected form, the tolerance, and where non-finite values are expected (NaN for NaN, same-signed Inf)."""
    outs, refs64, natives = _as_list(out), _as_list(ref64), _as_list(ref_native)
    cmp = Comparison(True, None, None, None, [], [None] * len(natives))
    if isinstance(ref_native, (tuple, list)) != isinstance(out, (tuple, list)) or len(outs) != len(natives):
        cmp.ok, cmp.malformed = False, True
        cmp.flags.append(("wrong-type", f"returned {type(out).__name__} with {len(outs)} item(s); the reference "
                                        f"returns {type(ref_native).__name__} with {len(natives)}"))
        return cmp
    for i, (o, r64, rn) in enumerate(zip(outs, refs64, natives, strict=False)):
        where = f"output {i}: " if len(outs) > 1 else ""
        if not isinstance(rn, torch.Tensor):
            if isinstance(o, torch.Tensor) or not _same_bits(o, rn):
                cmp.flags.append(("wrong-type" if isinstance(o, torch.Tensor) else "mismatch",
                                  f"{where}got {o!r:.80}, expected {rn!r:.80}"))
            continue
        problem = _form_problem(o, rn, where)
        if problem:
            cmp.flags.append(problem)
            cmp.malformed = True
            continue
        if not (o.is_floating_point() or o.is_complex()):
            if not torch.equal(o, rn):
                cmp.flags.append(("mismatch", f"{where}{int((o != rn).sum())} of {o.numel()} elements differ"))
            continue
        _compare_floats(cmp, i, o, r64, rn, tol_for(_dtype_name(rn.dtype)), where)
    cmp.ok = not cmp.flags
    return cmp


def _real(t: torch.Tensor) -> torch.Tensor:
    return torch.view_as_real(t) if t.is_complex() else t


def _compare_floats(cmp: Comparison, i: int, o: torch.Tensor, r64: Any, rn: torch.Tensor, tol: Tolerance,
                    where: str) -> None:
    poison = poison_mask(o)
    o64 = _real(o.detach()).to(torch.float64)
    n64 = _real(rn.detach()).to(torch.float64)
    e64 = _real(r64.detach()).to(device=o.device, dtype=torch.float64) if isinstance(r64, torch.Tensor) else n64
    if poison is not None and o.is_complex():
        poison = None
    if e64.shape != o64.shape:
        e64 = n64
    expect_finite = torch.isfinite(n64)
    # Where the native reference is not finite, the output must be the same non-finite value.
    same_special = (torch.isnan(o64) & torch.isnan(n64)) | (o64 == n64)
    special_bad = ~expect_finite & ~same_special
    exp = torch.where(torch.isfinite(e64), e64, n64)
    err = torch.where(expect_finite, (o64 - exp).abs(), torch.zeros_like(o64))
    err = torch.nan_to_num(err, nan=float("inf"), posinf=float("inf"))
    bound = tol.atol + tol.rtol * exp.abs()
    ratio = torch.where(expect_finite & (err > 0), err / bound, torch.zeros_like(err))
    ratio = torch.where(special_bad, torch.full_like(ratio, float("inf")), ratio)
    bad = ratio > 1
    cmp.bad[i] = bad
    if o64.numel():
        abs_err = float(err.max())
        rel_err = float((err / exp.abs().clamp_min(max(tol.atol, 1e-300))).max())
        cmp.max_abs = max(cmp.max_abs or 0.0, abs_err)
        cmp.max_rel = max(cmp.max_rel or 0.0, rel_err)
        cmp.worst = max(cmp.worst, float(ratio.max()))
    if cmp.ratio is None and o64.dim() >= 2:
        cmp.ratio = ratio.reshape(-1, ratio.shape[-1]) if ratio.dim() > 2 else ratio
    if poison is not None and poison.shape != bad.shape:  # complex views: element sizes differ
        poison = None
    unwritten = bad & poison if poison is not None else torch.zeros_like(bad)
    n_unwritten = int(unwritten.sum())
    if n_unwritten:
        cmp.poisoned = True
        share = n_unwritten / max(o.numel(), 1)
        if share >= STALE_SHARE:
            cmp.flags.append(("stale-memory", f"{where}{n_unwritten} of {o.numel()} elements still hold the poison "
                                              "written into free memory: the output was returned without being "
                                              "computed"))
        else:
            first = tuple(int(v) for v in torch.nonzero(unwritten)[0])
            cmp.flags.append(("unwritten-output", f"{where}{n_unwritten} of {o.numel()} elements still hold the "
                                                  f"poison written into free memory, the first at index {first}"))
    nonfinite = expect_finite & ~torch.isfinite(o64) & ~unwritten
    if bool(nonfinite.any()):
        first = tuple(int(v) for v in torch.nonzero(nonfinite)[0])
        cmp.flags.append(("non-finite", f"{where}{int(nonfinite.sum())} of {o.numel()} elements are NaN/Inf where the "
                                        f"reference is finite, the first at index {first}"))
    rest = bad & ~unwritten & ~(expect_finite & ~torch.isfinite(o64))
    if bool(rest.any()):
        idx = tuple(int(v) for v in torch.nonzero(rest)[0])
        cmp.flags.append(("mismatch", f"{where}{int(rest.sum())} of {o.numel()} elements beyond atol={tol.atol:g}, "
                                      f"rtol={tol.rtol:g}; max abs error {float(err.max()):.3g}; at index {idx} got "
                                      f"{float(o64[idx]):.6g}, expected {float(exp[idx]):.6g}"))
    degenerate = _degenerate(o64, exp, expect_finite, rn.dtype)
    if degenerate:
        cmp.flags.append(("degenerate-output", f"{where}{degenerate}"))


def _degenerate(o64: torch.Tensor, exp: torch.Tensor, finite: torch.Tensor, dtype: torch.dtype) -> str:
    """Non-empty when the output is (nearly) constant while the reference resolvably varies: a zero or constant
    result can hide inside the tolerance where the reference is small (CHEATS.md row 2)."""
    if o64.numel() < 2 or not bool(finite.all()) or not bool(torch.isfinite(o64).all()):
        return ""
    ref_std, out_std = float(exp.std()), float(o64.std())
    eps = torch.finfo(dtype).eps if dtype.is_floating_point else 0.0
    resolvable = RESOLVABLE_ULPS * eps * float(exp.abs().max())
    if ref_std > 0.0 and ref_std > resolvable and out_std <= DEGENERATE_RATIO * ref_std:
        kind = "zero" if float(o64.abs().max()) == 0.0 else "constant"
        return (f"the output is {kind} (std {out_std:.3g}, first value {float(o64.reshape(-1)[0]):.6g}) while the "
                f"reference varies (std {ref_std:.3g})")
    return ""


def _constant_passes(ref64: list[Any], natives: list[Any], tol_for: Callable[[str], Tolerance]) -> list[bool | None]:
    """Per output: would a constant (the midrange, or zero) pass the tolerance? None for scalars and non-floats."""
    verdicts: list[bool | None] = []
    for r64, rn in zip(ref64, natives, strict=False):
        if not (isinstance(rn, torch.Tensor) and rn.is_floating_point() and rn.numel() > 1):
            verdicts.append(None)
            continue
        tol = tol_for(_dtype_name(rn.dtype))
        e = r64.detach().to(torch.float64) if isinstance(r64, torch.Tensor) else rn.detach().to(torch.float64)
        e = e[torch.isfinite(e)]
        if not e.numel():
            verdicts.append(None)
            continue
        bound = tol.atol + tol.rtol * e.abs()
        mid = 0.5 * (float(e.max()) + float(e.min()))
        verdicts.append(bool(((e - mid).abs() <= bound).all()) or bool((e.abs() <= bound).all()))
    return verdicts


def _downsample(ratio: torch.Tensor, limit: int = MAP_CELLS) -> list[list[float]]:
    r = torch.nan_to_num(ratio.detach().to(torch.float32).cpu(), nan=_MAP_CAP, posinf=_MAP_CAP).clamp(0, _MAP_CAP)
    h, w = r.shape
    if not h or not w:
        return []
    kh, kw = -(-h // limit), -(-w // limit)
    if kh > 1 or kw > 1:
        r = torch.nn.functional.max_pool2d(r[None, None], (kh, kw), ceil_mode=True)[0, 0]
    return [[float(f"{v:.4g}") for v in row] for row in r.tolist()]


# ---- the reference -------------------------------------------------------------------------------------------------

def _reference64(ref_model: Any, inputs: list[Any], notes: list[str], model64: Any = None,
                 native: Any = None) -> list[Any]:
    """The reference in float64 where the op allows (model and floating inputs cast); else its native result,
    with a note. `model64` reuses an already converted model; `native` saves a call on the fallback."""
    try:
        if model64 is None:
            model64 = copy.deepcopy(ref_model)
            if isinstance(model64, torch.nn.Module):
                model64 = model64.double()
        with torch.no_grad():
            out = model64(*_to64(_clone(inputs)))
        return [_to64(o) for o in _as_list(out)]
    except Exception as exc:
        note = (f"the reference ran in its native precision: float64 failed ({type(exc).__name__}: "
                f"{str(exc)[:120]})")
        if note not in notes:
            notes.append(note)
        if native is None:
            with torch.no_grad():
                native = ref_model(*_clone(inputs))
        return [_to64(o) for o in _as_list(native)]


def _finite(out: Any) -> bool:
    return all(bool(torch.isfinite(t).all()) for t in _as_list(out)
               if isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex()))


# ---- the protocol --------------------------------------------------------------------------------------------------

def run_correctness(ref: LoadedReference, candidate_cls: type, *, device: str, sizes: list[dict], seed: int,
                    rounds: int = 5, tolerance: Callable[[str], Tolerance],
                    distributions: tuple[str, ...] = DISTRIBUTIONS,
                    call_guard: Callable[[], contextlib.AbstractContextManager] | None = None) -> CheckReport:
    """Run the protocol (module docstring) for `max(rounds, 5, len(sizes), len(distributions))` rounds, so every
    size and every distribution is seen. Raises CandidateFailure when the candidate raises, TaskError when the
    reference does. `call_guard()` wraps every candidate call; if the object it yields has `observe`, it is given
    each output."""
    return _Protocol(ref, candidate_cls, device, sizes, seed, tolerance, distributions, call_guard).run(rounds)


class _Protocol:
    def __init__(self, ref: LoadedReference, candidate_cls: type, device: str, sizes: list[dict], seed: int,
                 tolerance: Callable[[str], Tolerance], distributions: tuple[str, ...],
                 call_guard: Callable[[], contextlib.AbstractContextManager] | None):
        self.ref, self.cls, self.device, self.seed = ref, candidate_cls, device, seed
        self.sizes = list(sizes) or [{}]
        self.dists = list(dict.fromkeys(distributions)) or ["default"]
        self.tol, self.guard = tolerance, call_guard
        self.report = CheckReport()
        self.poison = _Poison(device)
        self.models: dict[int, tuple[Any, Any]] = {}
        self.models64: dict[int, Any] = {}
        self.skipped: set[str] = set()
        self.prior: list[list[torch.Tensor]] = []   # host copies of earlier rounds' native reference outputs
        self.out_like: dict[int, list[torch.Tensor]] = {}
        self.constant_rounds: list[list[bool | None]] = []
        self.scalars: dict[int, tuple[str, list[float]]] = {}
        self.input_numel: dict[int, int] = {}
        self.failing_map: tuple[float, list[list[float]]] | None = None
        self.last_map: list[list[float]] | None = None
        if not self.poison.cuda and self.poison.junk is None:
            self.report.note("CPU allocator poisoning is unavailable in this torch build: unwritten outputs are "
                             "caught by the two-call comparison only")

    # -- driver --
    def run(self, rounds: int) -> CheckReport:
        n = max(rounds, MIN_ROUNDS, len(self.sizes), len(self.dists))
        self._screen_distributions()
        for r in range(n):
            self._round(r, n)
        self._weak_task()
        report = self.report
        report.error_map = self.failing_map[1] if self.failing_map else self.last_map
        return report

    def _screen_distributions(self) -> None:
        """Skip, with a note, each distribution on which the reference is not finite (log of negatives) while it
        is on the task's own inputs. Judged on separate probe inputs before any candidate call, so no candidate
        runs on inputs that are then thrown away."""
        if all(d == "default" for d in self.dists):
            return
        model, size = self._models(0)[0], self.sizes[0]
        probe_seed = (self.seed * 1_000_003 + 15_485_863) % (1 << 62)
        if not _finite(self._reference(model, self._inputs(size, probe_seed, "default"), size, "default")):
            return  # non-finite values are part of the task: compared position by position instead
        for dist in self.dists:
            if dist != "default" and not _finite(self._reference(model, self._inputs(size, probe_seed, dist), size,
                                                                 dist)):
                self.skipped.add(dist)
                self.report.note(f"skipped {dist} inputs: the reference is not finite on them")

    def _dist(self, r: int) -> str:
        for k in range(len(self.dists)):
            d = self.dists[(r + k) % len(self.dists)]
            if d not in self.skipped:
                return d
        return "default"

    def _models(self, i: int) -> tuple[Any, Any]:
        if i not in self.models:
            same = next((j for j in self.models if self.sizes[j] == self.sizes[i]), None)
            self.models[i] = self.models[same] if same is not None else \
                build_models(self.ref, self.cls, self.sizes[i], self.device, self.seed)
        return self.models[i]

    def _ref64(self, i: int, ref_model: Any, inputs: list[Any], native: Any) -> list[Any]:
        """The float64 reference; after one failure at a size, its native result (noted) without retrying."""
        if i not in self.models64:
            try:
                m = copy.deepcopy(ref_model)
                self.models64[i] = m.double() if isinstance(m, torch.nn.Module) else m
            except Exception as exc:
                self.report.note(f"the reference ran in its native precision: it could not be converted to float64 "
                                 f"({type(exc).__name__})")
                self.models64[i] = None
        if self.models64[i] is not None:
            notes: list[str] = []
            out = _reference64(ref_model, inputs, notes, self.models64[i], native)
            if not notes:
                _sync(self.device)
                return out
            self.models64[i] = None
            for text in notes:
                self.report.note(text)
        return [_to64(o) for o in _as_list(native)]

    # -- calls --
    def _inputs(self, size: dict, seed: int, dist: str) -> list[Any]:
        try:
            return self.ref.make_inputs(size, seed, self.device, dist)
        except Exception as exc:
            raise TaskError(f"the task's inputs could not be made at size {size} ({dist} inputs): "
                            f"{type(exc).__name__}: {exc}. Fix the task's get_inputs.") from exc

    def _reference(self, model: Any, inputs: list[Any], size: dict, dist: str) -> Any:
        try:
            with torch.no_grad():
                out = model(*_clone(inputs))
            _sync(self.device)
            return out
        except Exception as exc:
            raise TaskError(f"the reference failed at size {size} ({dist} inputs): {type(exc).__name__}: {exc}. "
                            "The task is broken, not the candidate: fix its Model.forward or its sizes.") from exc

    def _candidate(self, model: Any, inputs: list[Any], like: list[Any]) -> tuple[Any, list[Any]]:
        """One candidate call on fresh clones in poisoned memory: (output, the clones it was given)."""
        given = _clone(inputs)
        self.poison.prepare(like)
        ctx = self.guard() if self.guard else contextlib.nullcontext()
        try:
            with ctx as watcher, torch.no_grad():
                with self.poison.during_call():
                    out = model(*given)
                if watcher is not None and hasattr(watcher, "observe"):
                    watcher.observe(out)  # the launch guard checks the output came from the candidate's kernels
            _sync(self.device)
        except CandidateFailure:
            raise
        except Exception as exc:
            raise CandidateFailure("forward", exc) from exc
        return out, given

    # -- one round --
    def _round(self, r: int, n: int) -> None:
        i = r % len(self.sizes)
        size = self.sizes[i]
        round_seed = (self.seed * 1_000_003 + 7919 * (r + 1)) % (1 << 62)
        ref_model, cand_model = self._models(i)
        dist = self._dist(r)
        inputs = self._inputs(size, round_seed, dist)
        like = [x for x in inputs if isinstance(x, torch.Tensor)] + self.out_like.get(i, [])
        out1, given1 = self._candidate(cand_model, inputs, like)
        # The reference in its native dtype; its output stays alive (this frame) through the second call.
        native = self._reference(ref_model, inputs, size, dist)
        self.input_numel.setdefault(i, sum(x.numel() for x in inputs if isinstance(x, torch.Tensor)))
        # Shapes only (meta tensors): they size the next poisoning without keeping this round's output alive.
        self.out_like[i] = [torch.empty_like(t, device="meta") for t in _as_list(native) if _plain(t)]
        ref64 = self._ref64(i, ref_model, inputs, native)
        where = f"round {r + 1} of {n} ({dist} inputs, size {size})"
        record: dict[str, Any] = {"size": size, "dist": dist, "seed": round_seed, "max_abs": None, "max_rel": None,
                                  "ok": True, "flags": []}
        flags: list[tuple[str, str]] = []
        cmp1 = compare(out1, ref64, native, self.tol)
        flags += [(f, f"{where}, call 1: {d}") for f, d in cmp1.flags]
        flags += self._mutation(given1, inputs, f"{where}, call 1")
        # Call 2: after the reference, with its output alive (and call 1's), on fresh clones in re-poisoned memory.
        out2, given2 = self._candidate(cand_model, inputs, like + self.out_like[i])
        cmp2 = compare(out2, ref64, native, self.tol)
        flags += [(f, f"{where}, call 2: {d}") for f, d in cmp2.flags]
        flags += self._mutation(given2, inputs, f"{where}, call 2")
        flags += self._stale_or_racy(out1, out2, cmp1, cmp2, native, ref64, where)
        for flag, detail in flags:
            self.report.add(flag, detail)
        record["flags"] = list(dict.fromkeys(f for f, _ in flags))
        record["ok"] = not any(Finding(f).severity == REJECT for f in record["flags"])
        for key, a, b in (("max_abs", cmp1.max_abs, cmp2.max_abs), ("max_rel", cmp1.max_rel, cmp2.max_rel)):
            vals = [v for v in (a, b) if v is not None]
            record[key] = max(vals) if vals else None
        self.report.rounds.append(record)
        if record["max_abs"] is not None:
            self.report.max_abs_err = max(self.report.max_abs_err or 0.0, record["max_abs"])
            self.report.max_rel_err = max(self.report.max_rel_err or 0.0, record["max_rel"])
        self._error_map(cmp1, cmp2, record["ok"])
        self._weak_stats(ref64, native)
        self.prior = (self.prior + [[t.detach().cpu().clone() for t in _as_list(native) if _plain(t)]])[-PRIOR_ROUNDS:]

    def _mutation(self, given: list[Any], inputs: list[Any], where: str) -> list[tuple[str, str]]:
        changed = [k for k, (a, b) in enumerate(zip(given, inputs, strict=False)) if not _same_bits(a, b)]
        if changed:
            return [("input-mutation", f"{where}: input(s) {changed} changed during forward")]
        return []

    def _stale_or_racy(self, out1: Any, out2: Any, cmp1: Comparison, cmp2: Comparison, native: Any, ref64: Any,
                       where: str) -> list[tuple[str, str]]:
        """Name what two calls on the same inputs reveal: a result from an earlier round (stale-memory), or two
        different answers (nondeterministic). Poisoned elements were already named by compare."""
        found: list[tuple[str, str]] = []
        for call, out, cmp in ((1, out1, cmp1), (2, out2, cmp2)):
            if not cmp.ok and not cmp.malformed and self._matches_prior(out, cmp):
                found.append(("stale-memory", f"{where}, call {call}: the output is an earlier round's reference "
                                              "result (memory the candidate never wrote)"))
        if found or cmp1.malformed or cmp2.malformed or cmp1.poisoned or cmp2.poisoned:
            return found
        worst = self._mutual_ratio(out1, out2, native, ref64)
        if worst > 1:
            found.append(("nondeterministic", f"{where}: two calls on the same inputs differ by up to {worst:.3g}x the "
                                              "tolerance"))
        return found

    def _matches_prior(self, out: Any, cmp: Comparison) -> bool:
        for o, bad in zip(_as_list(out), cmp.bad, strict=False):
            if bad is None or not bool(bad.any()):
                continue
            for old in (t for ts in self.prior for t in ts):
                if old.shape != o.shape or old.dtype != o.dtype:
                    continue
                old = old.to(o.device)
                same = (_bytes_per_element(o) == _bytes_per_element(old)) & (old != 0) & bad
                if int(same.sum()) >= STALE_SHARE * int(bad.sum()):
                    return True
        return False

    def _mutual_ratio(self, out1: Any, out2: Any, native: Any, ref64: Any) -> float:
        worst = 0.0
        for a, b, rn, r64 in zip(_as_list(out1), _as_list(out2), _as_list(native), _as_list(ref64), strict=False):
            if not (_plain(a) and _plain(b) and isinstance(rn, torch.Tensor)):
                continue
            if not (a.is_floating_point() or a.is_complex()):
                worst = max(worst, 0.0 if torch.equal(a, b) else float("inf"))
                continue
            tol = self.tol(_dtype_name(rn.dtype))
            a64, b64 = _real(a.detach()).double(), _real(b.detach()).double()
            scale = _real(r64.detach()).to(a64.device, torch.float64).abs() if isinstance(r64, torch.Tensor) \
                else a64.abs()
            same_nan = torch.isnan(a64) & torch.isnan(b64)
            diff = torch.where(same_nan | (a64 == b64), torch.zeros_like(a64), (a64 - b64).abs())
            diff = torch.nan_to_num(diff, nan=float("inf"), posinf=float("inf"))
            bound = tol.atol + tol.rtol * torch.nan_to_num(scale)
            if diff.numel():
                worst = max(worst, float(torch.where(diff == 0, torch.zeros_like(diff), diff / bound).max()))
        return worst

    # -- reporting --
    def _error_map(self, cmp1: Comparison, cmp2: Comparison, ok: bool) -> None:
        cmp = cmp2 if cmp2.ratio is not None and cmp2.worst > cmp1.worst else cmp1
        if cmp.ratio is None:
            return
        grid = _downsample(cmp.ratio)
        self.last_map = grid
        if not ok and (self.failing_map is None or cmp.worst > self.failing_map[0]):
            self.failing_map = (cmp.worst, grid)

    def _weak_stats(self, ref64: list[Any], native: Any) -> None:
        natives = _as_list(native)
        self.constant_rounds.append(_constant_passes(ref64, natives, self.tol))
        for k, (r64, rn) in enumerate(zip(ref64, natives, strict=False)):
            if isinstance(rn, torch.Tensor) and rn.is_floating_point() and rn.numel() == 1:
                self.scalars.setdefault(k, (_dtype_name(rn.dtype), []))[1].append(float(r64.reshape(-1)[0]))

    def _weak_task(self) -> None:
        """Warn when the task cannot tell right from wrong: a constant would pass, or an input does not matter."""
        report = self.report
        n_out = max((len(v) for v in self.constant_rounds), default=0)
        for k in range(n_out):
            verdicts = [v[k] for v in self.constant_rounds if k < len(v)]
            if verdicts and all(verdicts):
                report.add("weak-task", f"output {k}: a constant output passes the tolerance in every round")
                report.note(f"weak task: a constant passes the tolerance for output {k} in every round")
        for k, (dtype, values) in self.scalars.items():
            tol = self.tol(dtype)
            mid = 0.5 * (max(values) + min(values))
            if len(values) > 1 and all(abs(v - mid) <= tol.atol + tol.rtol * abs(v) for v in values):
                report.add("weak-task", f"output {k}: the same value in every round")
                report.note(f"weak task: output {k} does not change between rounds")
        try:
            self._ignored_inputs()
        except Exception as exc:  # advisory: a task whose inputs cannot be swapped one by one is not judged here
            report.note(f"the ignored-input probe was skipped ({type(exc).__name__}: {exc})")

    def _ignored_inputs(self) -> None:
        """Replace one input at a time by a fresh draw (smallest size, default distribution): an output that
        stays within tolerance means a candidate could ignore that input and pass."""
        i = min(self.input_numel, key=self.input_numel.get) if self.input_numel else 0
        size, model = self.sizes[i], self._models(i)[0]
        base_seed = (self.seed * 1_000_003 + 104_729) % (1 << 62)
        base = self._inputs(size, base_seed, "default")
        other = self._inputs(size, base_seed + 1, "default")
        base_out = _as_list(self._reference(model, base, size, "default"))
        for k, (x, y) in enumerate(zip(base, other, strict=False)):
            if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor) or x.shape != y.shape or \
                    _same_bits(x, y):
                continue
            swapped = list(base)
            swapped[k] = y
            out = _as_list(self._reference(model, swapped, size, "default"))
            if all(self._within(a, b) for a, b in zip(out, base_out, strict=False)):
                self.report.add("weak-task", f"replacing input {k} by a fresh draw leaves the reference output "
                                             "within tolerance: a candidate may ignore it")
                self.report.note(f"weak task: the reference output does not depend on input {k}")

    def _within(self, a: Any, b: Any) -> bool:
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            return _same_bits(a, b)
        if a.shape != b.shape:
            return False
        if not a.is_floating_point():
            return bool(torch.equal(a, b))
        tol = self.tol(_dtype_name(b.dtype))
        a64, b64 = a.double(), b.double()
        close = ((a64 - b64).abs() <= tol.atol + tol.rtol * b64.abs()) | (torch.isnan(a64) & torch.isnan(b64)) | \
            (a64 == b64)
        return bool(close.all())


def _bytes_per_element(t: torch.Tensor) -> torch.Tensor:
    """Elements as integers of the same width, so equality is bitwise (NaN payloads included)."""
    view = _int_view(t)
    return view if view is not None else t.detach()
