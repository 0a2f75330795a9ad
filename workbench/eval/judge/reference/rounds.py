"""The reference's half of the correctness protocol: per round its inputs, native output and float64 reference, plus the
task flaws the rounds show (`weak-task`). Nothing here depends on the candidate, so the judge keeps it per task, size,
seed and device within `ReferenceCache`'s byte budget; a task too large makes each round when needed."""

from __future__ import annotations

import copy
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from workbench.errors import TaskError
from workbench.eval.judge.correctness.compare import CHUNK, constant_passes
from workbench.eval.judge.correctness.prior_outputs import PriorOutput
from workbench.eval.judge.reference.float64 import Float64Reference, nbytes
from workbench.eval.wire import model_init
from workbench.eval.wire.tensors import (
    all_finite,
    as_list,
    clone_inputs,
    dtype_name,
    is_plain,
    release_unused,
    same_bits,
    sync,
)
from workbench.eval.wire.timed_loop import seed_rng
from workbench.seeding import seed_all
from workbench.tasks.distributions import get_distribution
from workbench.tasks.reroute import DrawRecord
from workbench.tasks.task import LoadedReference, Tolerance

MIN_ROUNDS = 5
#: Earlier rounds' reference outputs a candidate's output is compared with to recognise a stale result.
PRIOR_ROUNDS = 2


def _derived_seed(seed: int, salt: int) -> int:
    return (seed * 1_000_003 + salt) % (1 << 62)


def round_seeds(seed: int, r: int) -> tuple[int, int]:
    """(seed of round r's inputs, the RNG state every call of the round starts from)."""
    round_seed = _derived_seed(seed, 7919 * (r + 1))
    return round_seed, (round_seed * 31 + 1) % (1 << 62)


@dataclass
class RoundData:
    """One round's reference side: the candidate's inputs and what it must return."""

    number: int
    size_index: int
    size: dict[str, Any]
    dist: str
    seed: int
    call_seed: int
    inputs: list[Any]
    native: Any
    ref64: list[Any]
    out_like: list[torch.Tensor]  # meta tensors shaped like the native output: the runner's output slots
    native_host: list[PriorOutput]  # kept to recognise this output as a stale result in later rounds

    @property
    def nbytes(self) -> int:
        return nbytes(self.inputs) + nbytes(self.native) + nbytes(self.ref64)


def build_reference(ref: LoadedReference, size: dict, device: str, seed: int) -> Any:
    """The reference `Model(*init_inputs)` under `seed`, on `device`, in eval mode, built where `model_init` says."""
    init = ref.init_inputs(size, seed)
    try:
        model, place, _ = model_init.build(lambda: ref.module.Model(*copy.deepcopy(init)), device,
                                           lambda: seed_all(seed))
        if isinstance(model, torch.nn.Module):
            model = model.to(device).eval()
        model_init.remember(model, place)
    except Exception as exc:
        raise TaskError(f"the reference Model could not be built at size {size}: {type(exc).__name__}: {exc}. "
                        "The task is broken, not the candidate: fix its Model or get_init_inputs.") from exc
    return model


