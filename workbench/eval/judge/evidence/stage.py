"""The judge corroborates the runner's launch reports (`checks/evidence.py`): after the checks, replaced hook points
and on the CPU the probe calls (`after_check`); before the verdict, the timing basis and a GPU's profiled forward."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from workbench import languages
from workbench.eval.checks import evidence as ev
from workbench.eval.checks import runtime as guards
from workbench.eval.checks.flags import Finding
from workbench.eval.judge.evidence.probe import CONFIRM_PROBES

if TYPE_CHECKING:
    from workbench.eval.judge.evaluation import Evaluation
    from workbench.eval.judge.runners.session import CallRecord, CandidateSession


def after_check(evaluation: Evaluation, rejected: bool = False) -> list[Finding]:
    """Findings from the correctness calls' launch reports; `rejected`: no call is added to probe a rejected one."""
    session, evidence, language = evaluation.session, evaluation.evidence, evaluation.candidate.language
    records = session.reports
    evidence.set("outputs", ev.JUDGE, "read from shared memory by the judge and compared with its reference")
    found = guards.judge_tamper(name for r in records for name in r.launch.tampered)
    if not languages.get(language).compiled:
        evidence.set("launches", ev.NOT_APPLICABLE, "a PyTorch candidate launches no kernels of its own")
    elif languages.get(language).interpreted(evaluation.device):
        if rejected and not _probes(records):
            evidence.set("launches", ev.UNVERIFIED, "not probed: the candidate failed other checks")
        elif any(r.launch.launches for r in records):
            evidence.set("launches", *_interpreted(session))
            if evidence.levels["launches"] == ev.CONTRADICTED:
                found += ev.findings(evidence, evaluation.policy, language)
        else:
            evidence.set("launches", ev.NOT_APPLICABLE, "no launch reported")
    return found


def _interpreted(session: CandidateSession) -> tuple[str, str]:
    """(level, how) of the CPU launches by the probe pairs (one made now if none); where they contradict the report,
    larger probe pairs made now decide (`probe.confirm`)."""
    if not _probes(session.reports):
        session.probe_pair()
    level, how = _read_probes(session.reports, 0)
    if level == ev.CONTRADICTED and session.probes is not None:
        first, made = how, len(session.reports)
        session.probes.confirm()
        for _ in range(CONFIRM_PROBES):
            session.probe_pair()
        level, how = _read_probes(session.reports, made)
        how = f"{how}; smaller probes before them: {first}"
    return level, how


def _read_probes(records: list[CallRecord], start: int) -> tuple[str, str]:
    """(level, how) from the probe calls from record `start` on: /proc CPU time, else wall time."""
    cpu = all(r.cpu_ns is not None for r in records)

    def seconds(r: CallRecord) -> float:
        return (r.cpu_ns or 0) / 1e9 if cpu else r.wall_s

    pairs = []
    for k, probe in _probes(records):
        if k < start:
            continue
        # The baseline: the cheapest earlier ordinary call of the model on inputs of these shapes, so one ordinary
        # call that a stall made slower does not read as a probe's missing burn.
        alike = [seconds(r) for r in records[:k] if not r.probe_ns and r.model == probe.model and
                 r.shapes == probe.shapes]
        baseline = min(alike, default=seconds(records[k - 1]))
        pairs.append(ev.ProbePair(baseline, seconds(probe), probe.launch.launches, probe.probe_ns / 1e9))
    return ev.interpreted_launches(pairs, "CPU time (from /proc)" if cpu else "wall time (the judge's clock)")


def _probes(records: list[CallRecord]) -> list[tuple[int, CallRecord]]:
    """(index, record) of each probe call after an ordinary one (its pair's first half)."""
    return [(i, r) for i, r in enumerate(records) if r.probe_ns and i > 0]


def before_verdict(evaluation: Evaluation, result: dict[str, Any]) -> list[Finding]:
    """The timing basis, the GPU launch evidence, and the rule every verdict obeys."""
    evidence, language = evaluation.evidence, evaluation.candidate.language
    basis = evaluation.diagnostics.timing_basis or ""
    if "timing" not in result:
        evidence.set("time", ev.NOT_APPLICABLE, "not timed")
    elif basis.startswith("runner clock"):
        evidence.set("time", ev.CORROBORATED, "the runner's clock, bounded by the judge's clock around each batch")
    else:
        evidence.set("time", ev.JUDGE, "the judge's clock around each timed batch, less the harness")
    found: list[Finding] = []
    if evaluation.device.startswith("cuda") and languages.get(language).compiled:
        found += _profiled(evaluation, result)
    return found + ev.findings(evidence, evaluation.policy, language)


def _profiled(evaluation: Evaluation, result: dict[str, Any]) -> list[Finding]:
    """GPU: the timing stage's profiled forward (or one made here, its coverage judged) as launch evidence."""
    session, found, own = evaluation.session, [], guards.own_kernel_names(evaluation.candidate.source)
    if session.profiled is None:
        result["coverage"], found = guards.judge_coverage(_profile(evaluation), own, evaluation.policy)
    kernels, tampered = session.profiled
    # The call's cost: the larger of the judge's clock and the timing the verdict uses.
    timed = [t.get("median_ms") for t in (result.get("judge_clock_timing"), result.get("timing")) if t]
    call_ms = max((v for v in timed if v is not None), default=None)
    level, how = ev.profiled_launches(kernels, own, tampered, call_ms)
    evaluation.evidence.set("launches", level, how)
    evaluation.evidence.set("coverage", level, how)
    return found + guards.judge_tamper(tampered)


def settle(evaluation: Evaluation, result: dict[str, Any]) -> list[Finding]:
    """A pending static finding decided by a profiled forward; its notes go to `result`."""
    kernels = evaluation.session.profiles[-1] if evaluation.session.profiles else _profile(evaluation)
    assert evaluation.ran is not None
    found = evaluation.ran.after_profile(kernels, guards.own_kernel_names(evaluation.candidate.source))
    result.setdefault("details", {}).setdefault("notes", []).extend(evaluation.ran.take_notes())
    return found


def _profile(evaluation: Evaluation) -> dict[str, float]:
    """One profiled forward of the candidate at the timing size."""
    ref, size, seed = evaluation.reference(), evaluation.time_size, evaluation.seed
    model = evaluation.session.model(evaluation.reference_model(), ref.init_inputs(size, seed), seed,
                                     {**ref.defaults, **size})
    return evaluation.session.profile(model.model_id, ref.make_inputs(size, seed + 101, evaluation.device))
