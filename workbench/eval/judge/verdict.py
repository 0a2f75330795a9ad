"""The one place a verdict is decided (docs/verdicts.md): findings become a status at each `stop_if_rejected`, other
faults get theirs (`compile_error`, `runner_died`, ...), the speedup's label is its CI against a noise band, and a time
below the physical floor is `faster-than-physics`. The caller never changes the status."""

from __future__ import annotations

import json
import traceback
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np
import torch

from workbench.eval.checks.flags import REJECT, Finding, first_per_flag
from workbench.eval.judge.runners import faults
from workbench.eval.judge.timing.stats import _as_sorted, bootstrap_medians
from workbench.eval.wire.judge_messages import Reply
from workbench.eval.wire.records import from_json

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from workbench.tasks.task import Task


class Stop(Exception):
    """A stage ended the evaluation; `reply` holds the Reply fields decided so far (status among them)."""

    def __init__(self, reply: dict[str, Any]):
        self.reply = reply
        super().__init__(reply.get("status", ""))


@dataclass(frozen=True)
class Decision:
    """What findings decide: `status` (None: none rejects), the rejecting `flags`, other `warnings`, a line each."""

    status: str | None
    flags: list[str]
    warnings: list[str]
    message: str


def decide(findings: list[Finding]) -> Decision:
    """The first finding of each flag counts: "rejected" if a rejecting flag is a cheat, else "incorrect"."""
    findings = first_per_flag(findings)
    rejecting = [f for f in findings if f.severity == REJECT]
    cheat = any(f.info.status == "rejected" for f in rejecting)
    status = ("rejected" if cheat else "incorrect") if rejecting else None
    return Decision(status, list(dict.fromkeys(f.flag for f in rejecting)),
                    list(dict.fromkeys(f.flag for f in findings if f.severity != REJECT)),
                    "\n".join(f.line() for f in findings))


def stop_if_rejected(findings: list[Finding], warnings: list[str], reply: dict[str, Any] | None = None) -> str:
    """A checkpoint: warn-level flags join `warnings`; a rejecting finding ends the evaluation (`Stop`)."""
    decision = decide(findings)
    warnings += [w for w in decision.warnings if w not in warnings]
    if decision.status:
        raise Stop({**(reply or {}), "status": decision.status, "flags": decision.flags,
                    "message": decision.message})
    return decision.message


def rejected(findings: list[Finding]) -> dict[str, Any]:
    decision = decide(findings)
    return {"status": decision.status, "flags": decision.flags, "message": decision.message}


def accepted(reply: dict[str, Any], warnings: list[str]) -> dict[str, Any]:
    return {**reply, "status": "ok", "flags": [], "warnings": warnings, "message": ""}


def compile_error(message: str, log: str = "") -> NoReturn:
    raise Stop({"status": "compile_error", "message": message, "log": log})


def load_timeout(budget: float) -> NoReturn:
    raise Stop({"status": "timeout", "message": (
        f"timeout: loading the candidate took more than its compile budget of {budget:g} s (CUDA compilation "
        "included). Raise it with evaluate(..., compile_timeout=seconds).")})


def candidate_failed(type_name: str, text: str, stage: str, where: str, log: str) -> dict[str, Any]:
    """A candidate's exception: "compile_error" for a kernel that did not compile, else "runtime_error"."""
    compiled, message = faults.failure_message(type_name, text, stage, where)
    return {"status": "compile_error" if compiled else "runtime_error", "message": message, "log": log[-3000:],
            "out_of_memory": not compiled and faults.out_of_memory(type_name, text)}


def runner_died(kind: str, detail: str, log: str, source: str, language: str, device: str,
                limit: float) -> dict[str, Any]:
    return {"status": kind, "died": detail, "log": log,
            "message": faults.died_message(kind, detail, log, source, language, device, limit)}


