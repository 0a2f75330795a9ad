"""Notebook widgets for Kernel Workbench (ipywidgets 8 + plotly): thin views over `workbench` and `roofline`.

    from widgets import Workbench
    Workbench("softmax")          # editor, results, variants, roofline, sweep and prompt tabs for one task

    %load_ext widgets             # then a cell starting `%%kwb softmax` is evaluated as a kernel

Each widget also renders statically (`to_html()`), so papermill runs and HTML exports stay readable.
Names load on first use: `import widgets` needs neither ipywidgets nor plotly until a widget is made.
"""

from __future__ import annotations

import importlib
from typing import Any

#: public name -> module that defines it
_EXPORTS = {
    "KernelEditor": "widgets.editor",
    "ResultsTable": "widgets.results_table",
    "VariantComparison": "widgets.variants",
    "RooflineView": "widgets.roofline_view",
    "SweepExplorer": "widgets.sweep",
    "Workbench": "widgets.workbench_widget",
    "PromptPanel": "widgets.prompt_panel",
    "CodeEditor": "widgets.code_editor",
    # Tick values and full-number labels for a plotly log axis (study notebooks draw their own figures).
    "log_ticks": "widgets._plot",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'widgets' has no attribute {name!r}; widgets: {', '.join(_EXPORTS)}")
    try:
        return getattr(importlib.import_module(module), name)
    except ModuleNotFoundError as exc:
        if exc.name == module:  # an optional part of the package is not there (e.g. the prompt panel)
            raise AttributeError(f"widgets.{name} is not available: {module} is missing") from exc
        raise


def load_ipython_extension(ipython: Any) -> None:
    """`%load_ext widgets` registers the `%%kwb` cell magic (see `widgets.magic`)."""
    from widgets.magic import load_ipython_extension as load

    load(ipython)


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
