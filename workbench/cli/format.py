"""Plain-text rendering for the terminal: tables, times with their CI, speedups, one Result, a progress line.

Kept apart from the commands so every command prints numbers the same way (and never prints `nan`): a value
that is unknown is "-", a speedup that cannot exist (interpreter times) says why.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

from workbench.result import kernel_policy_text
from workbench.tasks.sizes import size_label


def format_table(rows: Sequence[Sequence[Any]], headers: Sequence[str], max_width: int = 60) -> str:
    """A plain-text table; long cells are cut at `max_width` so a row stays on one terminal line."""
    def cell(v: Any) -> str:
        text = "" if v is None else str(v).replace("\n", " ")
        return text if len(text) <= max_width else text[: max_width - 1] + "…"

    cells = [[cell(h) for h in headers]] + [[cell(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def missing(value: Any) -> bool:
    """None or NaN: a number nobody measured."""
    return value is None or (isinstance(value, float) and value != value)


def size_text(size: dict[str, Any] | None) -> str:
    return ", ".join(f"{k}={v}" for k, v in (size or {}).items()) or "(file defaults)"


def ms_text(value: float | None) -> str:
    return "-" if missing(value) else f"{value:.4g} ms"


def time_text(result) -> str:
    """Median with the half-width of its 95% CI and the clock that measured it."""
    t = result.timing
    if t is None:
        return "-"
    half = max(t.median_ms - t.ci95_low_ms, t.ci95_high_ms - t.median_ms)
    return f"{t.median_ms:.4g} ms ± {half:.2g} (95% CI {t.ci95_low_ms:.4g}-{t.ci95_high_ms:.4g}, {t.clock}, n={t.n})"


def speedup_text(result) -> str:
    if result.speedup is not None:
        text = f"{result.speedup:.2f}x vs eager"
        ci = getattr(result, "speedup_ci", None)
        if ci:
            text += f" [{ci[0]:.2f}, {ci[1]:.2f}]"
        verdict = getattr(result, "speedup_verdict", None)
        if verdict:
            text += f" {verdict}"
        if result.speedup_vs_compile is not None:
            text += f", {result.speedup_vs_compile:.2f}x vs torch.compile"
        return text
    if result.timing is not None and result.timing.clock == "interpreter":
        return "n/a (interpreter)"
    return "n/a"


def sol_text(result) -> str:
    if result.sol_fraction is None:
        return "-"
    return f"{100 * result.sol_fraction:.1f}%" + (f" ({result.bound}-bound)" if result.bound else "")


def _reference_text(result) -> str:
    """The reference's time, never beside an interpreter time (it measures the interpreter, not a kernel)."""
    if result.timing is not None and result.timing.clock == "interpreter":
        return "not compared: interpreter times measure Triton's interpreter, not the kernel"
    ref = result.reference_timing
    return f"{ref.median_ms:.4g} ms ({ref.clock})" if ref else "-"