def protocol_violation(detail: str, log: str) -> dict[str, Any]:
    return {"status": "rejected", "flags": ["protocol-violation"], "log": log,
            "message": Finding("protocol-violation", detail).line()}


def runtime_error(message: str, out_of_memory: bool) -> dict[str, Any]:
    """The task's or the judge's own failure (not the candidate's), with the traceback being handled."""
    return {"status": "runtime_error", "message": message, "log": traceback.format_exc()[-3000:],
            "out_of_memory": out_of_memory}


def judge_error(exc: BaseException, pid: int) -> Reply:
    return Reply(status="runtime_error", message=f"judge error: {type(exc).__name__}: {exc}",
                 log=traceback.format_exc()[-3000:], judge_pid=pid)


#: The noise band's floor: a speedup within 3% either way is not claimed (a run-to-run offset the CI does not hold).
DEFAULT_BAND = 0.03
#: The widest band a noisy timing widens it to (`noise_band`).
MAX_BAND = 0.10
#: Fewer samples on a side give "inconclusive": the bootstrap of a median of a handful undercovers.
MIN_AB_SAMPLES = 10


@dataclass(frozen=True)
class Speedup:
    """The candidate's speedup (> 1: faster) with its CI, verdict and how it was computed (`speedup`)."""

    speedup: float
    low: float
    high: float
    verdict: str  # faster | slower | same | inconclusive
    method: str
    band: float = DEFAULT_BAND
    level: float = 0.95


def speedup_label(low: float, high: float, band: float = DEFAULT_BAND) -> str:
    """A speedup CI against the noise band [1 / (1 + band), 1 + band] (the CI covers noise within a run, not between):
    "faster"/"slower" when wholly beyond it, "same" when wholly inside, else "inconclusive"; symmetric in ratio."""
    if not band >= 0:
        raise ValueError(f"band must be >= 0, got {band!r}")
    upper, lower = 1.0 + band, 1.0 / (1.0 + band)
    if low > upper:
        return "faster"
    if high < lower:
        return "slower"
    return "same" if lower <= low and high <= upper else "inconclusive"


def _relative_mad(values: np.ndarray) -> float:
    """Median absolute deviation over the median: the spread of positive samples, robust to their outliers."""
    med = float(np.median(values))
    return float(np.median(np.abs(values - med))) / med


def noise_band(reference_ms: Sequence[float], candidate_ms: Sequence[float], paired: bool) -> float:
    """DEFAULT_BAND widened to the rounds' relative spread, at most MAX_BAND: paired, the per-round ratios' spread but
    never the reference's own (erratic batches cannot widen it); unpaired, the smaller of the two sides'."""
    ref, cand = np.asarray(reference_ms, dtype=np.float64), np.asarray(candidate_ms, dtype=np.float64)
    noise = min(_relative_mad(ref), _relative_mad(ref / cand if paired and ref.size == cand.size else cand))
    return min(MAX_BAND, max(DEFAULT_BAND, noise))


