"""The harness's own batches: the null calibration made before the candidate is imported, and the judge's batch
loop that times the reference in its own process."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, replace
from typing import Any

import torch

from workbench.eval.judge.runners.session import CandidateSession
from workbench.eval.judge.timing.clock_check import NullFit
from workbench.eval.judge.timing.inputs import InputPool
from workbench.eval.wire import timed_loop
from workbench.eval.wire.runner_messages import NULL_KERNEL, NULL_MODEL
from workbench.eval.wire.tensors import LARGE_OUTPUT_BYTES, as_list, is_plain

#: Null batches per size during calibration (the first of the sizes is also run once untimed).
NULL_REPEATS = 2


@dataclass(frozen=True)
class Calibration:
    """The harness cost of a timed batch in the runner and in the judge, off each side's bracket (`clock_check`)."""

    runner: NullFit
    judge: NullFit


def calibrate(session: CandidateSession, pool: InputPool, timeout: float, seeded: bool = True) -> Calibration:
    """Null batches of 1 .. pool.n calls on the pool's sets, in the runner and in the judge, before the import."""
    sizes = sorted({1, max(1, pool.n // 4), max(1, pool.n // 2), pool.n})
    points: list[tuple[int, float]] = []
    kernel_points: list[tuple[int, float]] = []
    for model, into in ((NULL_MODEL, points), (NULL_KERNEL, kernel_points)):
        _null_batch(session, pool, model, sizes[-1], timeout, seeded)  # untimed: maps buffers, warms the loop
        for _ in range(NULL_REPEATS):
            for n in sizes:
                into.append((n, _null_batch(session, pool, model, n, timeout, seeded)))
    null = NullFit.fit(points)
    launch = NullFit.fit(kernel_points).per_call - null.per_call if session.device.startswith("cuda") else 0.0
    runner = replace(null, launch=max(0.0, launch))
    mirrored = copy_out_mirrored(pool)
    out = torch.zeros(tuple(pool.out_like.shape), dtype=pool.out_like.dtype, device=pool.device) \
        if mirrored else None
    scratch = torch.empty_like(out) if mirrored else None
    judge_points = [(n, judge_batch(lambda xs: out, pool, list(range(n)), seeded, scratch)[2])
                    for _ in range(NULL_REPEATS + 1) for n in sizes]
    return Calibration(runner, NullFit.fit(judge_points[len(sizes):]))


def copy_out_mirrored(pool: InputPool) -> bool:
    """Whether the judge copies each reference output out as the runner's commit does: not past LARGE_OUTPUT_BYTES
    (leaving it out only makes the reference look faster, never the candidate)."""
    like = pool.out_like
    return like is not None and like.numel() * like.element_size() <= LARGE_OUTPUT_BYTES


def judge_batch(fn: Any, pool: InputPool, order: list[int], seeds: Any, scratch: torch.Tensor | None,
                keep: Any = None) -> tuple[list[float], list[float], float]:
    """One batch of `fn` in the judge, outputs copied out as a runner's commit does: (stream, device ms, bracket s)."""
    if seeds is True:
        seeds = tuple(random.randrange(1 << 62) for _ in order)

    def copy_out(k: int, out: Any) -> None:
        head = next((t for t in as_list(out) if is_plain(t)), None)
        if head is None or (keep is not None and keep(k, head)):
            return
        if scratch is not None and head.shape == scratch.shape and head.dtype == scratch.dtype:
            scratch.copy_(head)

    t0 = time.perf_counter()
    stream, dev = timed_loop.time_batch(fn, pool.sets, order, device=pool.device, after_rep=copy_out,
                                        seeds=seeds or ())
    return stream, dev, time.perf_counter() - t0


def _null_batch(session: CandidateSession, pool: InputPool, model: int, n: int, timeout: float,
                seeded: bool) -> float:
    """One null batch made exactly as a timed batch, timed by the judge."""
    order = list(range(n))
    like = pool.out_like if pool.out_like is not None else torch.empty(0, device="meta")
    seeds = tuple(random.randrange(1 << 62) for _ in order) if seeded else ()
    return session.time(model, pool.pool_id, order, timeout, seeds, null_like=like)[1]
