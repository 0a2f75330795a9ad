"""RooflineView: one device's roofline with a point per result timed on it, updated in place as results arrive.

The figure comes from `roofline.plot` (labelled roofs, ridge points, units that fit the device). This view
picks the roofs (a GPU the results ran on, this machine's GPU, or the measured CPU), draws only the results
timed on that hardware, and lists every other result beside the plot with the reason: Triton-interpreter
times are not hardware, and a point under another device's roofs would say nothing. Points arrive inside
`batch_update`, so a study streaming hundreds of results redraws once per batch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from widgets._html import esc
from widgets._records import Record, to_records
from widgets.static import StaticMixin
from workbench.errors import require
from workbench.result import Result

w = require("ipywidgets", "lab", "the roofline view")
require("plotly.graph_objects", "lab", "the roofline view", package="plotly")

#: Compute roofs always drawn; the dtypes the drawn results use are added.
BASE_DTYPES = ("fp32", "fp16")


def point_dict(record: Record) -> dict[str, Any]:
    """The keys `roofline.plot` reads from a store row, from a Record."""
    return {"candidate_name": record.name, "task": record.task, "size": record.size, "status": record.status,
            "flags": list(record.flags), "time_median_ms": record.time_ms, "flops": record.flops,
            "bytes": record.bytes, "sol_fraction": record.sol_fraction, "bound": record.bound,
            "device": record.device, "device_name": record.device_name, "clock": record.clock, "dtype": record.dtype}


def roofline_point(record: Record) -> dict[str, Any]:
    """Arithmetic intensity (FLOP/byte), achieved FLOP/s and bytes/s of one timed result, with its details."""
    seconds = record.time_ms * 1e-3  # type: ignore[operator]
    return {**point_dict(record), "intensity": record.flops / record.bytes,  # type: ignore[operator]
            "flops_per_s": record.flops / seconds, "bytes_per_s": record.bytes / seconds}  # type: ignore[operator]


@dataclass
class RoofChoice:
    """One set of roofs the view can draw; `load()` returns (spec, ceilings), measuring only when chosen."""

    label: str
    key: str
    load: Callable[[], tuple[Any, Any]]


def _gpu_names(records: list[Record]) -> list[str]:
    """GPU device names the results ran on, most recent last."""
    names = [r.device_name or r.device for r in records if r.device.startswith("cuda") and r.clock != "interpreter"]
    return list(dict.fromkeys(reversed(names)))[::-1]


def roof_choices(records: list[Record], device: str | None, ceilings: Any = None) -> list[RoofChoice]:
    """Roofs worth offering, default first: each GPU the results ran on (most recent first; datasheet, and
    measured where this machine has that GPU or `ceilings` were given for it), this machine's GPU, and the
    CPU (measured, or the given CPU ceilings). Given ceilings of a GPU not in the datasheet table are a
    choice of their own."""
    from roofline.specs import match_device_name

    local = _local_gpu()
    given_kind = _ceilings_kind(ceilings)
    given_entry = match_device_name(ceilings.device_name) if given_kind == "gpu" else None
    names = list(reversed(_gpu_names(records)))
    if given_kind == "gpu" and ceilings.device_name not in names and not any(
            given_entry is not None and match_device_name(n) is given_entry for n in names):
        names.insert(0, ceilings.device_name)
    choices: list[RoofChoice] = []
    for name in names:
        entry = match_device_name(name)
        mine = given_kind == "gpu" and (name == ceilings.device_name or entry is not None and entry is given_entry)
        measured = mine or (local is not None and local == name)
        if entry is None and not measured:
            continue
        label = f"{name}: " + " + ".join(p for p in ("datasheet" if entry else "", "measured" if measured else "") if p)

        def load(entry: Any = entry, mine: bool = mine, measured: bool = measured) -> tuple[Any, Any]:
            if mine:
                return entry, ceilings
            from roofline.ceilings import get_ceilings

            return entry, get_ceilings("cuda") if measured else None

        choices.append(RoofChoice(label, f"gpu:{name}", load))
    if local is not None and not any(c.key == f"gpu:{local}" for c in choices):
        choices.append(RoofChoice(f"{local} (this machine)", f"gpu:{local}", _load_local_gpu))
    if given_kind == "cpu":
        choices.append(RoofChoice(f"{ceilings.device_name} (measured)", "cpu", lambda: (None, ceilings)))
    elif given_kind is None and ceilings is not None:
        choices.insert(0, RoofChoice(f"{ceilings.device_name} (given ceilings)", "given", lambda: (None, ceilings)))
    else:
        choices.append(RoofChoice("CPU (measured)", "cpu", _load_cpu))
    if device and device.startswith("cuda") and local is not None and not _gpu_names(records):
        choices.sort(key=lambda c: c.key != f"gpu:{local}")  # this machine's GPU first when asked for cuda
    projections = projection_choices()
    # No GPU measured anything and none is here: a projection on a datasheet GPU is the roofline worth showing.
    measured_gpu = any(c.key.startswith("gpu:") or c.key == "given" for c in choices)
    return (choices + projections) if measured_gpu else (projections[:1] + choices + projections[1:])


#: Key prefix of the roofs that place counted work on a datasheet GPU (no measured time).
PROJECTION = "projection:"


def projection_choices() -> list[RoofChoice]:
    """One choice per GPU of the datasheet table, the default projection GPU first."""
    from roofline.projection import DEFAULT_GPU
    from roofline.specs import get_spec, specs

    names = [DEFAULT_GPU, *[n for n in specs() if n != DEFAULT_GPU]]
    return [RoofChoice(f"{name}: datasheet, projection of counted work", f"{PROJECTION}{name}",
                       lambda name=name: (get_spec(name), None)) for name in names]


def projection_note(gpu: str) -> str:
    return ('<p class="kwb-roofline-projection-note" style="color:#555;margin:2px 0;max-width:60em">'
            f"<b>Projection, not a measurement.</b> Each point is a task at the size it ran, placed at its counted "
            f"arithmetic intensity (FLOPs / minimal bytes) on the {esc(gpu)} datasheet roofline: its height is the "
            "most a kernel doing that work could reach there, its legend entry says whether that work is memory- "
            "or compute-bound and the least time it could take. Every candidate of a task at one size does the "
            "same counted work, so they share one point (hover lists them).</p>")


def _ceilings_kind(ceilings: Any) -> str | None:
    if ceilings is None:
        return None
    from roofline.plot import Roofs

    return Roofs(ceilings).kind


def _local_gpu() -> str | None:
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None


def _load_local_gpu() -> tuple[Any, Any]:
    from roofline.ceilings import get_ceilings
    from roofline.specs import detect

    spec = detect("cuda")
    return (None if spec.measured else spec), get_ceilings("cuda")


def _load_cpu() -> tuple[Any, Any]:
    from roofline.ceilings import get_ceilings

    return None, get_ceilings("cpu")


def left_out_html(left: list[dict[str, Any]]) -> str:
    """The results not drawn on these roofs, each with why (interpreter time, other device, not timed)."""
    if not left:
        return ""
    rows = "".join(f'<tr class="kwb-roofline-skipped"><td title="{esc(r["task"])}" style="padding-right:1em;'
                   f'white-space:nowrap">{esc(r["name"])}</td><td style="color:#666">{esc(r["device"])}</td>'
                   f'<td style="color:#666;padding-left:1em">{esc(r["reason"])}</td></tr>' for r in left[-40:])
    more = f"<p style='color:#666'>… and {len(left) - 40} earlier</p>" if len(left) > 40 else ""
    return (f'<div class="kwb-roofline-left" style="font-size:90%"><b>Not on this roofline ({len(left)})</b>'
            f'<table style="border-collapse:collapse;margin-top:4px">{rows}</table>{more}</div>')


class RooflineView(StaticMixin, w.VBox):
    """Roofs of one device with one point per result timed on it; `add(result)` updates it in place."""

    _static_title = "Kernel Workbench: roofline"

    def __init__(self, results: Any = None, *, device: str | None = None, ceilings: Any = None, **kwargs: Any):
        self.device, self.ceilings = device, ceilings
        self.records: list[Record] = to_records(results if results is not None else [])
        self.points: list[dict[str, Any]] = []
        self._quiet = True
        self.skipped: list[dict[str, Any]] = []
        self.note = ""
        self._choices: list[RoofChoice] = []
        self._picker = w.Dropdown(description="roofs", layout=w.Layout(width="460px"))
        self._picker.add_class("kwb-roofline-picker")
        self._side = w.HTML(layout=w.Layout(overflow="auto", max_height="14em"))
        self._note = w.HTML()
        from widgets._plot import live_figure

        self.figure = live_figure()
        self._box = w.Box([self.figure.view], layout=w.Layout(width="100%"))
        super().__init__(**kwargs)
        self.add_class("kwb-roofline")
        # The list of results left out sits under the plot: beside it, it would squeeze the figure, which
        # plotly sizes once, when the (possibly hidden) tab is first drawn.
        self.children = [self._picker, self._box, self._side, self._note]
        self._refresh_choices()
        self._picker.observe(lambda _: None if self._quiet else self._draw(), "value")
        self._draw()

    # ---- public --------------------------------------------------------------------------------------
    def add(self, result: Result | Record) -> None:
        self.add_many([result])

    def reset(self, results: Any = None, device: str | None = None) -> None:
        """Start over (another task or device)."""
        self.device = device or self.device
        self.records = to_records(results if results is not None else [])
        self.points = []
        self._refresh_choices()
        self._draw()

    def add_many(self, results: Any) -> None:
        """Add results: drawn if they ran on the current roofs (one redraw per batch), else listed beside."""
        from roofline.plot import add_points, split_points

        fresh = to_records(results)
        self.records.extend(fresh)
        if self._refresh_choices() or self.projecting:
            self._draw()
            return
        to_add = []
        for record in fresh:
            drawn, left = split_points([point_dict(record)], self._roofs)
            self.points.extend(drawn)
            self.skipped.extend(left)
            to_add += [point_dict(record)] if drawn else []
        if to_add:
            with self.figure.batch_update():
                add_points(self.figure, to_add)
        self._side.value = left_out_html(self.skipped)

    # ---- internals -----------------------------------------------------------------------------------
    def _refresh_choices(self) -> bool:
        """Re-list the roofs on offer; True when the chosen roofs changed (the caller redraws)."""
        self._choices = roof_choices(self.records, self.device, self.ceilings)
        options = [(c.label, c.key) for c in self._choices]
        before = self._picker.value
        keep = before if before in [k for _, k in options] else None
        if keep is None or (not self.points and self._choices[0].key != before and self._better_default()):
            keep = options[0][1]
        self._quiet = True
        try:
            self._picker.options = options
            self._picker.value = keep
        finally:
            self._quiet = False
        return keep != before

    def _better_default(self) -> bool:
        """Move to the first choice when the current roofs draw nothing and a GPU result has arrived."""
        return self._choices[0].key.startswith("gpu:") or self._choices[0].key == "given"

    def _choice(self) -> RoofChoice:
        return next(c for c in self._choices if c.key == self._picker.value)

    @property
    def projecting(self) -> bool:
        """True while the chosen roofs are a datasheet projection (counted work, no measured times)."""
        return str(self._picker.value or "").startswith(PROJECTION)

    def _draw_projection(self, choice: RoofChoice) -> None:
        from roofline.plot import projection_figure

        gpu = choice.key.removeprefix(PROJECTION)
        self._spec, self._ceilings, self._roofs = None, None, []
        with self.figure.batch_update():
            _, left = projection_figure([point_dict(r) for r in self.records], gpu, figure=self.figure)
        self.points, self.skipped = [], left
        self.note = ""
        self._side.value = left_out_html(self.skipped)
        self._note.value = projection_note(gpu)

    def _draw(self) -> None:
        from roofline.plot import Roofs, roofline_figure, split_points
        from roofline.specs import dtype_key

        choice = self._choice()
        if self.projecting:
            self._draw_projection(choice)
            return
        try:
            spec, ceilings = choice.load()
            self.note = ""
        except Exception as exc:  # noqa: BLE001 - the results are still listed without roofs
            spec = ceilings = None
            self.note = f"roofs unavailable for {choice.label} ({type(exc).__name__}: {exc})"
        self._roofs = [Roofs(s) for s in (spec, ceilings) if s is not None]
        self._spec, self._ceilings = spec, ceilings
        points = [point_dict(r) for r in self.records]
        self.points, self.skipped = split_points(points, self._roofs)
        used = [dtype_key(p["dtype"]) for p in self.points if p.get("dtype")]
        self.dtypes = tuple(dict.fromkeys([*BASE_DTYPES, *used]))
        # One live figure for the view's life, refilled (a new one per redraw would leave a widget behind each time).
        with self.figure.batch_update():
            roofline_figure(points, spec=spec, ceilings=ceilings, dtypes=self.dtypes, figure=self.figure)
        self._side.value = left_out_html(self.skipped)
        self._note.value = (f'<p class="kwb-roofline-note" style="color:#c62828;margin:2px 0">{esc(self.note)}</p>'
                            if self.note else "")

    def _static_parts(self) -> list[Any]:
        from roofline.plot import projection_figure, roofline_figure

        rows = [point_dict(r) for r in self.records]
        if self.projecting:
            fig, _ = projection_figure(rows, str(self._picker.value).removeprefix(PROJECTION))
        else:
            fig = roofline_figure(rows, spec=self._spec, ceilings=self._ceilings, dtypes=self.dtypes)
        return [fig, left_out_html(self.skipped), self._note.value]
