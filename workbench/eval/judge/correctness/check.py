"""The correctness protocol (docs/anti-cheating.md, cheats 1, 2, 3, 11, 12) over the rounds of `ReferenceRounds`: each
calls the candidate twice from one seed on fresh copies in poisoned memory (unwritten elements show the poison, an
earlier result is `stale-memory`), each call held to the float64 reference and the two to each other."""

from __future__ import annotations

import contextlib
import copy
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from workbench.eval.checks.flags import REJECT, Finding
from workbench.eval.judge.correctness import compare_fused as fused
from workbench.eval.judge.correctness import mismatch_hint
from workbench.eval.judge.correctness.compare import (
    CHUNK,
    ERROR_BUDGET_K,
    Comparison,
    compare,
    error_map,
    merge_budgets,
    native_scale,
)
from workbench.eval.judge.correctness.prior_outputs import PriorOutput
from workbench.eval.judge.reference.float64 import nbytes as _nbytes
from workbench.eval.judge.reference.rounds import MIN_ROUNDS, ReferenceRounds, RoundData
from workbench.eval.runner.poison import Poison
from workbench.eval.wire import model_init
from workbench.eval.wire.tensors import (
    LARGE_OUTPUT_BYTES,
    as_list,
    clone_inputs,
    dtype_name,
    is_plain,
    real_view,
    same_bits,
    sync,
)
from workbench.eval.wire.timed_loop import seed_rng
from workbench.seeding import seed_all
from workbench.tasks.task import DISTRIBUTIONS, LoadedReference, Tolerance

__all__ = ["MIN_ROUNDS", "CandidateFailure", "CheckReport", "build_candidate", "run_correctness"]

class CandidateFailure(Exception):
    """The candidate raised at `stage` ("init", "forward", ...); not a TaskError: a broken task is not its fault."""

    def __init__(self, stage: str, original: BaseException):
        self.stage = stage
        self.original = original
        self.traceback_text = "".join(traceback.format_exception(type(original), original, original.__traceback__))
        super().__init__(f"candidate {stage} raised {type(original).__name__}: {original}")


@dataclass
class CheckReport:
    """What the protocol saw: per round {size, dist, seed, max_abs, max_rel, ok, flags}; the error map of the worst
    failing round (`error_map_round`, 1-based), else the last; the merged error budget; seconds per phase."""

    findings: list[Finding] = field(default_factory=list)
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    rounds: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error_map: dict[str, Any] | None = None
    error_map_round: int | None = None
    error_budget: dict[str, Any] = field(default_factory=dict)
    phases: dict[str, float] = field(default_factory=dict)
    _worst: dict[str, float] = field(default_factory=dict, repr=False)

    @property
    def passed(self) -> bool:
        return not any(f.severity == REJECT for f in self.findings)

    @property
    def flags(self) -> list[str]:
        return [f.flag for f in self.findings]

    def add(self, flag: str, detail: str = "", worst: float | None = None) -> None:
        """Record a finding once per flag (a `mismatch` names the comparison with the worst error ratio)."""
        found = next((f for f in self.findings if f.flag == flag), None)
        if found is None:
            self.findings.append(Finding(flag, detail))
            if worst is not None:
                self._worst[flag] = worst
        elif worst is not None and worst > self._worst.get(flag, float("inf")):
            found.detail, self._worst[flag] = detail, worst

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)


def build_candidate(ref: LoadedReference, ref_model: Any, candidate_cls: Any, size: dict, device: str,
                    seed: int) -> Any:
    """The candidate, built under the reference's seed on `device`, with the reference's weights where its
    state_dict has the same layout. `candidate_cls`: a class, or a `CandidateSession`."""
    init = ref.init_inputs(size, seed)
    if hasattr(candidate_cls, "model") and hasattr(candidate_cls, "runner"):
        return candidate_cls.model(ref_model, copy.deepcopy(init), seed, {**ref.defaults, **size})
    try:
        cand_model, _, _ = model_init.build(lambda: candidate_cls(*copy.deepcopy(init)), device, lambda: seed_all(seed),
                                            model_init.built_on(ref_model, model_init.place_for(device)))
        if isinstance(cand_model, torch.nn.Module):
            weights = ref_model.state_dict() if isinstance(ref_model, torch.nn.Module) else None
            if weights is not None and model_init.same_layout(cand_model.state_dict(), weights):
                cand_model.load_state_dict(weights)
            cand_model = cand_model.to(device).eval()
    except Exception as exc:
        raise CandidateFailure("init", exc) from exc
    return cand_model


