"""The judge's reading of what a runner reported (docs/anti-cheating.md, cheats 4, 5, 8, 17): launches of the
candidate's own kernels (names parsed from its source, never the runner's), threads left running, coverage."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass

from workbench import languages
from workbench.eval.checks.flags import Finding
from workbench.eval.wire.runner_messages import LaunchReport

#: Under the strict policy the candidate's own kernels must take at least this share of GPU kernel time.
STRICT_MIN_COVERAGE = 0.5
#: Under the partial policy (library calls allowed) own kernels doing almost none of the work still reject.
PARTIAL_MIN_COVERAGE = 0.02

def own_kernel_names(source: str) -> set[str]:
    """The kernels the candidate defines, as each language (`workbench/languages/`) and its compiler name them."""
    try:
        tree: ast.Module | None = ast.parse(source)
    except SyntaxError:
        tree = None
    names: set[str] = set()
    for language in languages.LANGUAGES.values():
        names |= language.own_kernel_names(tree, source or "")
    return names


def is_own(kernel: str, names: Iterable[str]) -> bool:
    """Whether a profiled kernel is one of the candidate's, as any language names its kernels."""
    own = set(names)
    return any(language.is_own_kernel(kernel, own) for language in languages.LANGUAGES.values())


def judge_launches(reports: list[LaunchReport], language: str,
                   passthrough: list[bool] | None = None) -> list[Finding]:
    """A candidate whose language counts launches (Triton, Helion) launches its own kernels in every call and returns
    what they wrote (`passthrough[i]`: call i returned an input unchanged, which excuses content no launch produced)."""
    if not languages.get(language).tracks_launches or not reports:
        return []
    for r in reports:
        if r.launches == 0:
            defined = ", ".join(r.kernels) or "none found"
            title = languages.get(language).title
            return [Finding("decoy-kernel", f"forward launched none of the candidate's {title} kernels ({defined})")]
    for i, r in enumerate(reports):
        if not r.outputs_launched:
            return [Finding("decoy-kernel", "the returned tensor was not passed to any of the candidate's kernel "
                                            "launches, so the kernels did not produce it")]
        if r.outputs_changed_after_launch:
            return [Finding("decoy-kernel", "the returned tensor was changed after the candidate's last kernel launch "
                                            "on it, by code outside its kernels")]
        if r.outputs_prefilled_unchanged and not (passthrough and i < len(passthrough) and passthrough[i]):
            return [Finding("decoy-kernel", "the returned tensor already held its values before the candidate's "
                                            "kernels got it, and no launch changed it: it was computed elsewhere")]
    return []


def judge_tamper(tampered: Iterable[str]) -> list[Finding]:
    """Hook points the runner sealed and found replaced."""
    names = list(dict.fromkeys(tampered))
    if not names:
        return []
    shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    return [Finding("harness-tamper", f"the runner's sealed hook points were replaced while the candidate ran: "
                                      f"{shown}")]


def judge_threads(reports: list[LaunchReport]) -> list[Finding]:
    for r in reports:
        if r.threads_left:
            return [Finding("thread-deferral", f"{len(r.threads_left)} thread(s) still running after forward: "
                                               f"{', '.join(r.threads_left)}")]
    return []


def judge_coverage(kernels: dict[str, float], own: set[str], policy: str) -> tuple[float | None, list[Finding]]:
    """(share of GPU kernel time in the candidate's kernels, findings) from one profiled forward."""
    total = sum(kernels.values())
    if total <= 0:
        return None, [Finding("decoy-kernel", "no GPU kernel ran during forward")]
    mine = sum(us for name, us in kernels.items() if is_own(name, own))
    share = mine / total
    minimum = PARTIAL_MIN_COVERAGE if policy == "partial" else STRICT_MIN_COVERAGE
    if share < minimum:
        others = ", ".join(sorted({languages.base_name(k)[:40] for k in kernels if not is_own(k, own)})[:4])
        return share, [Finding("low-coverage", f"the candidate's kernels took {100 * share:.1f}% of GPU kernel time "
                                               f"(the {policy} policy needs >= {100 * minimum:.0f}%); other kernels: "
                                               f"{others}")]
    return share, []


#: Kernels under this share of a long enough median time mean the candidate computes on the host.
HOST_WORK_SHARE = 0.05
HOST_WORK_MIN_MS = 1.0


def judge_host_work(kernels: dict[str, float], median_ms: float) -> list[Finding]:
    """`host-compute` when a profiled forward's kernels are a sliver of the measured time."""
    gpu_ms = sum(kernels.values()) / 1e3
    if median_ms >= HOST_WORK_MIN_MS and gpu_ms < HOST_WORK_SHARE * median_ms:
        return [Finding("host-compute", f"GPU kernels ran {gpu_ms:.3f} ms of a {median_ms:.3f} ms forward: the work "
                                        "happens on the host, not in the candidate's kernels")]
    return []


#: On the CPU the reference runs on one core: a runner using more than this many cores' worth (beyond the slack of
#: 10 ms ticks) had cores it did not.
CPU_SHARE_LIMIT = 1.3
CPU_SHARE_SLACK_S = 0.04
#: Threads besides the runner's main one may use this share of a batch's bracket (or seconds, for short batches).
OTHER_THREADS_SHARE = 0.1
OTHER_THREADS_SLACK_S = 0.005


@dataclass(frozen=True)
class CpuBatch:
    """One timed CPU batch as the judge read it from /proc: its bracket, the runner's CPU seconds (ticks), and the
    precise seconds of its main thread and of its other live threads."""

    bracket: float
    cpu: float
    main: float
    others: float

    def __add__(self, other: CpuBatch) -> CpuBatch:
        return CpuBatch(self.bracket + other.bracket, self.cpu + other.cpu, self.main + other.main,
                        self.others + other.others)


def judge_cpu_share(batches: list[CpuBatch], span: CpuBatch | None = None) -> list[Finding]:
    """CPU timing: work on threads other than the runner's main one, or over one core's worth, is `thread-use`; `span`
    (the whole timing read once) keeps short batches from adding up their tick rounding."""
    for b in [*batches, *([span] if span is not None else [])]:
        off_main = max(b.others, b.cpu - b.main - b.others)
        if b.others > max(OTHER_THREADS_SHARE * b.bracket, OTHER_THREADS_SLACK_S) or \
                off_main > max(OTHER_THREADS_SHARE * b.bracket, CPU_SHARE_SLACK_S):
            return [Finding("thread-use", f"threads other than the runner's own used {off_main * 1e3:.1f} ms of CPU "
                                          f"in {b.bracket * 1e3:.1f} ms of timed batches; on the CPU the reference is "
                                          "timed on one thread (torch.set_num_threads, thread pools and subprocesses "
                                          "give the candidate cores the reference does not have)")]
        if b.cpu - b.bracket > max((CPU_SHARE_LIMIT - 1) * b.bracket, CPU_SHARE_SLACK_S):
            return [Finding("thread-use", f"the runner used {b.cpu / b.bracket:.1f} cores during a timed batch "
                                          f"({b.cpu:.2f} s of CPU in {b.bracket:.2f} s); on the CPU the reference is "
                                          "timed on one core")]
    return []
