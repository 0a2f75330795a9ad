"""Static renderings of the widgets: readable in papermill output, HTML exports and reports, with no kernel.

A live widget saved in a notebook is only a reference to widget state that is usually not saved (and a
saved FigureWidget carries megabytes of JavaScript). So every widget also answers `to_html()`, and its
MIME bundle carries that HTML beside the widget view: JupyterLab shows the live widget, nbconvert and
other readers without widget state fall back to the HTML.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from workbench.errors import require

#: What the MIME-bundle fallback uses for plotly.js: "cdn" keeps saved notebooks small; True inlines ~4 MB.
FALLBACK_PLOTLYJS: bool | str = "cdn"


def figure_html(fig: Any, include_plotlyjs: bool | str = "cdn", div_id: str | None = None) -> str:
    """A plotly figure (Figure or FigureWidget) as an HTML fragment with its `plotly-graph-div`."""
    go = require("plotly.graph_objects", "lab", "static figure rendering", package="plotly")
    figure = fig if type(fig) is go.Figure else go.Figure(fig.to_dict())
    from widgets._plot import PLOT_CONFIG

    return figure.to_html(include_plotlyjs=include_plotlyjs, full_html=False, div_id=div_id, config=PLOT_CONFIG)


def join(parts: list[Any], include_plotlyjs: bool | str = "cdn") -> str:
    """HTML strings and plotly figures, in order; plotly.js is included once, with the first figure."""
    out, first = [], True
    for part in parts:
        if part is None:
            continue
        if isinstance(part, str):
            out.append(part)
        else:
            out.append(figure_html(part, include_plotlyjs if first else False))
            first = False
    return "\n".join(out)


def page(body: str, title: str = "Kernel Workbench") -> str:
    """A complete HTML document around a fragment (for `save_html`)."""
    return (f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{title}</title></head>'
            f'<body style="font-family:sans-serif">{body}</body></html>\n')


class StaticMixin:
    """Adds `to_html`, `save_html` and the MIME-bundle fallback; a widget implements `_static_parts()`."""

    _static_title = "Kernel Workbench"

    def _static_parts(self) -> list[Any]:  # pragma: no cover - every widget overrides
        raise NotImplementedError

    def to_html(self, include_plotlyjs: bool | str = "cdn") -> str:
        """The widget's current state as an HTML fragment (tables, badges and plotly divs)."""
        body = join(self._static_parts(), include_plotlyjs)
        return f'<div class="kwb-static">{body}</div>'

    def save_html(self, path: str | Path, include_plotlyjs: bool | str = True) -> Path:
        """A self-contained HTML file (plotly.js inlined by default, so it opens offline)."""
        path = Path(path)
        path.write_text(page(self.to_html(include_plotlyjs), self._static_title))
        return path

    def _repr_html_(self) -> str:
        return self.to_html(FALLBACK_PLOTLYJS)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        parent = getattr(super(), "_repr_mimebundle_", None)
        bundle = dict(parent(**kwargs) or {}) if parent else {}
        bundle["text/html"] = self.to_html(FALLBACK_PLOTLYJS)
        return bundle
