"""Shared plotly settings: the toolbar only on hover and titles in a margin of their own, so the toolbar never
covers a title; figures built the same way whether they are live FigureWidgets or static Figures."""

from __future__ import annotations

from typing import Any

from workbench.errors import require

#: The plotly toolbar appears on hover only (it used to sit on top of titles), without the plotly logo.
PLOT_CONFIG = {"displayModeBar": "hover", "displaylogo": False, "responsive": True}
#: Left-aligned titles in a top margin tall enough that the (right-aligned) toolbar sits beside them.
TOP_MARGIN = 64


def go() -> Any:
    return require("plotly.graph_objects", "lab", "notebook figures", package="plotly")


def new_figure(widget: bool = False) -> Any:
    """An empty Figure, or a FigureWidget carrying PLOT_CONFIG (a static Figure gets it when written out)."""
    graph = go()
    if not widget:
        return graph.Figure()
    fig = graph.FigureWidget()
    fig._config = dict(PLOT_CONFIG)
    return fig


def titled(fig: Any, title: str, height: int = 380, **layout: Any) -> Any:
    """Title top-left in its own margin; other layout keys pass through."""
    margin = {"l": 70, "r": 20, "t": TOP_MARGIN, "b": 50, **layout.pop("margin", {})}
    fig.update_layout(title={"text": title, "x": 0.01, "xanchor": "left", "y": 0.98, "yanchor": "top",
                             "font": {"size": 14}},
                      height=height, margin=margin, template="plotly_white", **layout)
    return fig