@dataclass
class ReferenceRounds:
    """The reference side of `n` rounds over `sizes` and `dists`: `round(r)` makes round r once and keeps it while
    `keep` holds; the task-level findings are ready after `finish`."""

    ref: LoadedReference
    device: str
    sizes: list[dict[str, Any]]
    seed: int
    tolerance: Callable[[str], Tolerance]
    dists: list[str]
    requested: int
    budget: int = 1 << 62  # bytes the kept rounds may take; past it (from the first round's size) none is kept
    keep: bool = True
    models: dict[int, Any] = field(default_factory=dict)
    skipped: set[str] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)
    task_findings: list[tuple[str, str]] = field(default_factory=list)
    _rounds: dict[int, RoundData] = field(default_factory=dict)
    _f64: dict[int, Float64Reference] = field(default_factory=dict)
    _constant: dict[int, list[bool | None]] = field(default_factory=dict)
    _scalars: dict[int, tuple[str, list[float]]] = field(default_factory=dict)
    _input_numel: dict[int, int] = field(default_factory=dict)
    _screened: bool = False
    _judged_task: bool = False
    # Where rounds are not kept: the round made ahead (`prepare`), the last one handed out, one round's bytes, and
    # the outputs of recent rounds that `prior` needs.
    _ahead: RoundData | None = None
    _last: int = -1
    _round_bytes: int = 0
    _recent: dict[int, list[PriorOutput]] = field(default_factory=dict, init=False)

    @classmethod
    def create(cls, ref: LoadedReference, device: str, sizes: list[dict], seed: int,
               tolerance: Callable[[str], Tolerance], distributions: tuple[str, ...], rounds: int,
               budget: int = 1 << 62) -> ReferenceRounds:
        sizes = list(sizes) or [{}]
        dists = list(dict.fromkeys(distributions)) or ["default"]
        return cls(ref, device, sizes, seed, tolerance, dists, rounds, budget)

    @property
    def kept(self) -> list[str]:
        """The distributions the rounds cycle through."""
        if not self._screened:
            self._screen_distributions()
        return [d for d in self.dists if d not in self.skipped] or ["default"]

    @property
    def n(self) -> int:
        """Rounds: every size and kept distribution, never fewer than MIN_ROUNDS."""
        return max(self.requested, MIN_ROUNDS, len(self.sizes), len(self.kept))

    def float64_placements(self) -> set[str]:
        return {f.placement for f in self._f64.values()}

    def model(self, i: int) -> Any:
        if i not in self.models:
            same = next((j for j in self.models if self.sizes[j] == self.sizes[i]), None)
            self.models[i] = self.models[same] if same is not None else \
                build_reference(self.ref, self.sizes[i], self.device, self.seed)
        return self.models[i]

    def round(self, r: int) -> RoundData:
        if not self._screened:
            self._screen_distributions()
        found = self._rounds.get(r)
        if self._ahead is not None and self._ahead.number == r:
            found, self._ahead = self._ahead, None
        elif found is None:
            found = self._compute(r)
            self._round_bytes = found.nbytes
            if self.keep and found.nbytes * self.n > self.budget:
                self.keep = False
                self._recent = {**{k: rd.native_host for k, rd in self._rounds.items()}, r: found.native_host}
                self._rounds.clear()
                self.note("the reference's rounds are too large to keep for later candidates: each evaluation "
                          "computes them again")
            if self.keep:
                self._rounds[r] = found
        self._last = r
        return found

    def pending(self) -> int | None:
        """The round to make ahead (`prepare`), or None: the first not made, or the next where two rounds fit."""
        if self.keep:
            return next((r for r in range(self.n) if r not in self._rounds), None)
        nxt = self._last + 1
        return nxt if self._ahead is None and 0 < 2 * self._round_bytes <= self.budget and nxt < self.n else None

    def hold_ahead(self, rd: RoundData) -> bool:
        """Hold `rd`, made ahead before the rounds proved too large to keep (where two fit), for the check to use."""
        if self.keep or self._ahead is not None or not 0 < 2 * rd.nbytes <= self.budget:
            return False
        self._ahead, self._last = rd, rd.number - 1
        return True

    def drop_ahead(self) -> None:
        """Forget the round held ahead once the check that would use it has ended."""
        self._ahead, self._last = None, -1

    def prepare(self, r: int) -> None:
        """Make round r before it is used: kept with the others, or held as the one round ahead."""
        if self.keep:
            self.round(r)
        else:
            self._ahead = self._compute(r)

    def finish(self) -> None:
        """Judge the task itself (`weak-task`) once every round was made (after the last one was used, so a task
        too large to keep its rounds has freed it before the ignored-input probe)."""
        if not self._judged_task and len(self._constant) >= self.n:
            self._judged_task = True
            self._judge_task()

    def prior(self, r: int) -> list[PriorOutput]:
        """What is kept of the reference outputs of the PRIOR_ROUNDS rounds before r."""
        out: list[PriorOutput] = []
        for k in range(max(0, r - PRIOR_ROUNDS), r):
            if k in self._rounds:
                out += self._rounds[k].native_host
            elif k in self._recent:
                out += self._recent[k]
        return out

    @property
    def nbytes(self) -> int:
        return sum(rd.nbytes for rd in self._rounds.values())

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def _inputs(self, size: dict, seed: int, dist: str, record: DrawRecord | None = None) -> list[Any]:
        try:
            return self.ref.make_inputs(size, seed, self.device, dist, note=self.note, record=record)
        except Exception as exc:
            raise TaskError(f"the task's inputs could not be made at size {size} ({dist} inputs): "
                            f"{type(exc).__name__}: {exc}. Fix the task's get_inputs.") from exc

    def run(self, model: Any, inputs: list[Any], size: dict, dist: str, seed: int | None = None) -> Any:
        """The reference in its native dtype on clones of `inputs`, the global RNG seeded with `seed` first."""
        try:
            seed_rng(seed)
            with torch.no_grad():
                out = model(*clone_inputs(inputs))
            sync(self.device)
            return out
        except Exception as exc:
            raise TaskError(f"the reference failed at size {size} ({dist} inputs): {type(exc).__name__}: {exc}. "
                            "The task is broken, not the candidate: fix its Model.forward or its sizes.") from exc

    def size_index(self, r: int) -> int:
        """The size round r uses: each size once in the first rounds, then the one with the fewest input elements
        (the cheapest for an interpreted candidate, who pays most of a CPU check; benchmarks/README.md)."""
        if r < len(self.sizes) or len(self._input_numel) < len(self.sizes):
            return r % len(self.sizes)
        return min(range(len(self.sizes)), key=lambda i: (self._input_numel[i], i))

    def _screen_distributions(self) -> None:
        """Skip, with a note, each distribution that repeats the task's own inputs or on which the reference is not
        finite while it is on its own; judged on probe inputs, before any candidate call."""
        self._screened = True
        if all(d == "default" for d in self.dists):
            return
        model, size = self.model(0), self.sizes[0]
        probe_seed = _derived_seed(self.seed, 15_485_863)
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
                finite.append(all_finite(self.run(model, self._inputs(size, probe_seed, "default"), size, "default")))
            if finite[0] and not all_finite(self.run(model, inputs, size, dist)):
                self.skipped.add(dist)
                self.note(f"skipped {dist} inputs: the reference is not finite on them")
        if not_random:
            self.note(f"skipped {', '.join(not_random)} inputs: the task's get_inputs draws no random floating "
                      "values, so its own inputs are used")

    def _compute(self, r: int) -> RoundData:
        i = self.size_index(r)
        size, model = self.sizes[i], self.model(i)
        round_seed, call_seed = round_seeds(self.seed, r)
        kept = self.kept
        dist = kept[r % len(kept)]
        inputs = self._inputs(size, round_seed, dist)
        native = self.run(model, inputs, size, dist, call_seed)
        if i not in self._f64:
            self._f64[i] = Float64Reference.plan(model, inputs, native, self.device, call_seed)
            if self._f64[i].note:
                self.note(self._f64[i].note)
        ref64, note = self._f64[i](model, inputs, native, call_seed)
        if note:
            self.note(note)
        sync(self.device)
        host = [PriorOutput.of(t) for t in as_list(native) if is_plain(t)]
        rd = RoundData(r, i, size, dist, round_seed, call_seed, inputs, native, ref64,
                       [torch.empty_like(t, device="meta") for t in as_list(native) if is_plain(t)], host)
        self._input_numel.setdefault(i, sum(x.numel() for x in inputs if isinstance(x, torch.Tensor)))
        self._weak_stats(r, ref64, native)
        if not self.keep:  # enough for `prior` of the round in use while the next one is made (`prepare`)
            self._recent = {k: v for k, v in self._recent.items() if k >= r - PRIOR_ROUNDS - 1}
            self._recent[r] = host
        release_unused(self.device)  # the candidate's runner runs next, in another process
        return rd

    def _weak_stats(self, r: int, ref64: list[Any], native: Any) -> None:
        natives = as_list(native)
        # Weak only if a constant passes in every round: an output one round ruled out is not checked again.
        open_ = [all(v[k] is True for v in self._constant.values() if k < len(v)) for k in range(len(natives))]
        self._constant[r] = constant_passes(ref64, natives, self.tolerance, open_)
        for k, (r64, rn) in enumerate(zip(ref64, natives, strict=False)):
            if isinstance(rn, torch.Tensor) and rn.is_floating_point() and rn.numel() == 1:
                self._scalars.setdefault(k, (dtype_name(rn.dtype), []))[1].append(float(r64.reshape(-1)[0]))

    def _judge_task(self) -> None:
        """`weak-task` when the task cannot tell right from wrong: a constant passes, or an input does not matter."""
        rounds = [self._constant[r] for r in sorted(self._constant)]
        n_out = max((len(v) for v in rounds), default=0)
        for k in range(n_out):
            verdicts = [v[k] for v in rounds if k < len(v)]
            if verdicts and all(verdicts):
                self.task_findings.append(("weak-task", f"output {k}: a constant output passes the tolerance in "
                                                        "every round"))
                self.note(f"weak task: a constant passes the tolerance for output {k} in every round")
        for k, (dtype, values) in self._scalars.items():
            tol = self.tolerance(dtype)
            mid = 0.5 * (max(values) + min(values))
            if len(values) > 1 and all(abs(v - mid) <= tol.atol + tol.rtol * abs(v) for v in values):
                self.task_findings.append(("weak-task", f"output {k}: the same value in every round"))
                self.note(f"weak task: output {k} does not change between rounds")
        try:
            self._ignored_inputs()
        except Exception as exc:  # noqa: BLE001 - advisory: inputs that cannot be swapped one by one are not judged
            self.note(f"the ignored-input probe was skipped ({type(exc).__name__}: {exc})")

    def _ignored_inputs(self) -> None:
        """One input at a time replaced by a fresh draw: an output still within tolerance means it may be ignored."""
        i = min(self._input_numel, key=self._input_numel.get) if self._input_numel else 0
        size, model = self.sizes[i], self.model(i)
        base_seed = _derived_seed(self.seed, 104_729)
        base = self._inputs(size, base_seed, "default")
        other = self._inputs(size, base_seed + 1, "default")
        base_out = as_list(self.run(model, base, size, "default", base_seed))
        for k, (x, y) in enumerate(zip(base, other, strict=False)):
            if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor) or x.shape != y.shape or \
                    same_bits(x, y):
                continue
            swapped = list(base)
            swapped[k] = y
            out = as_list(self.run(model, swapped, size, "default", base_seed))
            if all(self._within(a, b) for a, b in zip(out, base_out, strict=False)):
                self.task_findings.append(("weak-task", f"replacing input {k} by a fresh draw leaves the reference "
                                                        "output within tolerance: a candidate may ignore it"))
                self.note(f"weak task: the reference output does not depend on input {k}")

    def _within(self, a: Any, b: Any) -> bool:
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            return same_bits(a, b)
        if a.shape != b.shape:
            return False
        if not a.is_floating_point():
            return bool(torch.equal(a, b))
        tol = self.tolerance(dtype_name(b.dtype))
        fa, fb = a.reshape(-1), b.reshape(-1)
        for s in range(0, fa.numel(), CHUNK):  # slices: outputs can be a billion elements
            a64, b64 = fa[s:s + CHUNK].double(), fb[s:s + CHUNK].double()
            close = ((a64 - b64).abs() <= tol.atol + tol.rtol * b64.abs()) | (torch.isnan(a64) & torch.isnan(b64)) | \
                (a64 == b64)
            if not bool(close.all()):
                return False
        return True


