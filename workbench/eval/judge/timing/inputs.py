"""The timing inputs: distinct input sets and output slots in memory shared with the runner (docs/trust-boundary.md,
inputs; docs/anti-cheating.md, cheats 10, 24 and 25).

Every call of a timed batch gets a set of its own, and between batches the judge writes new contents into every set,
in place, from seeds the runner cannot predict: a result cached by address, shape or sampled values is stale, and the
re-check of that call catches it. The reference is timed on the same sets. A pool outlives its runner: the judge keeps
it (`Context.keep_pool`) and lends it, zeroed, to the next candidate of the same task, size and seed (`attach`). How
many sets fit is a share of free memory (`sets_that_fit`)."""

from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from workbench.errors import TaskError
from workbench.eval.judge.reference.float64 import nbytes
from workbench.eval.wire.runner_messages import TensorRef
from workbench.eval.wire.shared_memory import POOL_BUFFER_IDS, Arena
from workbench.eval.wire.tensors import as_list, is_plain, sync

if TYPE_CHECKING:
    from workbench.eval.judge.reference.runner import ReferenceRunner
    from workbench.eval.judge.runners.session import CandidateSession
    from workbench.tasks.task import LoadedReference

#: Most input sets (= most calls in one timed batch).
MAX_SETS = 256
#: Share of free memory the sets and slots may take together, for a judge alone or one of two on a device.
MEMORY_SHARE = 0.25
#: Share of free memory all the judges' pools on a device may take together (each kept), when there are more than two.
ALL_POOLS_SHARE = 0.5


def memory_share(peers: int | None = None) -> float:
    """Share of free memory one judge's pool may take, with `peers` judges on the device (default: what the caller
    that started this judge says, KWB_JUDGE_PEERS)."""
    if peers is None:
        try:
            peers = int(os.environ.get("KWB_JUDGE_PEERS") or 1)
        except ValueError:
            peers = 1
    return min(MEMORY_SHARE, ALL_POOLS_SHARE / max(1, peers))


def free_bytes(device: str) -> int | None:
    if device.startswith("cuda"):
        return int(torch.cuda.mem_get_info(torch.device(device))[0])
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return None