def _to_host(t: Any) -> Any:
    return t.cpu() if isinstance(t, torch.Tensor) and is_plain(t) and t.device.type != "cpu" else t


def run_correctness(ref: LoadedReference, candidate_cls: Any, *, device: str, sizes: list[dict], seed: int,
                    rounds: int = 5, tolerance: Callable[[str], Tolerance],
                    distributions: tuple[str, ...] = DISTRIBUTIONS,
                    call_guard: Callable[[], contextlib.AbstractContextManager] | None = None,
                    reference: ReferenceRounds | None = None) -> CheckReport:
    """Run the protocol over every size and kept distribution (`reference`: the judge's rounds, else made here);
    CandidateFailure or TaskError for the side that raised. `call_guard()` wraps every local candidate call."""
    if reference is None:
        reference = ReferenceRounds.create(ref, device, sizes, seed, tolerance, distributions, rounds)
    return _Protocol(reference, candidate_cls, call_guard).run()


class _Protocol:
    def __init__(self, reference: ReferenceRounds, candidate_cls: Any,
                 call_guard: Callable[[], contextlib.AbstractContextManager] | None):
        self.refs, self.cls, self.guard = reference, candidate_cls, call_guard
        self.device, self.tol = reference.device, reference.tolerance
        self.report = CheckReport()
        self.hint: str | None = None
        self.poison = Poison(self.device)
        self.candidates: dict[int, Any] = {}
        self.pinned: dict[Any, torch.Tensor] = {}
        self.failing_map: tuple[tuple[bool, float], dict[str, Any], int] | None = None
        self.last_ratio: torch.Tensor | None = None
        if not self.poison.cuda and self.poison.junk is None:
            self.report.note("CPU allocator poisoning is unavailable in this torch build: unwritten outputs are "
                             "caught by the two-call comparison only")

    def _lap(self, name: str) -> None:
        now = time.perf_counter()
        self.report.phases[name] = round(self.report.phases.get(name, 0.0) + now - self._last, 3)
        self._last = now

    def run(self) -> CheckReport:
        self._last = time.perf_counter()
        for r in range(self.refs.n):
            rd = self.refs.round(r)
            self._lap("reference")
            self._round(rd)
            del rd
        self.refs.finish()
        self._lap("task")
        for flag, detail in self.refs.task_findings:
            self.report.add(flag, detail)
        for text in self.refs.notes:
            self.report.note(text)
        if self.failing_map:
            _, self.report.error_map, self.report.error_map_round = self.failing_map
        elif self.last_ratio is not None:
            self.report.error_map, self.report.error_map_round = error_map(self.last_ratio), len(self.report.rounds)
        return self.report

    def _candidate_model(self, i: int) -> Any:
        if i not in self.candidates:
            sizes = self.refs.sizes
            same = next((j for j in self.candidates if sizes[j] == sizes[i]), None)
            self.candidates[i] = self.candidates[same] if same is not None else build_candidate(
                self.refs.ref, self.refs.model(i), self.cls, sizes[i], self.device, self.refs.seed)
        return self.candidates[i]

    def _candidate(self, model: Any, inputs: list[Any], like: list[Any], out_like: list[Any],
                   seed: int | None = None) -> tuple[Any, list[Any]]:
        """A seeded call on fresh copies in poisoned memory (a remote runner does both): (output, the copies)."""
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

    def _round(self, rd: RoundData) -> None:
        cand_model = self._candidate_model(rd.size_index)
        where = f"round {rd.number + 1} of {self.refs.n} ({rd.dist} inputs, size {rd.size})"
        like = [x for x in rd.inputs if isinstance(x, torch.Tensor)] + rd.out_like
        self._lap("candidate model")
        out1, given1 = self._candidate(cand_model, rd.inputs, like, rd.out_like, rd.call_seed)
        self._lap("calls")
        cmp1, flags = self._judge_call(rd, out1, given1, f"{where}, call 1")
        self._lap("compare")
        out1 = self._keep_first(out1)
        self._lap("keep first output")
        # Call 2 on fresh copies in re-poisoned memory: a different answer is a race or a read of unwritten memory.
        out2, given2 = self._candidate(cand_model, rd.inputs, like + rd.out_like, rd.out_like, rd.call_seed)
        self._lap("calls")
        cmp2, flags2 = self._judge_call(rd, out2, given2, f"{where}, call 2")
        flags += flags2 + self._stale_or_racy(rd, out1, out2, cmp1, cmp2, where)
        self._lap("compare")
        self.report.error_budget = merge_budgets(self.report.error_budget, cmp1.budget, cmp2.budget)
        for flag, detail in flags:
            if flag != "mismatch":  # added by `_judge_call`, from the worst comparison
                self.report.add(flag, detail)
        names = list(dict.fromkeys(f for f, _ in flags))
        record: dict[str, Any] = {"size": rd.size, "dist": rd.dist, "seed": rd.seed}
        for key in ("max_abs", "max_rel"):
            record[key] = max((v for v in (getattr(cmp1, key), getattr(cmp2, key)) if v is not None), default=None)
        record.update(ok=not any(Finding(f).severity == REJECT for f in names), flags=names)
        self.report.rounds.append(record)
        if record["max_abs"] is not None:
            self.report.max_abs_err = max(self.report.max_abs_err or 0.0, record["max_abs"])
            self.report.max_rel_err = max(self.report.max_rel_err or 0.0, record["max_rel"])
        self._error_map(cmp1, cmp2, record["ok"], rd.size_index == 0)

    def _judge_call(self, rd: RoundData, out: Any, given: list[Any],
                    where: str) -> tuple[Comparison, list[tuple[str, str]]]:
        """One call's output against the reference and its inputs against their copies: the comparison, its flags."""
        cmp = compare(out, rd.ref64, rd.native, self.tol)
        if self.hint is None and any(f == "mismatch" for f, _ in cmp.flags):
            self.hint = mismatch_hint.diagnose(self.refs.model(rd.size_index), rd.inputs, rd.call_seed, out, rd.ref64,
                                               self.device)
        for flag, detail in cmp.flags:
            if flag == "mismatch":
                self.report.add(flag, f"{where}: {detail}{self.hint or ''}", worst=cmp.worst)
        flags = [(f, f"{where}: {d}") for f, d in cmp.flags]
        changed = [k for k, (a, b) in enumerate(zip(given, rd.inputs, strict=False)) if not same_bits(a, b)]
        if changed:
            flags.append(("input-mutation", f"{where}: input(s) {changed} changed during forward"))
        return cmp, flags

    def _keep_first(self, out1: Any) -> Any:
        """A large first output copied (on the device if 3x its size is free, else host): call 2 cannot overwrite it."""
        size = _nbytes(as_list(out1))
        if size <= LARGE_OUTPUT_BYTES:
            return out1
        room = self.device.startswith("cuda") and torch.cuda.mem_get_info(torch.device(self.device))[0] > 3 * size
        kept = clone_inputs(as_list(out1)) if room else [self._to_pinned_host(o) for o in as_list(out1)]
        return type(out1)(kept) if isinstance(out1, (tuple, list)) else kept[0]

    def _to_pinned_host(self, t: Any) -> Any:
        """`t` copied into page-locked host memory, one buffer per shape and dtype for the whole check."""
        if not (isinstance(t, torch.Tensor) and is_plain(t) and t.device.type == "cuda"):
            return _to_host(t)
        key = (tuple(t.shape), t.dtype)
        if key not in self.pinned:
            try:
                self.pinned[key] = torch.empty(key[0], dtype=t.dtype, pin_memory=True)
            except RuntimeError:  # page-locked memory refused: pageable, slower
                return _to_host(t)
        return self.pinned[key].copy_(t)

    def _stale_or_racy(self, rd: RoundData, out1: Any, out2: Any, cmp1: Comparison, cmp2: Comparison,
                       where: str) -> list[tuple[str, str]]:
        """Two calls on the same inputs: an earlier round's result (stale-memory), or two answers (nondeterministic)."""
        found: list[tuple[str, str]] = []
        prior = self.refs.prior(rd.number)
        for call, out, cmp in ((1, out1, cmp1), (2, out2, cmp2)):
            if not cmp.ok and not cmp.malformed and _matches_prior(out, cmp, prior):
                found.append(("stale-memory", f"{where}, call {call}: the output is an earlier round's reference "
                                              "result (memory the candidate never wrote)"))
        if found or cmp1.malformed or cmp2.malformed or cmp1.poisoned or cmp2.poisoned:
            return found
        worst = 0.0  # how far the two calls differ, in units of the error budget's bound
        for a, b, rn, r64 in zip(as_list(out1), as_list(out2), as_list(rd.native), as_list(rd.ref64), strict=False):
            if not (is_plain(a) and is_plain(b) and isinstance(rn, torch.Tensor)):
                continue
            if not (a.is_floating_point() or a.is_complex()):
                worst = max(worst, 0.0 if torch.equal(a, b) else float("inf"))
                continue
            worst = max(worst, _pair_ratio(a, b, rn, r64, self.tol(dtype_name(rn.dtype))))
        if worst > 1:
            found.append(("nondeterministic", f"{where}: two calls on the same inputs differ by up to {worst:.3g}x the "
                                              "tolerance"))
        return found

    def _error_map(self, cmp1: Comparison, cmp2: Comparison, ok: bool, asked_size: bool) -> None:
        """Keep the worst failing round's map, preferring the size asked for (the user reads the map against it)."""
        cmp = cmp2 if cmp2.ratio is not None and cmp2.worst > cmp1.worst else cmp1
        if cmp.ratio is None:
            return
        self.last_ratio = cmp.ratio
        rank = (asked_size, cmp.worst)
        if not ok and (self.failing_map is None or rank > self.failing_map[0]):
            self.failing_map = (rank, error_map(cmp.ratio), len(self.report.rounds))


