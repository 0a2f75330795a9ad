"""The error heatmap of a failed run: where the output is wrong, as |error| / tolerance (cells above 1 fail).

The engine sends a 2-D map max-pooled to at most 64 cells per side, from its worst failing round, with the output's
true extent and the block each cell stands for. This module puts the output's own indices back on the axes and in
the hover, says when a cell is the worst of a block, colours by the logarithm of the ratio (so an unwritten column
stands out among slightly wrong ones), and says what a map of one colour means. It is drawn only when something
failed: a passing run has nothing to point at.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from widgets._plot import new_figure, titled
from widgets.verdict import size_text
from workbench.result import Result

#: Larger error maps are max-pooled to this many cells per side so widget messages stay small.
HEATMAP_MAX_CELLS = 128
#: The engine's own pooling limit (workbench.eval.check.MAP_CELLS): an axis of up to this many cells may be
#: pooled, a shorter one is the output's real extent.
ENGINE_CELLS = 64


def _cells(error_map: Any) -> Any:
    """The cells of an engine map: the record `{"cells", "rows", "cols", "pool"}`, or a bare 2-D list (results stored
    before the map carried its shape)."""
    return error_map.get("cells") if isinstance(error_map, dict) else error_map


def pool_error_map(error_map: Any, max_cells: int = HEATMAP_MAX_CELLS) -> np.ndarray | None:
    """A 2-D |err|/tol map as an array, max-pooled to at most `max_cells` per side (a failure never shrinks
    away: pooling by max keeps every cell above 1 visible). None when there is no 2-D map."""
    cells = _cells(error_map)
    if cells is None:
        return None
    arr = np.asarray(cells, dtype=float)
    if arr.ndim != 2 or arr.size == 0:
        return None
    rows, cols = arr.shape
    fr, fc = -(-rows // max_cells), -(-cols // max_cells)
    if fr > 1 or fc > 1:
        pad = np.full((-(-rows // fr) * fr, -(-cols // fc) * fc), np.nan)
        pad[:rows, :cols] = arr
        arr = np.nanmax(pad.reshape(pad.shape[0] // fr, fr, pad.shape[1] // fc, fc), axis=(1, 3))
    return arr


def _pooled(extent: int, limit: int = ENGINE_CELLS) -> int:
    return -(-extent // -(-extent // limit))


@dataclass
class MapView:
    """A pooled map with what it covers: the output extent per axis (None when unknown) and its source."""

    z: np.ndarray
    rows: int | None
    cols: int | None
    source: str

    def axis(self, n_cells: int, extent: int | None) -> tuple[list[int], int]:
        """(first output index of each cell, cells per step): real indices when the extent is known."""
        if extent is None or extent < n_cells:
            return list(range(n_cells)), 1
        step = -(-extent // n_cells)
        return [i * step for i in range(n_cells)], step


def _explained(cells: int, size: dict[str, Any]) -> int | None:
    """The size value an axis of `cells` cells came from: equal to it, or pooled down to it by the engine."""
    values = [v for v in size.values() if isinstance(v, int) and not isinstance(v, bool) and v > 0]
    if cells in values:
        return cells
    return next((v for v in values if v > ENGINE_CELLS and _pooled(v) == cells), None)


def _extent(cells: int, size: dict[str, Any]) -> int | None:
    """The output extent of an axis: the size value that explains it, else the cell count itself when it
    cannot have been pooled (the engine pools an axis only past ENGINE_CELLS, to more than half as many)."""
    found = _explained(cells, size)
    return found if found is not None else (cells if cells <= ENGINE_CELLS // 2 else None)


def map_view(result: Result) -> MapView | None:
    """The map of a failed run with its extent and source round; None for passing runs or maps with no
    failing cell (the failure was not in the numbers)."""
    if result.status == "ok":
        return None
    raw = result.details.get("error_map")
    z = pool_error_map(raw)
    if z is None or not np.nanmax(z) > 1:
        return None
    rounds = [r for r in result.details.get("rounds") or [] if isinstance(r, dict)]
    failing = [(i + 1, r) for i, r in enumerate(rounds) if not r.get("ok", True)]
    shape = result.details.get("error_map_shape")
    chosen = result.details.get("error_map_round")
    if isinstance(chosen, int) and 0 < chosen <= len(rounds):
        failing = [(chosen, rounds[chosen - 1])]
    fits = [(n, r) for n, r in failing if isinstance(r.get("size"), dict)
            and _explained(z.shape[0], r["size"]) is not None and _explained(z.shape[1], r["size"]) is not None]
    candidates = fits or failing
    if isinstance(raw, dict) and isinstance(raw.get("rows"), int) and isinstance(raw.get("cols"), int):
        rows, cols = raw["rows"], raw["cols"]
    elif isinstance(shape, (list, tuple)) and len(shape) == 2:
        rows, cols = int(shape[0]), int(shape[1])
    elif candidates and isinstance(candidates[0][1].get("size"), dict):
        rows, cols = _extent(z.shape[0], candidates[0][1]["size"]), _extent(z.shape[1], candidates[0][1]["size"])
    else:
        rows = cols = None
    if len(candidates) == 1:
        n, r = candidates[0]
        source = f"round {n} of {len(rounds)} ({r.get('dist', '?')} inputs, {size_text(r.get('size', {}))})"
    elif candidates:
        sizes = {size_text(r.get("size", {})) for _, r in candidates}
        which = " or ".join(str(n) for n, _ in candidates)
        source = f"worst of failing rounds {which} of {len(rounds)}" + (f" ({sizes.pop()})" if len(sizes) == 1 else "")
    else:
        source = "worst failing round"
    return MapView(z, rows, cols, source)


def _title(view: MapView | None) -> str:
    return "Where the output is wrong: |error| / tolerance, above 1 fails"


#: The colour axis: log10 of |err| / tolerance from 1e-3 to 1e6 (the engine's cap, an unwritten element), so a
#: cell slightly over its allowance and one never written read differently; 1 is the edge between blue and red.
LOG_RANGE = (-3.0, 6.0)


def _log_ratio(v: float) -> float | None:
    return None if math.isnan(v) else math.log10(min(max(v, 10 ** LOG_RANGE[0]), 10 ** LOG_RANGE[1]))


def one_colour_note(z: np.ndarray) -> str:
    """What a map of one colour means: every cell over its allowance (or every cell within it, except none)."""
    finite = z[~np.isnan(z)]
    if finite.size and bool((finite > 1).all()):
        if bool((finite >= 1e5).all()):
            return "every element is wrong and most hold the poison of unwritten memory: was the output written at all?"
        return ("every element is wrong: an error that reaches the whole output (a reduction over a wrong range, a "
                "missing normalisation, a wrong stride or offset) rather than a few bad indices")
    return ""


def fill_error_heatmap(fig: Any, view: MapView | None) -> None:
    """Redraw `fig` for a map (or empty it)."""
    fig.data = []
    if view is None:
        return
    n_rows, n_cols = view.z.shape
    ys, ystep = view.axis(n_rows, view.rows)
    xs, xstep = view.axis(n_cols, view.cols)

    def span(start: int, step: int, extent: int | None) -> str:
        end = min(start + step, extent or start + step) - 1
        return f"{start}" if end <= start else f"{start}–{end}"

    ratios = view.z.tolist()
    hover = [[f"rows {span(y, ystep, view.rows)}, cols {span(x, xstep, view.cols)}" for x in xs] for y in ys]
    custom = [[[hover[i][j], ratios[i][j]] for j in range(n_cols)] for i in range(n_rows)]
    z = [[_log_ratio(v) for v in row] for row in ratios]
    low, high = LOG_RANGE
    edge = -low / (high - low)  # where the ratio is 1
    ticks = list(range(int(low), int(high) + 1, 3))
    fig.add_heatmap(x=xs, y=ys, z=z, customdata=custom, zmin=low, zmax=high, name="|err|/tol",
                    colorscale=[[0, "#f7fbff"], [edge, "#9ecae1"], [edge, "#fcae91"], [1, "#67000d"]],
                    colorbar={"title": {"text": "|err| / tol"}, "len": 0.9, "tickvals": ticks,
                              "ticktext": [f"1e{t}" if t else "1" for t in ticks]},
                    hovertemplate="%{customdata[0]}: %{customdata[1]:.3g} x tolerance<extra></extra>")
    notes = []
    if ystep > 1 or xstep > 1:
        notes.append(f"each cell is the worst of a block of {ystep} row{'s' * (ystep > 1)} x {xstep} "
                     f"column{'s' * (xstep > 1)}")
    notes.append(one_colour_note(view.z))
    titled(fig, _title(view), height=360, margin={"t": 80},
           xaxis={"title": {"text": "column (output index)"}},
           yaxis={"title": {"text": "row"}, "autorange": "reversed"})
    fig.layout.title.subtitle.text = "; ".join(n for n in [view.source, *notes] if n)


def error_heatmap(result_or_map: Any, widget: bool = False, responsive: bool = True) -> Any:
    """The heatmap figure of a failed Result (None when nothing failed in the numbers). With widget=True an
    (empty, if need be) live figure (`widgets._plot.LiveFigure`) for the editor to refill; `responsive` False for
    one that may be scrolled out of sight (a cell's card)."""
    view = map_view(result_or_map) if isinstance(result_or_map, Result) else None
    if view is None and not widget:
        return None
    fig = new_figure(widget, responsive=responsive)
    fill_error_heatmap(fig, view)
    return fig