def sets_that_fit(set_bytes: int, free: int | None, wanted: int) -> int:
    """How many sets (input set + output slot, `set_bytes` each) fit in this judge's `memory_share()` of `free`,
    between 1 and `wanted` (at most MAX_SETS)."""
    wanted = max(1, min(wanted, MAX_SETS))
    if not free or set_bytes <= 0:
        return wanted
    return max(1, min(wanted, int(free * memory_share() // set_bytes)))


@dataclass
class InputPool:
    """`n` input sets and output slots shared with one runner: `sets[k]` the judge's views of set k, `refs[k]` the
    runner's references to them, `slots[k]` / `slot_refs[k]` the output slot of the call on set k; `out_like` the
    shape and dtype a slot holds."""

    session: CandidateSession
    reference: LoadedReference
    size: dict[str, Any]
    device: str
    n: int
    out_like: torch.Tensor | None
    sets: list[list[Any]] = field(default_factory=list)
    refs: list[tuple[Any, ...]] = field(default_factory=list)
    slots: list[torch.Tensor] = field(default_factory=list)
    slot_refs: list[TensorRef] = field(default_factory=list)
    generation: int = 0
    #: The id the runner knows this pool by (`CandidateSession.register_pool`).
    pool_id: int = 0
    #: The task's inputs do not change with the seed: fresh contents cannot be promised, and the Result says so.
    fixed_inputs: bool = False
    #: The candidate has seen the first set (`CandidateSession.lend_pool`): every set is refreshed before timing.
    lent: bool = False
    #: The arena owning the sets and slots (None for nested arguments: they live in the runner's, not keepable).
    arena: Arena | None = None
    #: Seconds spent making the pool or lending it to this runner, by step (Result.protocol["calibrate_phases"]).
    phases: dict[str, float] = field(default_factory=dict)
    #: The runner timing the reference on this pool (`reference/runner.py`); it maps the sets, so it goes with the pool.
    reference_runner: ReferenceRunner | None = None

    @property
    def keepable(self) -> bool:
        return self.arena is not None

    def attach(self, session: CandidateSession) -> None:
        """Lend this kept pool to a new runner: zeroed first (nothing the earlier runner wrote may reach the next
        candidate), registered there, and marked lent so every set is refreshed before the first timed batch."""
        if self.arena is None:
            raise ValueError("this timing pool lives in its first runner's memory and cannot be lent again")
        started = time.perf_counter()
        self.arena.wipe()
        session.arena.adopt(self.arena.owned())
        self.session = session
        wiped = time.perf_counter()
        self.pool_id = session.register_pool(self.refs, self.slot_refs, session.timeout)
        self.lent = True
        self.phases = {"wipe": round(wiped - started, 4), "register": round(time.perf_counter() - wiped, 4)}

    def drop_reference_runner(self) -> None:
        """Close the reference's runner (before the buffers it maps are freed)."""
        if self.reference_runner is not None:
            self.reference_runner.close()
            self.reference_runner = None

    def free(self) -> None:
        """Give the pool's memory back (the judge keeps it no longer); its reference runner goes first."""
        self.drop_reference_runner()
        self.sets, self.slots = [], []
        if self.arena is not None:
            self.arena.close()
            self.arena = None

    @classmethod
    def create(cls, session: CandidateSession, reference: LoadedReference, size: dict, device: str, first: list[Any],
               out: Any, wanted: int, rng: random.Random) -> InputPool:
        """A pool holding as many sets as fit (at most `wanted`), the first filled with `first`."""
        head = next((t for t in as_list(out) if is_plain(t)), None)
        out_like = torch.empty_like(head, device="meta") if head is not None else None
        per_set = nbytes(first) + (nbytes([head]) if head is not None else 0)
        pool = cls(session, reference, size, device, sets_that_fit(per_set, free_bytes(device), wanted), out_like)
        started = time.perf_counter()
        draws = [first] + [pool._draw(rng) for _ in range(1, pool.n)]
        drawn = time.perf_counter()
        pool.fixed_inputs = pool.n > 1 and _same_contents(draws[0], draws[1])
        if any(isinstance(x, (list, tuple)) for x in first):  # nested arguments: shared one tensor at a time
            for inputs in draws:
                pairs = [session.share_arg(x) for x in inputs]
                pool.refs.append(tuple(p[0] for p in pairs))
                pool.sets.append([p[1] for p in pairs])
            draws = []
        else:
            pool.arena = Arena(device, transport=session.arena.transport, first_id=POOL_BUFFER_IDS)
        # One shared buffer for every input set and one for every slot: a descriptor (or IPC handle) each.
        specs = [(tuple(x.shape), x.dtype) for inputs in draws for x in inputs if isinstance(x, torch.Tensor)]
        shared = iter(pool.arena.slab(specs)) if specs and pool.arena is not None else iter(())
        for inputs in draws:  # (empty when the nested path above filled the sets)
            views, refs = [], []
            for x in inputs:
                if isinstance(x, torch.Tensor):
                    view, ref = next(shared)
                    view.copy_(x.detach())
                    views.append(view)
                    refs.append(ref)
                else:
                    views.append(x)
                    refs.append(x)
            pool.sets.append(views)
            pool.refs.append(tuple(refs))
        if out_like is not None:
            for view, ref in (pool.arena or session.arena).slab([(tuple(out_like.shape), out_like.dtype)] * pool.n):
                pool.slots.append(view)
                pool.slot_refs.append(ref)
        if pool.arena is not None:
            session.arena.adopt(pool.arena.owned())
        shared_at = time.perf_counter()
        pool.pool_id = session.register_pool(pool.refs, pool.slot_refs, session.timeout)
        pool.phases = {"draw": round(drawn - started, 4), "share": round(shared_at - drawn, 4),
                       "register": round(time.perf_counter() - shared_at, 4)}
        return pool

    @property
    def set_bytes(self) -> int:
        return nbytes(self.sets[0]) if self.sets else 0

    def _draw(self, rng: random.Random) -> list[Any]:
        return self.reference.make_inputs(self.size, rng.randrange(1 << 62), self.device, "default")

    def refresh(self, rng: random.Random | None, count: int | None = None,
                seeds: list[int] | None = None) -> list[int]:
        """New contents in the first `count` sets (all by default), in place, from seeds drawn from `rng`; or the same
        contents again from the `seeds` an earlier refresh returned. Returns the seeds. Drawn straight into the sets
        (`refill`): a freed set-sized temporary would leave the driver clearing memory while the runner times."""
        if seeds is None:
            assert rng is not None
            self.generation += 1
            seeds = [rng.randrange(1 << 62) for _ in range(self.n if count is None else min(count, self.n))]
        for k, seed in enumerate(seeds):
            try:
                self.reference.refill(self.sets[k], self.size, seed, self.device)
            except TaskError:  # inputs whose shapes move with the seed: a whole draw, copied where it fits
                for target, value in zip(self.sets[k], self.reference.make_inputs(self.size, seed, self.device),
                                         strict=False):
                    if isinstance(target, torch.Tensor) and isinstance(value, torch.Tensor) and \
                            target.shape == value.shape:
                        target.copy_(value)
        sync(self.device)
        return seeds


def _same_contents(a: list[Any], b: list[Any]) -> bool:
    tensors = [(x, y) for x, y in zip(a, b, strict=False) if isinstance(x, torch.Tensor)]
    return bool(tensors) and all(x.shape == y.shape and torch.equal(x, y) for x, y in tensors)
