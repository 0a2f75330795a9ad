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

Every call of a round, the candidate's two and the reference's, starts from the same seed of the global RNG (as
KernelBench seeds before each model call): a reference that draws random numbers inside forward (KernelBench's
LSTM draws its initial states there) is then one function, and identical code is judged identical.

Inputs come from the task's own get_inputs with its random draws rerouted to the round's distribution
(workbench.tasks.inputs), so the structure it builds (triangles, symmetric matrices, class indices) is kept. Before
the rounds, each input distribution is tried on the reference with separate probe inputs: one on which the reference
is not finite (log of negatives, exp of large values) while it is on the task's own inputs is skipped, with a note,
and so is one that would repeat the task's own distribution (uniform inputs of a task that draws with torch.rand).
After them the task itself is judged (`weak-task`, a warning): when a constant passes the tolerance in every
round, or a fresh draw of one input leaves the reference within tolerance, a wrong candidate could pass.
"""

from __future__ import annotations

import contextlib
import copy
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from workbench.errors import TaskError
from workbench.eval.compare import (
    ERROR_BUDGET_K,
    STALE_SHARE,
    Comparison,
    compare,
    constant_passes,
    downsample,
    merge_budgets,
)
from workbench.eval.compare_chunked import CHUNK
from workbench.eval.findings import REJECT, Finding
from workbench.eval.poison import Poison
from workbench.eval.tensors import (
    all_finite,
    as_list,
    bytes_per_element,
    clone_inputs,
    dtype_name,
    is_plain,
    real_view,
    same_bits,
    sync,
    to64,
)
from workbench.eval.timing import seed_rng
from workbench.tasks.distributions import get_distribution
from workbench.tasks.reroute import DrawRecord
from workbench.tasks.task import DISTRIBUTIONS, LoadedReference, Tolerance

MIN_ROUNDS = 5

#: Earlier rounds' reference outputs kept (on the host) to recognise a stale result.
PRIOR_ROUNDS = 2


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
    #: How errors were judged, merged over every compared call: {tolerance, k, native_error (max abs), native_bound,
    #: bound ("tolerance" | "k x native" | "both"), worst_ratio, norm} (workbench.eval.compare.merge_budgets).
    error_budget: dict[str, Any] = field(default_factory=dict)

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

def build_models(ref: LoadedReference, candidate_cls: Any, size: dict, device: str, seed: int):
    """Reference `Model(*init_inputs)` and `candidate_cls(*init_inputs)`, each built under the same seed
    (KernelBench's rule); the candidate gets the reference's weights when its state_dict has the same keys and
    shapes, so parameters match even when it creates them in another order. Both on `device`, in eval mode.

    `candidate_cls` is a class (built here, in this process: unit tests of the protocol) or a candidate session
    (`session.CandidateSession`: built in its runner, which gets the same seed and the reference's weights)."""
    init = ref.init_inputs(size, seed)
    try:
        torch.manual_seed(seed)
        ref_model = ref.module.Model(*copy.deepcopy(init))
        if isinstance(ref_model, torch.nn.Module):
            ref_model = ref_model.to(device).eval()
    except Exception as exc:
        raise TaskError(f"the reference Model could not be built at size {size}: {type(exc).__name__}: {exc}. "
                        "The task is broken, not the candidate: fix its Model or get_init_inputs.") from exc
    if hasattr(candidate_cls, "model") and hasattr(candidate_cls, "runner"):
        return ref_model, candidate_cls.model(ref_model, copy.deepcopy(init), seed, {**ref.defaults, **size})
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

#: Above this many bytes of inputs plus output, the float64 reference runs on the host and the first call's output
#: waits there for the two-call comparison (a KernelBench L1 problem moves up to 12 GB).
HOST64_BYTES = 4 << 30


def _nbytes(items: list[Any]) -> int:
    return sum(t.numel() * t.element_size() for t in items if isinstance(t, torch.Tensor))


def _to_host(t: Any) -> Any:
    return t.cpu() if isinstance(t, torch.Tensor) and is_plain(t) and t.device.type != "cpu" else t


def reference64(ref_model: Any, inputs: list[Any], notes: list[str], model64: Any = None,
                 native: Any = None, seed: int | None = None) -> list[Any]:
    """The reference in float64 where the op allows (model and floating inputs cast); else its native result,
    with a note. `model64` reuses an already converted model; `native` saves a call on the fallback; `seed` seeds
    the global RNG before each call, as it was seeded before the native one."""
    try:
        if model64 is None:
            model64 = copy.deepcopy(ref_model)
            if isinstance(model64, torch.nn.Module):
                model64 = model64.double()
        seed_rng(seed)
        with torch.no_grad():
            out = model64(*to64(clone_inputs(inputs)))
        return [to64(o) for o in as_list(out)]
    except Exception as exc:
        note = (f"the reference ran in its native precision: float64 failed ({type(exc).__name__}: "
                f"{str(exc)[:120]})")
        if note not in notes:
            notes.append(note)
        if native is None:
            seed_rng(seed)
            with torch.no_grad():
                native = ref_model(*clone_inputs(inputs))
        return [to64(o) for o in as_list(native)]

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
        self.poison = Poison(device)
        self.models: dict[int, tuple[Any, Any]] = {}
        self.models64: dict[int, Any] = {}
        self.host64: dict[int, bool] = {}
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
        self._screen_distributions()
        kept = [d for d in self.dists if d not in self.skipped] or ["default"]
        n = max(rounds, MIN_ROUNDS, len(self.sizes), len(kept))
        for r in range(n):
            self._round(r, n)
        self._weak_task()
        report = self.report
        report.error_map = self.failing_map[1] if self.failing_map else self.last_map
        return report

    def _screen_distributions(self) -> None:
        """Skip each distribution that would repeat the task's own inputs: quietly where its draws already have
        that distribution (only torch.rand, for "uniform"), with a note where get_inputs draws no random values at
        all. Skip, with a note, each on which the reference is not finite (log of negatives, exp of large values)
        while it is on the task's own inputs. Judged on separate probe inputs before any candidate call, so no
        candidate runs on inputs that are then thrown away."""
        if all(d == "default" for d in self.dists):
            return
        model, size = self._models(0)[0], self.sizes[0]
        probe_seed = (self.seed * 1_000_003 + 15_485_863) % (1 << 62)
        finite: list[bool] = []  # the reference on the task's own probe inputs, computed when first needed
        not_random = []
        for dist in self.dists:
            if dist == "default":
                continue
            record = DrawRecord()
            inputs = self._inputs(size, probe_seed, dist, record)
            if "default" in self.dists and record.repeats_default(get_distribution(dist)):
                self.skipped.add(dist)  # the default rounds already cover it
                if not record.rerouted:
                    not_random.append(dist)
                continue
            if not finite:
                finite.append(all_finite(self._reference(model, self._inputs(size, probe_seed, "default"), size,
                                                         "default")))
            # Where the reference is not finite on its own inputs, that is part of the task: compared position by
            # position instead.
            if finite[0] and not all_finite(self._reference(model, inputs, size, dist)):
                self.skipped.add(dist)
                self.report.note(f"skipped {dist} inputs: the reference is not finite on them")
        if not_random:
            self.report.note(f"skipped {', '.join(not_random)} inputs: the task's get_inputs draws no random floating "
                             "values, so its own inputs are used")

    def _dist(self, r: int) -> str:
        kept = [d for d in self.dists if d not in self.skipped]
        return kept[r % len(kept)] if kept else "default"

    def _models(self, i: int) -> tuple[Any, Any]:
        if i not in self.models:
            same = next((j for j in self.models if self.sizes[j] == self.sizes[i]), None)
            self.models[i] = self.models[same] if same is not None else \
                build_models(self.ref, self.cls, self.sizes[i], self.device, self.seed)
        return self.models[i]

    def _ref64(self, i: int, ref_model: Any, inputs: list[Any], native: Any, seed: int | None = None) -> list[Any]:
        """The float64 reference; after one failure at a size, its native result (noted) without retrying."""
        if i not in self.models64:
            # A large problem computes its float64 reference on the host: on the GPU it would need twice the
            # memory of the inputs and the output again, beside the protocol's copies (DESIGN.md section 4).
            self.host64[i] = self.device.startswith("cuda") and _nbytes(inputs) + _nbytes(as_list(native)) > \
                HOST64_BYTES
            if self.host64[i]:
                self.report.note("the float64 reference ran on the host (a large problem)")
            try:
                m = copy.deepcopy(ref_model)
                if self.host64[i] and isinstance(m, torch.nn.Module):
                    m = m.cpu()
                self.models64[i] = m.double() if isinstance(m, torch.nn.Module) else m
            except Exception as exc:
                self.report.note(f"the reference ran in its native precision: it could not be converted to float64 "
                                 f"({type(exc).__name__})")
                self.models64[i] = None
        if self.models64[i] is not None:
            notes: list[str] = []
            args = [x.cpu() if isinstance(x, torch.Tensor) else x for x in inputs] if self.host64[i] else inputs
            out = reference64(ref_model, args, notes, self.models64[i], native, seed)
            if not notes:
                sync(self.device)
                return out
            self.models64[i] = None
            for text in notes:
                self.report.note(text)
        return [to64(o) for o in as_list(native)]

    # -- calls --
    def _inputs(self, size: dict, seed: int, dist: str, record: DrawRecord | None = None) -> list[Any]:
        try:
            return self.ref.make_inputs(size, seed, self.device, dist, note=self.report.note, record=record)
        except Exception as exc:
            raise TaskError(f"the task's inputs could not be made at size {size} ({dist} inputs): "
                            f"{type(exc).__name__}: {exc}. Fix the task's get_inputs.") from exc

    def _reference(self, model: Any, inputs: list[Any], size: dict, dist: str, seed: int | None = None) -> Any:
        try:
            seed_rng(seed)
            with torch.no_grad():
                out = model(*clone_inputs(inputs))
            sync(self.device)
            return out
        except Exception as exc:
            raise TaskError(f"the reference failed at size {size} ({dist} inputs): {type(exc).__name__}: {exc}. "
                            "The task is broken, not the candidate: fix its Model.forward or its sizes.") from exc

    def _candidate(self, model: Any, inputs: list[Any], like: list[Any], out_like: list[Any],
                   seed: int | None = None) -> tuple[Any, list[Any]]:
        """One candidate call on fresh clones in poisoned memory, the global RNG seeded with `seed` first: (output,
        the clones it was given). A remote model gets shared copies; its runner poisons its own memory and seeds its
        own RNG, and the shared inputs come back as they were left."""
        if getattr(model, "remote", False):
            return model.call(inputs, out_like, seed)
        given = clone_inputs(inputs)
        self.poison.prepare(like)
        ctx = self.guard() if self.guard else contextlib.nullcontext()
        try:
            with ctx as watcher, torch.no_grad():
                with self.poison.during_call():
                    seed_rng(seed)
                    out = model(*given)
                if watcher is not None and hasattr(watcher, "observe"):
                    watcher.observe(out)  # the launch guard checks the output came from the candidate's kernels
            sync(self.device)
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
        call_seed = (round_seed * 31 + 1) % (1 << 62)  # the RNG state every call of this round starts from
        ref_model, cand_model = self._models(i)
        dist = self._dist(r)
        inputs = self._inputs(size, round_seed, dist)
        if i not in self.out_like and getattr(cand_model, "remote", False):
            # A runner copies outputs into slots shaped like the reference's: learn the shapes first (the runner
            # never sees the reference's memory, so the order of the calls leaks nothing to it).
            self.out_like[i] = [torch.empty_like(t, device="meta") for t in as_list(
                self._reference(ref_model, inputs, size, dist, call_seed)) if is_plain(t)]
        like = [x for x in inputs if isinstance(x, torch.Tensor)] + self.out_like.get(i, [])
        out1, given1 = self._candidate(cand_model, inputs, like, self.out_like.get(i, []), call_seed)
        # The reference in its native dtype; its output stays alive (this frame) through the second call.
        native = self._reference(ref_model, inputs, size, dist, call_seed)
        self.input_numel.setdefault(i, sum(x.numel() for x in inputs if isinstance(x, torch.Tensor)))
        # Shapes only (meta tensors): they size the next poisoning without keeping this round's output alive.
        self.out_like[i] = [torch.empty_like(t, device="meta") for t in as_list(native) if is_plain(t)]
        ref64 = self._ref64(i, ref_model, inputs, native, call_seed)
        where = f"round {r + 1} of {n} ({dist} inputs, size {size})"
        record: dict[str, Any] = {"size": size, "dist": dist, "seed": round_seed, "max_abs": None, "max_rel": None,
                                  "ok": True, "flags": []}
        flags: list[tuple[str, str]] = []
        cmp1 = compare(out1, ref64, native, self.tol)
        flags += [(f, f"{where}, call 1: {d}") for f, d in cmp1.flags]
        flags += self._mutation(given1, inputs, f"{where}, call 1")
        if _nbytes(as_list(out1)) > HOST64_BYTES // 4:  # kept for the two-call comparison, on the host
            out1 = type(out1)(_to_host(o) for o in out1) if isinstance(out1, (tuple, list)) else _to_host(out1)
        # Call 2: after the reference, with its output alive (and call 1's), on fresh clones in re-poisoned memory.
        out2, given2 = self._candidate(cand_model, inputs, like + self.out_like[i], self.out_like[i], call_seed)
        cmp2 = compare(out2, ref64, native, self.tol)
        flags += [(f, f"{where}, call 2: {d}") for f, d in cmp2.flags]
        flags += self._mutation(given2, inputs, f"{where}, call 2")
        flags += self._stale_or_racy(out1, out2, cmp1, cmp2, native, ref64, where)
        self.report.error_budget = merge_budgets(self.report.error_budget, cmp1.budget, cmp2.budget)
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
        self.prior = (self.prior + [[t.detach().cpu().clone() for t in as_list(native) if is_plain(t)]])[-PRIOR_ROUNDS:]

    def _mutation(self, given: list[Any], inputs: list[Any], where: str) -> list[tuple[str, str]]:
        changed = [k for k, (a, b) in enumerate(zip(given, inputs, strict=False)) if not same_bits(a, b)]
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
        for o, bad in zip(as_list(out), cmp.bad, strict=False):
            if bad is None or not bool(bad.any()):
                continue
            for old in (t for ts in self.prior for t in ts):
                if old.shape != o.shape or old.dtype != o.dtype:
                    continue
                old, bad = old.to(o.device), bad.to(o.device)
                same = (bytes_per_element(o) == bytes_per_element(old)) & (old != 0) & bad
                if int(same.sum()) >= STALE_SHARE * int(bad.sum()):
                    return True
        return False

    def _mutual_ratio(self, out1: Any, out2: Any, native: Any, ref64: Any) -> float:
        """How far two calls on the same inputs differ, in units of the bound the error budget allows."""
        worst = 0.0
        for a, b, rn, r64 in zip(as_list(out1), as_list(out2), as_list(native), as_list(ref64), strict=False):
            if not (is_plain(a) and is_plain(b) and isinstance(rn, torch.Tensor)):
                continue
            if not (a.is_floating_point() or a.is_complex()):
                worst = max(worst, 0.0 if torch.equal(a, b) else float("inf"))
                continue
            tol = self.tol(dtype_name(rn.dtype))
            fa, fb = real_view(a.detach()).reshape(-1), real_view(b.detach()).reshape(-1)
            fr = real_view(r64.detach()).reshape(-1) if isinstance(r64, torch.Tensor) else None
            fn = real_view(rn.detach()).reshape(-1)
            # The same bound the error budget allows: honest atomics may reorder sums run to run.
            floor = 0.0
            if fr is not None and rn.is_floating_point():
                for s in range(0, fn.numel(), CHUNK):
                    e = (fn[s:s + CHUNK].double() - fr[s:s + CHUNK].to(fn.device, torch.float64)).abs()
                    e = e[torch.isfinite(e)]
                    if e.numel():
                        floor = max(floor, ERROR_BUDGET_K * float(e.max()))
            for s in range(0, fa.numel(), CHUNK):
                b64 = fb[s:s + CHUNK].double()
                a64 = fa[s:s + CHUNK].to(b64.device, torch.float64)  # the first call's output may be on the host
                scale = (fr[s:s + CHUNK].to(a64.device, torch.float64) if fr is not None else a64).abs()
                same = (torch.isnan(a64) & torch.isnan(b64)) | (a64 == b64)
                diff = torch.nan_to_num(torch.where(same, torch.zeros_like(a64), (a64 - b64).abs()), nan=float("inf"),
                                        posinf=float("inf"))
                bound = torch.clamp(tol.atol + tol.rtol * torch.nan_to_num(scale), min=floor)
                if diff.numel():
                    worst = max(worst, float(torch.where(diff == 0, torch.zeros_like(diff), diff / bound).max()))
        return worst

    # -- reporting --
    def _error_map(self, cmp1: Comparison, cmp2: Comparison, ok: bool) -> None:
        cmp = cmp2 if cmp2.ratio is not None and cmp2.worst > cmp1.worst else cmp1
        if cmp.ratio is None:
            return
        grid = downsample(cmp.ratio)
        self.last_map = grid
        if not ok and (self.failing_map is None or cmp.worst > self.failing_map[0]):
            self.failing_map = (cmp.worst, grid)

    def _weak_stats(self, ref64: list[Any], native: Any) -> None:
        natives = as_list(native)
        self.constant_rounds.append(constant_passes(ref64, natives, self.tol))
        for k, (r64, rn) in enumerate(zip(ref64, natives, strict=False)):
            if isinstance(rn, torch.Tensor) and rn.is_floating_point() and rn.numel() == 1:
                self.scalars.setdefault(k, (dtype_name(rn.dtype), []))[1].append(float(r64.reshape(-1)[0]))

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
        # One RNG state for both calls: only the swapped input may change the output.
        base_out = as_list(self._reference(model, base, size, "default", base_seed))
        for k, (x, y) in enumerate(zip(base, other, strict=False)):
            if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor) or x.shape != y.shape or \
                    same_bits(x, y):
                continue
            swapped = list(base)
            swapped[k] = y
            out = as_list(self._reference(model, swapped, size, "default", base_seed))
            if all(self._within(a, b) for a, b in zip(out, base_out, strict=False)):
                self.report.add("weak-task", f"replacing input {k} by a fresh draw leaves the reference output "
                                             "within tolerance: a candidate may ignore it")
                self.report.note(f"weak task: the reference output does not depend on input {k}")

    def _within(self, a: Any, b: Any) -> bool:
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            return same_bits(a, b)
        if a.shape != b.shape:
            return False
        if not a.is_floating_point():
            return bool(torch.equal(a, b))
        tol = self.tol(dtype_name(b.dtype))
        fa, fb = a.reshape(-1), b.reshape(-1)
        for s in range(0, fa.numel(), CHUNK):  # slices: outputs can be a billion elements
            a64, b64 = fa[s:s + CHUNK].double(), fb[s:s + CHUNK].double()
            close = ((a64 - b64).abs() <= tol.atol + tol.rtol * b64.abs()) | (torch.isnan(a64) & torch.isnan(b64)) | \
                (a64 == b64)
            if not bool(close.all()):
                return False
        return True
