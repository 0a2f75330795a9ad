"""Workbench: one task, one results store, every view in tabs (editor, results, variants, roofline, sweep,
prompt).

Every result any tab produces goes through `record()`: into the store, then into each view. That one path
is why the table, the variant plot and the roofline always agree. (The prompt tab's agent writes its own
rows, with lineage, into the same store; `record` then only shows them.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from widgets.editor import KernelEditor, resolve_task
from widgets.results_table import ResultsTable
from widgets.roofline_view import RooflineView
from widgets.static import StaticMixin
from widgets.sweep import SweepExplorer
from widgets.variants import VariantComparison
from workbench.errors import require
from workbench.result import Result
from workbench.tasks.task import Task

w = require("ipywidgets", "lab", "the Workbench widget")

TAB_TITLES = ("Editor", "Results", "Variants", "Roofline", "Sweep", "Prompt")


def prompt_panel(task: Task, store: Any) -> Any:
    """The Prompt tab, or None when the LLM part of the workbench cannot load (the other tabs still work)."""
    try:
        from widgets.prompt_panel import PromptPanel
    except ImportError:
        return None
    return PromptPanel(task, store=store)


def open_store(store: Any) -> Any:
    """A Store from a path, an existing Store, or None (results then live only in the widgets)."""
    if store is None or not isinstance(store, (str, Path)):
        return store
    from workbench.store import Store

    return Store(store)


class Workbench(StaticMixin, w.VBox):
    """Write, check, compare and profile kernels for one task.

        from widgets import Workbench
        Workbench("softmax", store="results.db")   # store: a path, a workbench.Store, or None
    """

    _static_title = "Kernel Workbench"

    def __init__(self, task: str | Task = "vector_add", store: Any = None, *, source: str | None = None,
                 device: str | None = None, size: Any = None, sweep_grid: dict[str, list[Any]] | None = None,
                 timeout: float | None = None, ceilings: Any = None, **kwargs: Any):
        self.store = open_store(store)
        task = resolve_task(task)
        self.editor = KernelEditor(task, source, device=device, size=size, timeout=timeout)
        device = self.editor.device
        self.table = ResultsTable(self.store, task=task.name)
        self.variants = VariantComparison(self._stored(task.name), task=task, candidate=self.editor.candidate,
                                          device=device, source_lookup=self._source_lookup())
        self.roofline = RooflineView(self._stored(task.name), device=device, ceilings=ceilings)
        self.sweep = SweepExplorer(task, template=self.editor.source, grid=sweep_grid, device=device, size=size,
                                   template_source=lambda: self.editor.source)
        self.prompt = prompt_panel(task, self.store)
        views = [self.editor, self.table, self.variants, self.roofline, self.sweep, self.prompt]
        self.titles = [title for title, view in zip(TAB_TITLES, views, strict=True) if view is not None]
        self.tabs = w.Tab(children=[view for view in views if view is not None], titles=self.titles)
        self.tabs.add_class("kwb-tabs")
        super().__init__(children=[self.tabs], **kwargs)
        self.add_class("kwb-workbench")
        for view in (self.editor, self.variants, self.sweep):
            view.on_result(self.record)
        if self.prompt is not None:  # the agent stores its own results (with lineage): only show them
            self.prompt.on_result(lambda result: self.record(result, store=False))
        self.editor.observe(self._on_task, "task_name")
        self.editor.observe(self._on_device, "device")
        self.editor.observe(lambda _: self.sweep.refresh_knobs(), "source")

    @property
    def task(self) -> Task:
        return self.editor.task

    def record(self, result: Result, store: bool = True) -> None:
        """Store a result and show it in every view (results from elsewhere can be fed here too);
        store=False for a result already in the store."""
        if self.store is not None:
            if store:
                self.store.add(result)
            self.table.refresh()
        else:
            self.table.add(result)
        if result.task == self.task.name:
            self.variants.add(result)
            self.roofline.add(result)

    def run(self, block: bool = True) -> Result | None:
        """Run the editor's kernel (block=True for scripts and papermill)."""
        return self.editor.run(block=block)

    def _stored(self, task: str) -> Any:
        if self.store is None:
            return None
        return self.store.frame(task=task)

    def _source_lookup(self) -> Any:
        if self.store is None:
            return None
        return self.store.source

    def _on_task(self, change: Any) -> None:
        task = self.editor.task
        self.table.task = task.name
        self.variants.task = task
        self.variants.set_results(self._stored(task.name))
        self.sweep.task = task
        self.sweep.refresh_knobs()
        self.roofline.reset(self._stored(task.name))
        if self.prompt is not None:
            self.prompt.set_task(task)

    def _on_device(self, change: Any) -> None:
        self.variants.device = self.sweep.device = self.editor.device

    def _static_parts(self) -> list[Any]:
        parts: list[Any] = []
        for title, view in zip(self.titles, self.tabs.children, strict=True):
            parts.append(f'<h3 class="kwb-static-tab">{title}</h3>')
            parts.extend(view._static_parts())
        return parts
