"""Timing inputs: sets and output slots shared with the runner (docs/anti-cheating.md, cheats 10, 24, 25). Each call of
a batch gets its own set; between batches the judge rewrites every set in place from seeds the runner cannot predict,
so a result cached by address, shape or sampled values is stale and its re-check catches it."""

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
    """Share of free memory one judge's pool may take with `peers` judges on the device (default KWB_JUDGE_PEERS)."""
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
    """How many sets of `set_bytes` (inputs and slot) fit in this judge's share of `free`, 1 to `wanted`."""
    wanted = max(1, min(wanted, MAX_SETS))
    return wanted if not free or set_bytes <= 0 else max(1, min(wanted, int(free * memory_share() // set_bytes)))


@dataclass
class InputPool:
    """`n` input sets (`sets[k]` the judge's views, `refs[k]` the runner's) and output slots (`slots`, `slot_refs`)."""

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
    pool_id: int = 0
    fixed_inputs: bool = False  # the task's inputs do not change with the seed (the Result says so)
    lent: bool = False  # the candidate has seen the first set: every set is refreshed before timing
    arena: Arena | None = None  # None for nested arguments: they live in the runner's arena, not keepable
    phases: dict[str, float] = field(default_factory=dict)
    reference_runner: ReferenceRunner | None = None  # it maps the sets, so it goes with the pool

    @property
    def keepable(self) -> bool:
        return self.arena is not None

    def attach(self, session: CandidateSession) -> None:
        """Lend this kept pool to a new runner, zeroed: nothing the earlier runner wrote reaches the next candidate."""
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
        if self.reference_runner is not None:
            self.reference_runner.close()
            self.reference_runner = None

    def free(self) -> None:
        """Give the pool's memory back, its reference runner first."""
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
        draws = [first] + [reference.make_inputs(size, rng.randrange(1 << 62), device, "default")
                           for _ in range(1, pool.n)]
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
        specs = [(tuple(x.shape), x.dtype) for inputs in draws for x in inputs if isinstance(x, torch.Tensor)]
        shared = iter(pool.arena.slab(specs)) if specs and pool.arena is not None else iter(())
        for inputs in draws:  # (empty when the nested path above filled the sets)
            views, refs = [], []
            for x in inputs:
                view, ref = x, x
                if isinstance(x, torch.Tensor):
                    view, ref = next(shared)
                    view.copy_(x.detach())
                views.append(view)
                refs.append(ref)
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

    def refresh(self, rng: random.Random | None, count: int | None = None, seeds: list[int] | None = None) -> list[int]:
        """New contents in the first `count` sets, in place, from seeds drawn from `rng` (or `seeds` again); the seeds.
        Drawn straight into the sets: a freed temporary would have the driver clear memory while the runner times."""
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