def reference_budget(device: str, held: int = 0) -> int:
    """Bytes the judge may keep in rounds: a quarter of the GPU memory free or `held` by the cache; 2 GiB on the CPU."""
    if device.startswith("cuda"):
        return int(0.25 * (torch.cuda.mem_get_info(torch.device(device))[0] + held))
    return 2 << 30


class ReferenceCache:
    """`ReferenceRounds` per key, most recently used last, within a byte budget."""

    def __init__(self, max_entries: int = 8):
        self.max_entries = max_entries
        self._entries: OrderedDict[Any, ReferenceRounds] = OrderedDict()

    @property
    def nbytes(self) -> int:
        return sum(e.nbytes for e in self._entries.values())

    def get(self, key: Any, make: Callable[[int], ReferenceRounds], device: str) -> tuple[ReferenceRounds, bool]:
        """(the rounds for `key`, whether they were there); new ones from `make(budget)` once older ones made room."""
        found = self._entries.get(key)
        if found is not None and found.keep:
            self._entries.move_to_end(key)
            return found, True
        self._entries.pop(key, None)
        while len(self._entries) >= self.max_entries:
            self._entries.popitem(last=False)
        budget = reference_budget(device, self.nbytes)
        while self._entries and self.nbytes > budget // 2:
            self._entries.popitem(last=False)
        rounds = make(budget - self.nbytes)
        self._entries[key] = rounds
        return rounds, False

    def discard(self, key: Any) -> None:
        """Forget the rounds for `key` (their making failed: made again from the start)."""
        self._entries.pop(key, None)

    def clear(self) -> None:
        self._entries.clear()


def draws_random_numbers(model: Any, inputs: list[Any], device: str) -> bool:
    """Whether a forward of `model` advances the global RNG (KernelBench's LSTMs draw their initial states)."""
    cuda = device.startswith("cuda")
    cpu_state = torch.random.get_rng_state()
    gpu_state = torch.cuda.get_rng_state(torch.device(device)) if cuda else None
    with torch.no_grad():
        model(*clone_inputs(inputs))
    return not torch.equal(cpu_state, torch.random.get_rng_state()) or \
        (cuda and not torch.equal(gpu_state, torch.cuda.get_rng_state(torch.device(device))))