def format_result(result, stored: str | None = None, projection_gpu: str | None = None) -> str:
    """The `kwb eval` report of one Result; without a measured SOL, where its counted work would sit on
    `projection_gpu`'s datasheet roofline (default the H100)."""
    errors = "-"
    if result.max_abs_err is not None or result.max_rel_err is not None:
        errors = "  ".join(f"{name} {'-' if v is None else format(v, '.3g')}"
                           for name, v in (("abs", result.max_abs_err), ("rel", result.max_rel_err)))
    rows = [
        ("task", f"{result.task} ({size_label(result.size, result.dtype) or '(file defaults)'})"),
        ("candidate", f"{result.candidate_name} ({result.language}, id {result.candidate_id[:8]})"),
        ("device", f"{result.device}: {result.device_name}" if result.device_name else result.device),
        ("status", result.status),
        ("flags", ", ".join(result.flags) or "-"),
        ("max error", errors),
        ("time", time_text(result)),
        ("reference", _reference_text(result)),
        ("speedup", speedup_text(result)),
    ]
    if result.sol_fraction is not None:
        rows.append(("SOL", sol_text(result)))
    elif (projected := _projection(result, projection_gpu)) is not None:
        rows.append(("roofline", projected))
    if result.coverage is not None:
        rows.append(("coverage", f"{100 * result.coverage:.0f}% of GPU kernel time in the candidate's own kernels"))
    if result.launch_reference_timing is not None:
        rows.append(("with launch", f"reference {result.launch_reference_timing.median_ms:.4g} ms with host launch "
                                    f"gaps (the speedup above is {result.speedup_basis or 'gpu-only'})"))
    if result.precision or result.kernel_policy:
        rows.append(("policies", f"precision {result.precision or '-'}, "
                                 f"kernels {kernel_policy_text(result.kernel_policy) or '-'}"))
    if getattr(result, "sandbox", ""):
        reason = result.protocol.get("sandbox_reason", "")
        if reason and not result.sandbox.startswith("namespaces"):
            reason = f"not isolated: {reason}"
        rows.append(("sandbox", result.sandbox + (f" ({reason})" if reason else "")))
    if getattr(result, "evidence", None):
        rows.append(("evidence", result.evidence_text()))
    if result.warnings:
        rows.append(("warnings", "; ".join(result.warnings)))
    if stored:
        rows.append(("stored", stored))
    width = max(len(k) for k, _ in rows)
    lines = [f"{k.ljust(width)}  {v}" for k, v in rows]
    if result.message:
        lines.append(f"{'message'.ljust(width)}  " + result.message.replace("\n", "\n" + " " * (width + 2)))
    return "\n".join(lines)


def _projection(result, gpu: str | None = None) -> str | None:
    """Where the result's counted work would sit on `gpu` (roofline is optional in a bare engine install)."""
    try:
        from roofline.projection import projection_text
    except ImportError:
        return None
    return projection_text(result, gpu)


class Progress:
    """One status line on stderr, refreshed in place on a terminal: elapsed seconds and, once `update` is fed an
    evaluation's progress (pass it as `on_progress`), the stage, round or batch and CI width. Off a terminal it
    prints the line once, and with `verbose` one more line per stage."""

    def __init__(self, text: str, stream=None, verbose: bool = False):
        self.text, self.stream, self.verbose = text, stream or sys.stderr, verbose
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.started = 0.0
        self.detail, self._stage, self._width = "", "", 0

    def update(self, progress: Any) -> None:
        """The evaluation's latest progress (a `workbench.eval.wire.judge_messages.Progress`)."""
        self.detail = progress.describe()
        if progress.stage != self._stage:
            if self._thread is None and self.verbose:
                print(f"  {self.detail}", file=self.stream, flush=True)
            elif self._thread is not None:  # a new stage shows at once, not at the next refresh
                self._refresh()
        self._stage = progress.stage

    def _line(self, text: str) -> str:
        """`text` padded to cover the longer line it overwrites."""
        pad, self._width = max(0, self._width - len(text)), len(text)
        return text + " " * pad

    def __enter__(self) -> Progress:
        self.started = time.perf_counter()
        if self.stream.isatty():
            self._thread = threading.Thread(target=self._spin, daemon=True)
            self._thread.start()
        else:
            print(f"{self.text} ...", file=self.stream, flush=True)
        return self

    def _spin(self) -> None:
        while not self._stop.wait(0.5):
            self._refresh()

    def _refresh(self) -> None:
        with self._lock:
            if self._stop.is_set():
                return
            detail = self.detail or f"{time.perf_counter() - self.started:.0f} s"
            print("\r" + self._line(f"{self.text} ... {detail}"), end="", file=self.stream, flush=True)

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join()
        done = f"{self.text} ... done in {time.perf_counter() - self.started:.1f} s"
        print("\r" + self._line(done) if self._thread else done, file=self.stream, flush=True)
