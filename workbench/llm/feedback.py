"""Feedback channels: what the model is told about its earlier attempts, each a named switch.

Which information helps a model improve a kernel is an open question, so every channel can be turned off
on its own (an ablation factor in a study): compiler/runtime `errors`, `correctness` (failed checks and
error size), `timing` (times and speedup), `roofline` (speed-of-light share and bound), `ncu` (profiler
counters, when the evaluation collected them) and `history_depth` (how many earlier attempts are listed).
The verdict line (status and flag names) is always given: without it a refine prompt is meaningless.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from workbench.eval.checks.flags import FLAGS
from workbench.result import Result

CHANNELS = ("errors", "correctness", "timing", "roofline", "ncu")

#: Longest error text passed back; compiler traces can be huge and the end is what matters.
MAX_ERROR_CHARS = 2500
MAX_LOG_LINES = 30


@dataclass(frozen=True)
class FeedbackOptions:
    """Which channels go into refine/mutation prompts. Presets: FEEDBACK_PRESETS."""

    errors: bool = True
    correctness: bool = True
    timing: bool = True
    roofline: bool = True
    ncu: bool = True
    #: How many earlier attempts (besides the one being refined) are summarised in the prompt.
    history_depth: int = 2

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> FeedbackOptions:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in (data or {}).items() if k in known})

    @property
    def label(self) -> str:
        """Short name for tables: the channels that are on, then the history depth."""
        on = [c for c in CHANNELS if getattr(self, c)]
        return ("+".join(on) or "verdict-only") + f"/h{self.history_depth}"

    def with_(self, **changes: Any) -> FeedbackOptions:
        return replace(self, **changes)


FEEDBACK_PRESETS: dict[str, FeedbackOptions] = {
    "full": FeedbackOptions(),
    "none": FeedbackOptions(False, False, False, False, False, 0),
    "errors": FeedbackOptions(True, False, False, False, False, 0),
    "correctness": FeedbackOptions(True, True, False, False, False, 1),
    "no-roofline": FeedbackOptions(roofline=False, ncu=False),
}


def feedback_options(value: FeedbackOptions | str | dict[str, Any] | None) -> FeedbackOptions:
    """Accept a preset name, a dict or an instance."""
    from workbench.errors import UnknownNameError

    if value is None:
        return FeedbackOptions()
    if isinstance(value, FeedbackOptions):
        return value
    if isinstance(value, dict):
        return FeedbackOptions.from_dict(value)
    if value not in FEEDBACK_PRESETS:
        raise UnknownNameError("feedback preset", value, list(FEEDBACK_PRESETS))
    return FEEDBACK_PRESETS[value]


#: Candidate files live at temporary paths; naming them "candidate.py" keeps prompts short and stable.
_CANDIDATE_PATH = re.compile(r'"[^"\n]*?/(kwb_cand[^"/\n]*\.py)"')
#: Traceback frames inside the harness or libraries tell the model nothing about its own code.
_FOREIGN_FRAME = re.compile(r'^\s*File "[^"]*(/site-packages/|/workbench/|<frozen )')


def clean_trace(text: str) -> str:
    """A traceback reduced to the candidate's own frames and the exception, with stable file names."""
    text = _CANDIDATE_PATH.sub('"candidate.py"', text)
    out: list[str] = []
    skipping = False
    for line in text.splitlines():
        if line.lstrip().startswith("File "):
            skipping = bool(_FOREIGN_FRAME.match(line))
        elif not line.startswith(" "):
            skipping = False  # the exception line, or text outside a traceback
        if not skipping:
            out.append(line)
    return "\n".join(out)


def _rounds_summary(rounds: Any) -> str:
    """One line from the correctness protocol's rounds: how many passed, where the failures were."""
    if not isinstance(rounds, list) or not rounds or not all(isinstance(r, dict) for r in rounds):
        return ""
    failed = [r for r in rounds if r.get("ok") is False]
    line = f"Correctness rounds: {len(rounds) - len(failed)} of {len(rounds)} passed"
    if failed:
        parts = []
        for r in failed[:5]:
            where = ", ".join(str(x) for x in (r.get("dist"), r.get("size")) if x)
            err = r.get("max_abs")
            parts.append(f"{where}: max abs {err:.3g}" if isinstance(err, (int, float)) else where)
        line += "; failed: " + "; ".join(parts)
    return line


def _tail(text: str, max_chars: int = MAX_ERROR_CHARS, max_lines: int = MAX_LOG_LINES) -> str:
    lines = text.strip().splitlines()[-max_lines:]
    out = "\n".join(lines)
    return out if len(out) <= max_chars else "..." + out[-max_chars:]