def speedup(reference_ms: Iterable[float], candidate_ms: Iterable[float], *, band: float | None = None,
            level: float = 0.95, resamples: int = 2000, seed: int = 0, paired: bool = False) -> Speedup:
    """The speedup, its seeded bootstrap CI and label: `paired` (sample k of both sides from one round: drift cancels),
    the median per-round ratio, rounds resampled; else median(reference) / median(candidate), each side resampled."""
    if resamples < 2000:
        raise ValueError(f"resamples must be >= 2000 for a stable 95% percentile interval, got {resamples}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    reference_ms, candidate_ms = list(reference_ms), list(candidate_ms)
    ref, cand = _as_sorted(reference_ms, "reference"), _as_sorted(candidate_ms, "candidate")
    if band is None:
        band = noise_band(reference_ms, candidate_ms, paired)
    rng = np.random.default_rng(seed)
    if paired and ref.size == cand.size:
        per_round = np.sort(np.asarray(reference_ms, dtype=np.float64) / np.asarray(candidate_ms, dtype=np.float64))
        ratios = bootstrap_medians(per_round, resamples, rng)
        point = float(np.median(per_round))
        method = (f"median of per-round ratios (paired), bootstrap of {resamples} resamples of the rounds, "
                  f"percentile {level:.0%} interval, seed {seed}")
    else:
        ratios = bootstrap_medians(ref, resamples, rng) / bootstrap_medians(cand, resamples, rng)
        point = float(np.median(ref) / np.median(cand))
        method = (f"bootstrap ratio of medians, {resamples} resamples per side, percentile {level:.0%} interval, "
                  f"seed {seed}")
    low, high = (float(v) for v in np.quantile(ratios, [(1 - level) / 2, (1 + level) / 2]))
    if paired and ref.size == cand.size and ref.size < MIN_AB_SAMPLES:
        label, low, high, method = _few_rounds(per_round, band)
    elif min(ref.size, cand.size) < MIN_AB_SAMPLES:
        label = "inconclusive"
        method += f"; fewer than {MIN_AB_SAMPLES} samples on a side"
    else:
        label = speedup_label(low, high, band)
    method += f"; noise band {band:.1%}"
    return Speedup(speedup=point, low=low, high=high, verdict=label, method=method, band=band, level=level)


#: Two-sided 97.5% quantiles of Student's t by degrees of freedom (1 to 8): the interval of few rounds.
_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306}


def _few_rounds(per_round: np.ndarray, band: float) -> tuple[str, float, float, str]:
    """(label, low, high, how) of fewer than MIN_AB_SAMPLES paired rounds: all beyond the band on one side decide by the
    sign test once p = 2 x 0.5^n <= 5%, else the 95% t-interval of the log ratios as a CI; one round decides nothing."""
    n = per_round.size
    if n < 2:
        return "inconclusive", float(per_round.min()), float(per_round.max()), "a single round decides nothing"
    logs = np.log(per_round)
    half = _T975[n - 1] * float(logs.std(ddof=1)) / n ** 0.5
    low, high = float(np.exp(logs.mean() - half)), float(np.exp(logs.mean() + half))
    how = f"{n} paired rounds: 95% t-interval of the log ratios"
    upper, lower = 1.0 + band, 1.0 / (1.0 + band)
    one_side = bool((per_round > upper).all()) or bool((per_round < lower).all())
    if one_side and 2 * 0.5 ** n <= 0.05:
        return ("faster" if per_round[0] > 1 else "slower"), low, high, \
            f"{how}; every round beyond the band: sign test p = {2 * 0.5 ** n:.3f}"
    return speedup_label(low, high, band), low, high, how


def physics(task: Task, size: dict[str, Any], device: str, device_name: str, timing: dict[str, Any],
            counted: dict[str, Any] | None, ceilings: dict[str, Any] | None) -> list[Finding]:
    """`faster-than-physics`: a median under the floor of the task's minimal work at the best rates (`roofline.sol`)."""
    from roofline.ceilings import Ceilings
    from roofline.sol import faster_than_physics
    from workbench.result import Result, Timing

    result = Result(task=task.name, candidate_id="", candidate_name="", language="", status="ok", size=dict(size),
                    dtype=str(size.get("dtype", task.dtypes[0] if task.dtypes else "")), device=device,
                    device_name=device_name, timing=Timing(**timing))
    detail = faster_than_physics(result, task, counted, Ceilings.from_dict(ceilings) if ceilings is not None else None)
    return [Finding("faster-than-physics", detail)] if detail else []


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, torch.dtype):
        return str(obj).removeprefix("torch.")
    return asdict(obj) if hasattr(obj, "__dataclass_fields__") else str(obj)


def reply(data: dict[str, Any]) -> Reply:
    """The typed Reply of an evaluation's fields; an undeclared field is an error here, in the judge."""
    return from_json(Reply, json.loads(json.dumps(data, default=_jsonable)))
