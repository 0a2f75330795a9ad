"""The timing inputs: distinct input sets and output slots in memory shared with the runner (docs/trust-boundary.md,
inputs; docs/anti-cheating.md, cheats 10, 24 and 25).

Every call of a timed batch gets an input set of its own, and the judge writes new contents into every set, in
place, between batches, with seeds the runner cannot know in advance (drawn through the task's own input code, on
the device). So no timed call ever sees contents an earlier call saw: a result cached by address, by shape or by a
few sampled values is stale, and the judge's re-check of that call's output, against the reference on exactly its
inputs, catches it. The reference is timed on the same shared sets (with the runner frozen and the contents just
written by the judge), so both sides read the same memory.

A pool outlives its runner: the judge keeps the last one (`Context.keep_pool`) and lends it to the next candidate of
the same task, size and seed (`attach`), so a sweep or an LLM loop does not draw and share a few hundred input sets
per candidate. The pool's buffers live in an arena of their own, which the next runner's arena adopts; the earlier
runner is dead by then (its session closed). That runner could write into the pool, so the pool is zeroed before
the next runner sees it (no message passes from one candidate to the next), and the timing writes new contents into
every set before its first batch, as it does after the correctness calls borrowed the first set.

How many sets fit is a memory question: each set is one input set plus one output slot, and together they may take
a share of the free memory (on the CPU, of the available host memory), so a 6 GB KernelBench problem gets one or
two sets and a small one up to `MAX_SETS`.
"""

from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from workbench.errors import TaskError
from workbench.eval.judge.reference.float64 import nbytes
from workbench.eval.wire.runner_messages import TensorRef
from workbench.eval.wire.shared_memory import POOL_BUFFER_IDS, Arena
from workbench.eval.wire.tensors import as_list, is_plain

#: Most input sets (= most calls in one timed batch).
MAX_SETS = 256
#: Share of free memory the sets and slots may take together, for a judge alone or one of two on a device.
MEMORY_SHARE = 0.25
#: Share of free memory the pools of all the judges on a device may take together, when there are more than two
#: (each judge's pool is made from what is free when it is made, and kept for the next candidate: four judges at a
#: quarter of free memory each filled an 80 GB GPU with a 256 MiB task).
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
    """`n` input sets and `n` output slots shared with one runner (module doc).

    `sets[k]` are the judge's views of set k (the reference is called on them), `refs[k]` the runner's references
    to them; `slots[k]` / `slot_refs[k]` the output slot of the call that used set k. `out_like` is the shape and
    dtype of the reference's first output (what a slot holds)."""

    session: Any
    reference: Any
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
    #: Set when the task's inputs do not change with the seed (no random draw): the guarantee of fresh contents
    #: cannot hold, and the Result says so.
    fixed_inputs: bool = False
    #: Set when the first set and slot were lent to the correctness calls (`CandidateSession.lend_pool`): the
    #: candidate has seen their contents, so timing refreshes every set before its first batch.
    lent: bool = False
    #: The arena that owns the sets and slots (None: they live in the first runner's arena, for nested arguments,
    #: and the pool cannot be kept past that runner).
    arena: Arena | None = None
    #: Seconds spent making the pool or lending it to this runner, by step (Result.protocol["calibrate_phases"]).
    phases: dict[str, float] = field(default_factory=dict)
    #: The runner that times the task's reference on this pool (`reference_runner.py`): it maps the pool's sets (no
    #: slot), so it lives and goes with the pool, kept with it for the next candidate of the task.
    reference_runner: Any = None

    @property
    def keepable(self) -> bool:
        return self.arena is not None

    def attach(self, session: Any) -> None:
        """Lend this kept pool to a new runner (module doc): zeroed first (the earlier runner could write into it, and
        nothing it left may reach the next candidate), its buffers announced and the pool registered there; marked
        lent, so every set gets new contents before the first timed batch."""
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
    def create(cls, session: Any, reference: Any, size: dict, device: str, first: list[Any], out: Any,
               wanted: int, rng: random.Random) -> InputPool:
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
        """New contents in the first `count` sets (all by default), in place, from seeds drawn now from `rng`; or,
        given the `seeds` an earlier refresh returned, the same contents written again (the draws are seeded, so
        they repeat exactly). Returns the seeds.

        Drawn straight into the sets (`refill`), with no set-sized temporary: a fresh 8 GB draw per round, freed
        and handed back to the driver, left the driver clearing that memory while the runner timed its batch, and
        an identical memory-bound reduction read 15-25% slower in the runner than in the judge."""
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
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()
        return seeds


def _same_contents(a: list[Any], b: list[Any]) -> bool:
    tensors = [(x, y) for x, y in zip(a, b, strict=False) if isinstance(x, torch.Tensor)]
    return bool(tensors) and all(x.shape == y.shape and torch.equal(x, y) for x, y in tensors)