def verdict_line(result: Result) -> str:
    flags = f" (failed checks: {', '.join(result.flags)})" if result.flags else ""
    return f"Verdict: {result.status}{flags}"


def _scalar_details(details: dict[str, Any]) -> list[str]:
    """Short scalar entries of a details dict (numbers, flags, short strings), at most 12."""
    lines = [f"- {key}: {value}" for key, value in details.items()
             if isinstance(value, (int, float, bool)) or (isinstance(value, str) and len(value) < 200)]
    return lines[:12]


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g} ms"


def render_result(result: Result, options: FeedbackOptions) -> str:
    """The feedback block for one evaluated attempt under `options`."""
    out = [verdict_line(result)]
    failed_to_run = result.status in ("compile_error", "runtime_error", "timeout", "crashed")
    if options.errors and failed_to_run:
        message = clean_trace(result.message or "")
        if message:
            out.append("Error:\n" + _tail(message))
        log = clean_trace(result.log or "").strip()
        if log and log not in message:
            out.append("Last output:\n" + _tail(log))
    if options.correctness and not failed_to_run:
        if result.status in ("incorrect", "rejected") and result.message:
            out.append("Checks:\n" + _tail(result.message))
        for flag in result.flags:
            info = FLAGS.get(flag)
            if info and info.name not in (result.message or ""):
                out.append(f"- [{flag}] {info.why}. Fix: {info.fix}")
        errs = [f"{name} {value:.3g}" for name, value in
                (("max abs error", result.max_abs_err), ("max rel error", result.max_rel_err)) if value is not None]
        if errs:
            out.append("Error vs. reference: " + ", ".join(errs))
        details = result.details if isinstance(result.details, dict) else {}
        rounds = _rounds_summary(details.get("rounds"))
        if rounds and not result.ok:
            out.append(rounds)
        if isinstance(details.get("summary"), dict):
            out += _scalar_details(details["summary"])
    if options.timing and result.timing is not None:
        t = result.timing
        line = f"Time: {_ms(t.median_ms)} median over {t.n} runs (IQR {_ms(t.iqr_ms)}, clock {t.clock})"
        if result.reference_timing is not None:
            line += f"; reference {_ms(result.reference_timing.median_ms)}"
        if result.speedup is not None:
            line += f"; speedup {result.speedup:.3g}x"
        if t.clock == "interpreter":
            line += " (Triton interpreter on CPU: relative times only)"
        out.append(line)
    if options.roofline and result.sol_fraction is not None:
        line = f"Roofline: {100 * result.sol_fraction:.1f}% of speed-of-light"
        if result.bound:
            line += f", {result.bound}-bound"
        if result.achieved_bytes_per_s:
            line += f", {result.achieved_bytes_per_s / 1e9:.3g} GB/s"
        if result.achieved_flops_per_s:
            line += f", {result.achieved_flops_per_s / 1e12:.3g} TFLOP/s"
        out.append(line)
    ncu = result.details.get("ncu") if isinstance(result.details, dict) else None  # filled where ncu ran
    if options.ncu and isinstance(ncu, dict) and ncu:
        out.append("Nsight Compute: " + ", ".join(f"{k}={v}" for k, v in list(ncu.items())[:12]))
    return "\n".join(out)


def history_line(label: str, result: Result, options: FeedbackOptions) -> str:
    """One line per earlier attempt: verdict, and (if those channels are on) error size, speed."""
    parts = [f"{label}: {result.status}"]
    if result.flags:
        parts.append("[" + ", ".join(result.flags) + "]")
    if options.errors and result.status in ("compile_error", "runtime_error", "timeout", "crashed") and result.message:
        parts.append("- " + clean_trace(result.message).strip().splitlines()[0][:200])
    if options.correctness and result.max_abs_err is not None:
        parts.append(f"max abs err {result.max_abs_err:.3g}")
    if options.timing and result.timing is not None:
        parts.append(_ms(result.timing.median_ms))
        if result.speedup is not None:
            parts.append(f"speedup {result.speedup:.3g}x")
    if options.roofline and result.sol_fraction is not None:
        parts.append(f"SOL {100 * result.sol_fraction:.0f}%")
    return " ".join(parts)


def render_history(attempts: list[tuple[str, Result]], options: FeedbackOptions) -> str:
    """The last `history_depth` attempts, oldest first; empty when depth is 0 or there are none."""
    if options.history_depth <= 0 or not attempts:
        return ""
    shown = attempts[-options.history_depth:]
    return "\n".join(f"- {history_line(label, res, options)}" for label, res in shown)