def _pair_ratio(a: torch.Tensor, b: torch.Tensor, rn: torch.Tensor, r64: Any, tol: Tolerance) -> float:
    """Largest |a - b| over the error budget's bound; in one pass on a GPU (`compare_fused.pair_worst`)."""
    fa, fb, fn = (real_view(t.detach()).reshape(-1) for t in (a, b, rn))
    fr = real_view(r64.detach()).reshape(-1) if isinstance(r64, torch.Tensor) else None
    floor = 0.0
    staged = fa.device != fb.device and fused.usable(fb, fb, fr if fr is not None else fb)
    one_pass = staged or fused.usable(fa, fb, fr if fr is not None else fa)  # on a GPU (never the interpreter)
    if one_pass and fr is not None and rn.is_floating_point() and fn.device == fb.device:
        floor = ERROR_BUDGET_K * fused.native_error(fn, fr)
    elif fr is not None and rn.is_floating_point():
        scales = (native_scale(fn[s:s + CHUNK].double(), fr[s:s + CHUNK].to(fn.device, torch.float64))
                  for s in range(0, fn.numel(), CHUNK))
        floor = ERROR_BUDGET_K * max(scales, default=0.0)
    worst = 0.0
    if one_pass:  # on the GPU in one pass; a first output kept on the host (`_keep_first`) goes there a slice at a time
        step = CHUNK if staged else max(fa.numel(), 1)
        for s in range(0, fa.numel(), step):
            a = fa[s:s + step].to(fb.device)
            scale = fr[s:s + step] if fr is not None else a
            worst = max(worst, fused.pair_worst(a, fb[s:s + step], scale, tol.atol, tol.rtol, floor))
        return worst
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


def _matches_prior(out: Any, cmp: Comparison, prior: list[PriorOutput]) -> bool:
    return any(bad is not None and bool(bad.any()) and any(old.matches(o, bad) for old in prior)
               for o, bad in zip(as_list(out), cmp.bad, strict=False))
