"""ResultsTable: a task's results (from the store, or added live) as a table sortable by verdict and speed.

Sorting is a plain function (`sort_records`): unknown values always sort last whichever the direction, so
a failed kernel without a time never tops a "fastest first" view.
"""

from __future__ import annotations

import math
from typing import Any

import traitlets as t

from widgets._html import as_text, esc, fmt, fmt_ms, plural, status_badge, table
from widgets._records import STATUS_ORDER, Record, to_records
from widgets.static import StaticMixin
from workbench.errors import require
from workbench.result import Result

w = require("ipywidgets", "lab", "the results table")

#: Sortable columns: key -> (label, default direction is descending?)
SORT_KEYS: dict[str, tuple[str, bool]] = {
    "status": ("status", False),
    "flags": ("flags", False),
    "speedup": ("speedup", True),
    "sol": ("SOL %", True),
    "time": ("time", False),
    "name": ("name", False),
    "when": ("newest", True),
}


def sort_value(record: Record, key: str) -> Any:
    """The value a column sorts by; None means unknown (sorted last)."""
    if key == "status":
        # Within one status the fastest first: "ok, fastest on top" is the view people want.
        return (STATUS_ORDER.get(record.status, 99), record.time_ms if record.time_ms is not None else math.inf)
    if key == "flags":
        return (len(record.flags), ",".join(record.flags))
    if key == "speedup":
        return record.speedup
    if key == "sol":
        return record.sol_fraction
    if key == "time":
        return record.time_ms
    if key == "name":
        return record.name
    if key == "when":
        return record.timestamp or None
    raise KeyError(f"unknown sort key {key!r}; choose one of {', '.join(SORT_KEYS)}")


def sort_records(records: list[Record], key: str, descending: bool | None = None) -> list[Record]:
    """Records sorted by `key` (see SORT_KEYS); ties keep their order; unknown values go last."""
    if descending is None:
        descending = SORT_KEYS[key][1]
    known = [r for r in records if sort_value(r, key) is not None]
    unknown = [r for r in records if sort_value(r, key) is None]
    return sorted(known, key=lambda r: sort_value(r, key), reverse=descending) + unknown


def _time_cell(r: Record) -> str:
    if r.time_ms is None:
        return "–"
    ci = ""
    if r.ci_low_ms is not None and r.ci_high_ms is not None:
        ci = f' <span style="color:#777">[{fmt_ms(r.ci_low_ms)}, {fmt_ms(r.ci_high_ms)}]</span>'
    clock = f' <span style="color:#999">{esc(r.clock)}</span>' if r.clock else ""
    return esc(fmt_ms(r.time_ms)) + ci + clock


def records_html(records: list[Record]) -> str:
    """The table, in the given order: one row per result, verdict badge and failed checks first."""
    if not records:
        return '<p class="kwb-results-empty"><i>No results yet: run a kernel.</i></p>'
    headers = ["candidate", "status", "flags", "size", "device", "time [95% CI]", "speedup", "SOL"]
    rows = [[f'<span style="white-space:nowrap">{as_text(r.name)}</span>', status_badge(r.status), as_text(", ".join(r.flags)), as_text(r.size_label),
             as_text(r.device), _time_cell(r), fmt(r.speedup, "{:.2f}x"), fmt(r.sol_fraction, "{:.0%}")]
            for r in records]
    attrs = [f'class="kwb-row" data-kwb-status="{esc(r.status)}"' for r in records]
    return table(headers, rows, "kwb-results", attrs)


class ResultsTable(StaticMixin, w.VBox):
    """The results of one task, sortable by status, flags, speedup, SOL% or time.

    With a `store`, `refresh()` re-reads `store.frame(task=...)`; without one, `add(result)` keeps rows here.
    """

    sort_by = t.Enum(list(SORT_KEYS), default_value="status", help="Column the rows are sorted by.")
    descending = t.Bool(False, help="Sort direction (unknown values always go last).")
    task = t.Unicode(None, allow_none=True, help="Only this task's rows (None: all).")

    _static_title = "Kernel Workbench: results"

    def __init__(self, store: Any = None, task: str | None = None, results: Any = None, **kwargs: Any):
        self.store = store
        self._records: list[Record] = to_records(results)
        self._sort = w.ToggleButtons(options=[(label, key) for key, (label, _) in SORT_KEYS.items()],
                                     value="status", tooltips=[f"sort by {label}" for label, _ in SORT_KEYS.values()],
                                     style={"button_width": "auto"})
        self._direction = w.ToggleButton(value=False, description="ascending", icon="arrow-up",
                                         tooltip="Toggle the sort direction", layout=w.Layout(width="120px"))
        self._count = w.HTML()
        self._html = w.HTML()
        self._html.add_class("kwb-results-html")
        self._refresh_button = w.Button(description="Refresh", icon="refresh", tooltip="Re-read the store",
                                        layout=w.Layout(width="100px"))
        super().__init__(task=task, **kwargs)
        self.add_class("kwb-results-table")
        self.children = [w.HBox([self._sort, self._direction, self._refresh_button, self._count]), self._html]
        t.link((self, "sort_by"), (self._sort, "value"))
        t.link((self, "descending"), (self._direction, "value"))
        self._sort.observe(self._on_sort_key, "value")
        self.observe(lambda _: self._render(), ["sort_by", "descending"])
        self.observe(lambda _: self.refresh(), "task")
        self._refresh_button.on_click(lambda _: self.refresh())
        self.refresh()

    @property
    def records(self) -> list[Record]:
        """The rows in display order."""
        return sort_records(self._shown(), self.sort_by, self.descending)

    def add(self, result: Result | Record) -> None:
        self._records.extend(to_records([result]))
        self._render()

    def refresh(self) -> None:
        if self.store is not None:
            frame = self.store.frame(task=self.task) if self.task else self.store.frame()
            self._records = to_records(frame)
        self._render()

    def _shown(self) -> list[Record]:
        return [r for r in self._records if not self.task or r.task == self.task]

    def _on_sort_key(self, change: Any) -> None:
        # Each column starts in its natural direction: fastest/largest speedup first, passing first.
        self.descending = SORT_KEYS[change["new"]][1]

    def _render(self) -> None:
        self._direction.description = "descending" if self.descending else "ascending"
        self._direction.icon = "arrow-down" if self.descending else "arrow-up"
        shown = self.records
        ok = sum(r.status == "ok" for r in shown)
        self._count.value = f'<span class="kwb-results-count" style="color:#666">{plural(len(shown), "result")}, {ok} ok</span>'
        self._html.value = records_html(shown)

    def _static_parts(self) -> list[Any]:
        return [records_html(self.records)]
