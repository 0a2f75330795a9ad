"""RooflineView: the device's roofline with a point per result, updated in place as results arrive.

The figure itself comes from `roofline.plot` (ceilings per dtype, hover text); this view only decides which
results are points and pushes them into one FigureWidget inside `batch_update`, so a study streaming
hundreds of results redraws once per batch rather than once per point. Interpreter times are not
hardware times, so such results are listed as skipped instead of plotted.
"""

from __future__ import annotations

from typing import Any

from widgets._html import esc
from widgets._records import Record, to_records
from widgets.static import StaticMixin
from workbench.errors import require
from workbench.result import Result

w = require("ipywidgets", "lab", "the roofline view")
go = require("plotly.graph_objects", "lab", "the roofline view", package="plotly")


def plottable(record: Record) -> bool:
    """A point needs a hardware time and its work: FLOPs and bytes counted, time not from the interpreter."""
    return (record.time_ms is not None and record.clock != "interpreter" and bool(record.flops)
            and bool(record.bytes))


def roofline_point(record: Record) -> dict[str, Any]:
    """Arithmetic intensity (FLOP/byte) and achieved FLOP/s of one result, with its hover details. The keys
    are those `roofline.plot` reads from a store row, so the same dict feeds both."""
    seconds = record.time_ms * 1e-3  # type: ignore[operator]
    return {
        "candidate_name": record.name, "task": record.task, "size": record.size, "status": record.status,
        "flags": list(record.flags), "time_median_ms": record.time_ms, "flops": record.flops, "bytes": record.bytes,
        "intensity": record.flops / record.bytes,  # type: ignore[operator]
        "flops_per_s": record.flops / seconds,  # type: ignore[operator]
        "bytes_per_s": record.bytes / seconds,  # type: ignore[operator]
        "sol_fraction": record.sol_fraction, "bound": record.bound,
    }


def _plot_module() -> Any:
    try:
        from roofline import plot
    except ImportError:
        return None
    return plot if hasattr(plot, "roofline_figure") else None


def base_figure(device: str | None = None, ceilings: Any = None, widget: bool = False) -> tuple[Any, str]:
    """(figure with the device's roofs and no points, note). Measured ceilings are drawn solid and, on a GPU
    in the spec table, the datasheet roofs dashed beside them. Falls back to bare axes without `roofline`."""
    plot = _plot_module()
    device = device or "cpu"
    if plot is not None:
        try:
            spec = None
            if ceilings is None:
                from roofline.ceilings import get_ceilings

                ceilings = get_ceilings(device)
            if device.startswith("cuda"):
                from roofline.specs import detect

                try:
                    spec = detect(device)
                except Exception:  # noqa: BLE001 - no datasheet roofs, the measured ones still show
                    spec = None
            fig = plot.roofline_figure([], spec=spec, ceilings=ceilings, as_widget=widget)
            fig.update_layout(height=420, margin={"l": 60, "r": 10, "t": 40, "b": 40})
            return fig, ""
        except Exception as exc:  # noqa: BLE001 - the view still shows points without ceilings
            note = f"ceilings unavailable ({type(exc).__name__}: {exc})"
    else:
        note = "the roofline package is not available: points without ceilings"
    fig = (go.FigureWidget if widget else go.Figure)()
    fig.update_layout(title="Roofline", height=420, margin={"l": 60, "r": 10, "t": 40, "b": 40},
                      xaxis={"type": "log", "title": {"text": "arithmetic intensity (FLOP/byte)"}},
                      yaxis={"type": "log", "title": {"text": "FLOP/s"}})
    return fig, note


def add_points(fig: Any, points: list[dict[str, Any]]) -> None:
    """Points onto a roofline figure: through `roofline.plot.add_points` when present, else one scatter."""
    if not points:
        return
    plot = _plot_module()
    if plot is not None and hasattr(plot, "add_points"):
        plot.add_points(fig, points)
        return
    fig.add_scatter(
        x=[p["intensity"] for p in points], y=[p["flops_per_s"] for p in points], mode="markers",
        name="results", marker={"size": 10},
        text=[f"{p['candidate_name']} {p['size']}: {p['time_median_ms']:.4g} ms" for p in points],
        hovertemplate="%{text}<br>%{x:.3g} FLOP/B, %{y:.3g} FLOP/s<extra></extra>",
    )


class RooflineView(StaticMixin, w.VBox):
    """The roofline of `device` with one point per timed result; `add(result)` updates it in place."""

    _static_title = "Kernel Workbench: roofline"

    def __init__(self, results: Any = None, *, device: str | None = None, ceilings: Any = None, **kwargs: Any):
        self.device, self.ceilings = device, ceilings
        self.points: list[dict[str, Any]] = []
        self.skipped: list[Record] = []
        self.figure, self.note = base_figure(device, ceilings, widget=True)
        self._note = w.HTML()
        super().__init__(**kwargs)
        self.add_class("kwb-roofline")
        self.children = [self.figure, self._note]
        self.add_many(results if results is not None else [])

    def add(self, result: Result | Record) -> None:
        self.add_many([result])

    def reset(self, results: Any = None, device: str | None = None) -> None:
        """Start over (another task or device): a fresh figure, then `results` as points."""
        self.device = device or self.device
        self.points, self.skipped = [], []
        self.figure, self.note = base_figure(self.device, self.ceilings, widget=True)
        self.children = [self.figure, self._note]
        self.add_many(results if results is not None else [])

    def add_many(self, results: Any) -> None:
        """Add results; the figure redraws once for the whole batch."""
        fresh = []
        for record in to_records(results):
            if plottable(record):
                fresh.append(roofline_point(record))
            else:
                self.skipped.append(record)
        self.points.extend(fresh)
        if fresh:
            with self.figure.batch_update():
                add_points(self.figure, fresh)
        self._note.value = self._note_html()

    def _note_html(self) -> str:
        parts = [esc(self.note)] if self.note else []
        interp = sum(r.clock == "interpreter" for r in self.skipped)
        if interp:
            parts.append(f"{interp} result(s) timed by the Triton interpreter are not plotted: the interpreter is not "
                         "hardware (run on a GPU for a roofline)")
        other = len(self.skipped) - interp
        if other:
            parts.append(f"{other} result(s) without a time or without counted work are not plotted")
        return "".join(f'<p class="kwb-roofline-note" style="color:#666;margin:2px 0">{p}</p>' for p in parts)

    def _static_parts(self) -> list[Any]:
        fig, _ = base_figure(self.device, self.ceilings)
        add_points(fig, self.points)
        return [fig, self._note_html()]
