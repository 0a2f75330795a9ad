"""Shared plotly settings (the toolbar only on hover, titles in a margin of their own, so the toolbar never covers
a title) and the live figure every view draws into.

A live figure is a plain plotly Figure shown through plotly's own mime type in an ipywidgets Output
(`LiveFigure`), not a plotly FigureWidget: a FigureWidget is an anywidget model that carries all of plotly.js
(~5 MB) in its state, once per figure. A Workbench has five figures; reopening a notebook then loads 25 MB of
modules per Workbench, and anywidget gives each model two seconds to initialize, after which it drops the
model's messages ("[anywidget] Failed to initialize model"): the editor's code area came back empty. JupyterLab
draws the mime type with the plotly.js of its own extension, loaded once and offline.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from workbench.errors import require

#: The plotly toolbar appears on hover only (it used to sit on top of titles), without the plotly logo.
PLOT_CONFIG = {"displayModeBar": "hover", "displaylogo": False, "responsive": True}
#: Left-aligned titles in a top margin tall enough that the (right-aligned) toolbar sits beside them.
TOP_MARGIN = 64


def go() -> Any:
    return require("plotly.graph_objects", "lab", "notebook figures", package="plotly")


#: The mime type JupyterLab's plotly extension renders (offline: plotly.js ships with the extension).
PLOTLY_MIME = "application/vnd.plotly.v1+json"


def _live_class() -> type:
    """LiveFigure is built on first use so that importing this module never imports plotly or ipywidgets."""
    global _LIVE
    if _LIVE is None:
        _LIVE = _make_live_class()
    return _LIVE


_LIVE: type | None = None


def _make_live_class() -> type:
    graph = go()
    w = require("ipywidgets", "lab", "live figures")

    class LiveFigure(graph.Figure):
        """A plotly Figure that redraws its `view` (an ipywidgets Output) after every change.

        plotly calls a `_send_*` hook after each change of a figure (FigureWidget sends messages from them);
        here each one redraws the view, at most once per `batch_update()` block. Everything else is a plain
        Figure: `data`, `layout`, `update_layout`, `add_traces`, `to_html`."""

        def __init__(self, *args: Any, responsive: bool = True, **kwargs: Any):
            self._hold, self._dirty, self._view = 0, False, None
            #: plotly's config for this figure; not `responsive` for a figure that may sit in a hidden output (a
            #: scrolled-away cell's card), where a window resize would ask plotly to resize a plot it cannot see.
            self._config = {**PLOT_CONFIG, "responsive": responsive}
            super().__init__(*args, **kwargs)
            self._view = w.Output(layout=w.Layout(width="100%"))
            self._view.add_class("kwb-figure")
            self.redraw()

        @property
        def view(self) -> Any:
            """The widget to place in a layout (it shows the figure through plotly's mime type)."""
            return self._view

        @contextmanager
        def batch_update(self) -> Iterator[None]:
            """Changes inside the block redraw the view once, at its end."""
            self._hold += 1
            try:
                yield
            finally:
                self._hold -= 1
                if not self._hold and self._dirty:
                    self.redraw()

        def redraw(self) -> None:
            if self._view is None:
                return
            self._dirty = False
            self._view.outputs = (plotly_output(self, self._config),)

        def _changed(self, *args: Any, **kwargs: Any) -> None:
            if getattr(self, "_hold", 1):
                self._dirty = True
                return
            self.redraw()

        _send_addTraces_msg = _send_moveTraces_msg = _send_deleteTraces_msg = _changed
        _send_restyle_msg = _send_relayout_msg = _send_update_msg = _send_animate_msg = _changed

    return LiveFigure


def plotly_output(fig: Any, config: dict[str, Any] | None = None) -> dict[str, Any]:
    """`fig` as one display_data output an ipywidgets Output shows through plotly's mime type (`config`: plotly's,
    default PLOT_CONFIG)."""
    spec = {**json.loads(fig.to_json()), "config": dict(config or PLOT_CONFIG)}
    return {"output_type": "display_data", "metadata": {}, "data": {PLOTLY_MIME: spec, "text/plain": "<plotly figure>"}}


def live_figure(*args: Any, **kwargs: Any) -> Any:
    """A new LiveFigure (see the module docstring); its `.view` is the widget to show."""
    return _live_class()(*args, **kwargs)


def is_live(fig: Any) -> bool:
    return _LIVE is not None and isinstance(fig, _LIVE)


def new_figure(widget: bool = False, responsive: bool = True) -> Any:
    """An empty Figure, or (widget=True) an empty LiveFigure for a view to refill (`responsive`: it follows the
    window's size)."""
    return live_figure(responsive=responsive) if widget else go().Figure()


def titled(fig: Any, title: str, height: int = 380, **layout: Any) -> Any:
    """Title top-left in its own margin; other layout keys pass through."""
    margin = {"l": 70, "r": 20, "t": TOP_MARGIN, "b": 50, **layout.pop("margin", {})}
    fig.update_layout(title={"text": title, "x": 0.01, "xanchor": "left", "y": 0.98, "yanchor": "top",
                             "font": {"size": 14}},
                      height=height, margin=margin, template="plotly_white", **layout)
    return fig


def _tick_text(value: float) -> str:
    """A tick label written out in full: 300 -> "300", 0.05 -> "0.05", 1e-05 -> "1e-5"."""
    text = f"{value:.6g}"
    if "e" in text:
        mantissa, exponent = text.split("e")
        text = f"{mantissa}e{int(exponent)}"
    return text


def log_ticks(values: Iterable[Any]) -> dict[str, Any]:
    """tickvals and ticktext for a log axis over `values`, every label a full number.

    Left to itself plotly labels a log axis spanning one to three decades at its minor ticks with their leading
    digit alone, so 300 ms reads "3". Here: powers of ten where the values span 2.5 decades or more, 1-2-5 steps
    where they span less (so at least two labels fall among the values), evenly spaced values where they span under ~0.7 of a decade (as plotly would draw
    them, labelled in full). Ticks reach a little past the values so the axis padding gets its labels too.
    Empty ({}: plotly's own ticks) when no value is positive."""
    xs = []
    for value in values:
        try:
            x = float(value)
        except (TypeError, ValueError):  # None, a missing value
            continue
        if math.isfinite(x) and x > 0:
            xs.append(x)
    if not xs:
        return {}
    lo, hi = min(xs), max(xs)
    span = math.log10(hi / lo)
    if span < 0.7:
        step = _nice_step((hi - lo) / 4 if hi > lo else lo / 4)
        first, last = math.floor(lo / step) - 1, math.ceil(hi / step) + 1
        vals = [round(k * step, 12) for k in range(max(first, 1), last + 1)]
    else:
        mantissas = (1,) if span >= 2.5 else (1, 2, 5)
        vals = [m * 10.0 ** k for k in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1)
                for m in mantissas]
        vals = [v for v in vals if lo / 2 <= v <= hi * 2]
    return {"tickmode": "array", "tickvals": vals, "ticktext": [_tick_text(v) for v in vals]}


def _nice_step(rough: float) -> float:
    """The 1-2-5 x 10^k step nearest above `rough`."""
    base = 10.0 ** math.floor(math.log10(rough))
    return next(m * base for m in (1, 2, 5, 10) if m * base >= rough)
