"""PromptPanel: ask an LLM for a kernel and watch candidates, verdicts and the lineage tree arrive.

The widget is a thin view: the run is `workbench.llm.agent.run_agent`, and everything it shows comes from the
plain functions below (`candidate_rows`, `candidates_html`, `lineage_figure`, `tree_positions`), which
tests call without a browser. `PromptPanel.to_html()` is the static rendering for headless runs. In the
`Workbench` it is the Prompt tab, and every candidate it evaluates lands in the other tabs too.

Each candidate row opens (a plain HTML <details>, so it works in exported HTML too) the candidate's source and
its unified diff against its parent: what the model changed after reading the feedback.
"""

from __future__ import annotations

import difflib
import html
import textwrap
import threading
from collections.abc import Callable
from typing import Any

from workbench.errors import require
from workbench.llm.agent import AgentRun, AgentSettings, Lineage, Node, run_agent, strategies
from workbench.llm.base import Provider
from workbench.llm.feedback import FEEDBACK_PRESETS
from workbench.llm.prompts import generation_prompt
from workbench.llm.registry import get_provider, providers
from workbench.tasks.task import Task, get_task

w = require("ipywidgets", "lab", "the prompt panel")

#: Badge colours per status (green passes; red is a caught cheat; the rest are failures to fix).
STATUS_COLORS = {
    "ok": "#2e7d32", "incorrect": "#ef6c00", "rejected": "#c62828", "compile_error": "#6a1b9a",
    "runtime_error": "#8e24aa", "timeout": "#5d4037", "crashed": "#424242",
    # steps with nothing judged: the reply was cut at the token limit, or the LLM call failed for good
    "truncated": "#f9a825", "llm_error": "#78909c",
}


# ---- plain functions (no widgets) ---------------------------------------------------------------------

def candidate_rows(nodes: list[Node]) -> list[dict[str, Any]]:
    """One display row per node, in turn order."""
    rows = []
    for n in nodes:
        rows.append({
            "node": n.node_id, "parent": n.parent or "", "role": n.role, "status": n.status,
            "flags": ", ".join(n.flags), "time_ms": n.time_ms, "speedup": n.speedup,
            "sol": n.sol_fraction, "tokens": n.tokens_in + n.tokens_out, "cached": n.cached,
            "message": n.message,
        })
    return rows


def _fmt(value: Any, pattern: str) -> str:
    return "" if value is None else pattern.format(value)


def badge(status: str) -> str:
    color = STATUS_COLORS.get(status, "#757575")
    return (f'<span class="kwb-badge" style="background:{color};color:white;border-radius:3px;'
            f'padding:1px 6px;font-size:90%">{html.escape(status)}</span>')


def shorten(text: str, width: int = 90) -> str:
    """One line of at most `width` characters, cut at a word boundary (never mid-word), ending in "…"."""
    return textwrap.shorten(" ".join(text.split()), width=width, placeholder=" …") if text else ""


def _cell(content: str, title: str = "", max_width: str = "") -> str:
    tip = f' title="{html.escape(title)}"' if title else ""
    width = f"max-width:{max_width};overflow:hidden;text-overflow:ellipsis;" if max_width else ""
    return f'<td style="white-space:nowrap;padding:2px 8px;{width}"{tip}>{content}</td>'


def source_diff(parent: Node | None, node: Node) -> str:
    """The unified diff of `node`'s source against its parent's ("" for a first candidate)."""
    if parent is None or not parent.source:
        return ""
    return "".join(difflib.unified_diff(parent.source.splitlines(keepends=True), node.source.splitlines(keepends=True),
                                        fromfile=parent.node_id, tofile=node.node_id))


def _diff_html(diff: str) -> str:
    colors = {"+": "#e6ffed", "-": "#ffeef0", "@": "#f1f8ff"}
    lines = []
    for line in diff.splitlines():
        bg = colors.get(line[:1], "") if not line.startswith(("+++", "---")) else "#fafafa"
        style = f"background:{bg};" if bg else ""
        lines.append(f'<span style="display:block;{style}">{html.escape(line) or " "}</span>')
    return "".join(lines)


_BOX = ("font-family:monospace;font-size:12px;background:#f7f7f7;border:1px solid #e3e3e3;padding:4px;"
        "max-height:22em;overflow:auto;white-space:pre;margin:2px 0")


def node_detail_html(node: Node, parent: Node | None) -> str:
    """A candidate's source and its diff against its parent, behind a <details> summary."""
    diff = source_diff(parent, node)
    against = f"diff against {html.escape(parent.node_id)}" if parent is not None else "no parent: first candidate"
    parts = []
    if diff:
        parts.append(f'<div><b>{against}</b><pre class="kwb-candidate-diff" style="{_BOX}">{_diff_html(diff)}</pre></div>')
    elif parent is not None:
        parts.append(f"<div><b>{against}</b>: same source</div>")
    if node.message:
        parts.append(f'<div style="white-space:pre-wrap;overflow-wrap:anywhere;color:#444">{html.escape(node.message)}</div>')
    parts.append(f'<div><b>source</b><pre class="kwb-candidate-source" style="{_BOX}">{html.escape(node.source)}</pre></div>')
    summary = f"{html.escape(node.node_id)}: source and " + ("diff against " + html.escape(parent.node_id)
                                                              if parent is not None else "notes")
    return (f'<details class="kwb-candidate-detail" data-kwb-node="{html.escape(node.node_id)}">'
            f'<summary style="cursor:pointer;color:#1565c0">{summary}</summary>{"".join(parts)}</details>')


def candidates_html(nodes: list[Node], best: Node | None = None, external: dict[str, Node] | None = None) -> str:
    """The candidates table: verdict badge, failed checks, time, speedup, SOL share; best row marked. Cells
    never wrap; long notes end in "…" at a word boundary with the full text on hover. Under each row, its
    source and diff against its parent open on a click."""
    if not nodes:
        return "<p><i>No candidates yet.</i></p>"
    known = {n.node_id: n for n in (external or {}).values()} | {n.node_id: n for n in nodes}
    headers = ("node", "parent", "role", "verdict", "checks", "time", "speedup", "SOL", "tokens", "note")
    head = "".join(f'<th style="text-align:left;white-space:nowrap;padding:2px 8px">{h}</th>' for h in headers)
    body = []
    for row, node in zip(candidate_rows(nodes), nodes, strict=True):
        mark = " &#9733;" if best is not None and node is best else ""
        note = row["message"].strip().splitlines()[0] if row["message"].strip() else ""
        cells = [_cell(html.escape(row["node"]) + mark), _cell(html.escape(row["parent"])),
                 _cell(html.escape(row["role"])), _cell(badge(row["status"])),
                 _cell(html.escape(shorten(row["flags"], 40)), row["flags"], "16em"),
                 _cell(_fmt(row["time_ms"], "{:.3g} ms")), _cell(_fmt(row["speedup"], "{:.2f}x")),
                 _cell(_fmt(row["sol"], "{:.0%}")),
                 _cell(str(row["tokens"]) + (" (cached)" if row["cached"] else "")),
                 _cell(html.escape(shorten(note, 70)), row["message"], "32em")]
        body.append(f'<tr class="kwb-candidate" data-kwb-node="{html.escape(node.node_id)}">{"".join(cells)}</tr>')
        parent = known.get(node.parent) if node.parent else None
        body.append(f'<tr class="kwb-candidate-more"><td colspan="{len(headers)}" style="padding:0 8px 4px 8px">'
                    f"{node_detail_html(node, parent)}</td></tr>")
    return (f'<div style="overflow-x:auto;max-width:100%"><table class="kwb-candidates" style="border-collapse:collapse">'
            f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>")


def tree_positions(tree: Lineage) -> dict[str, tuple[float, float]]:
    """x = turn (external fork roots at -1), y = depth in the tree: a refine chain climbs, best-of-n is flat."""
    pos = {key: (-1.0, 0.0) for key in tree.external}
    for key, node in tree.nodes.items():
        pos[key] = (float(node.turn), float(tree.depth(key)))
    return pos


def lineage_figure(tree: Lineage, *, widget: bool = False):
    """Two panels: the lineage tree (nodes coloured by verdict, edges to parents) and the best-so-far curve."""
    go = require("plotly.graph_objects", "lab", "the prompt panel's figures", package="plotly")
    subplots = require("plotly.subplots", "lab", "the prompt panel's figures", package="plotly")
    fig = subplots.make_subplots(rows=1, cols=2, column_widths=[0.6, 0.4],
                                 subplot_titles=("lineage (x: turn, y: depth)", "best so far"))
    pos = tree_positions(tree)
    ex, ey = [], []
    for parent, child in tree.edges():
        if parent in pos and child in pos:
            ex += [pos[parent][0], pos[child][0], None]
            ey += [pos[parent][1], pos[child][1], None]
    fig.add_trace(go.Scatter(x=ex, y=ey, mode="lines", line={"color": "#b0bec5", "width": 1}, hoverinfo="skip",
                             name="parent", showlegend=False), row=1, col=1)
    keys = list(tree.external) + list(tree.nodes)
    nodes = [tree.external.get(k) or tree.nodes[k] for k in keys]
    best = tree.best
    fig.add_trace(go.Scatter(
        x=[pos[k][0] for k in keys], y=[pos[k][1] for k in keys], mode="markers+text", text=keys,
        textposition="top center", name="candidates", showlegend=False,
        marker={"size": [16 if n is best else 11 for n in nodes], "color": [STATUS_COLORS.get(n.status, "#757575")
                                                                               for n in nodes],
                "symbol": ["star" if n is best else "circle" for n in nodes]},
        hovertext=[n.summary() for n in nodes], hoverinfo="text"), row=1, col=1)
    curve = tree.best_so_far()
    uses_speedup = best is not None and best.speedup is not None
    fig.add_trace(go.Scatter(x=list(range(len(curve))), y=curve, mode="lines+markers", line={"shape": "hv"},
                             name="best", showlegend=False), row=1, col=2)
    # The legend names each verdict colour the tree uses, and the star: legend-only entries (no points of their own).
    for status in dict.fromkeys(n.status for n in nodes):
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=status, legendgroup="verdict",
                                 marker={"size": 11, "color": STATUS_COLORS.get(status, "#757575")}), row=1, col=1)
    if best is not None:
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name="best correct", legendgroup="verdict",
                                 marker={"size": 14, "symbol": "star", "color": STATUS_COLORS["ok"]}), row=1, col=1)
    fig.update_xaxes(title_text="turn", row=1, col=1)
    fig.update_yaxes(title_text="depth", row=1, col=1)
    fig.update_xaxes(title_text="turn", row=1, col=2)
    fig.update_yaxes(title_text="speedup" if uses_speedup else "1 / time (1/ms)", row=1, col=2)
    fig.update_layout(height=380, margin={"l": 40, "r": 10, "t": 48, "b": 80}, template="plotly_white",
                      showlegend=True, legend={"orientation": "h", "y": -0.25, "yanchor": "top"})
    if not widget:
        return fig
    from widgets._plot import live_figure

    return live_figure(fig)


def resolve_provider(name: str, model: str, given: Provider | None = None, **settings: Any) -> Provider:
    """The provider a Run click uses: the one handed to the panel if it matches; the same one asking another model
    when only the model name was typed (its base_url, key and limits kept); else one built from config."""
    if given is not None and getattr(given, "name", None) == name:
        if not model or model == given.model:
            return given
        with_model = getattr(given, "with_model", None)
        if callable(with_model):
            return with_model(model)
    return get_provider(name, model=model or None, **settings)


def usage_text(tokens: int, cost: float, failed: int) -> str:
    """Tokens, money and failed steps of a run, for the status line."""
    parts = [f"{tokens / 1000:.1f}k tokens" if tokens >= 1000 else f"{tokens} tokens"]
    if cost:
        parts.append(f"${cost:.4f}")
    if failed:
        parts.append(f"{failed} failed step{'s' if failed != 1 else ''}")
    return " &middot; ".join(parts)


# ---- the widget ---------------------------------------------------------------------------------------------

class PromptPanel(w.VBox):
    """Prompt box, provider/model picker, strategy, turn budget and Run; live candidates and lineage.

    `PromptPanel(task, provider=None, store=None)` is an ipywidgets VBox. `run(block=True)` runs in the
    caller's thread (headless use); a Run click runs in a background thread and can be stopped.
    """

    def __init__(self, task: Task | str = "vector_add", *, provider: Provider | None = None, store: Any = None,
                 strategy: str = "refine", settings: AgentSettings | None = None, feedback: str = "full"):
        super().__init__()
        self.task = get_task(task) if isinstance(task, str) else task
        self.provider = provider
        self.store = store
        self.settings = settings or AgentSettings()
        self.run_result: AgentRun | None = None
        self.nodes: list[Node] = []
        self._callbacks: list[Callable[[Any], Any]] = []
        self._cancel = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

        self.default_prompt = self._default_prompt()
        names = providers()
        self.prompt = w.Textarea(value=self.settings.initial_prompt or self.default_prompt, description="prompt",
                                 layout=w.Layout(width="100%", height="220px"))
        self.provider_picker = w.Dropdown(options=names, value=(provider.name if provider and provider.name in names
                                                                else names[0]), description="provider")
        self.model = w.Text(value=getattr(provider, "model", "") or "", description="model",
                            placeholder="model id (or from llm.toml / env)")
        self.strategy = w.Dropdown(options=strategies(), value=strategy, description="strategy")
        self.turns = w.BoundedIntText(value=self.settings.max_turns, min=1, max=500, description="turns")
        self.feedback = w.Dropdown(options=list(FEEDBACK_PRESETS), value=feedback, description="feedback")
        self.run_button = w.Button(description="Run", button_style="primary", icon="play")
        self.stop_button = w.Button(description="Stop", icon="stop", disabled=True)
        self.status = w.HTML(value=f"<b>{html.escape(self.task.name)}</b>: ready")
        self.table = w.HTML(value=candidates_html([]))
        self.figure = lineage_figure(Lineage(run_id="", nodes={}), widget=True)
        # Hidden until the first candidate arrives: empty axes ("1 / time" over nothing) say nothing.
        self.figure_box = w.Box([self.figure.view], layout=w.Layout(display="none", width="100%"))
        self.figure_box.add_class("kwb-prompt-figure")
        self.run_button.on_click(lambda _: self.start())
        self.stop_button.on_click(lambda _: self.stop())
        controls = w.HBox([self.provider_picker, self.model])
        knobs = w.HBox([self.strategy, self.turns, self.feedback])
        self.children = [self.status, self.prompt, controls, knobs, w.HBox([self.run_button, self.stop_button]),
                         self.table, self.figure_box]
        self.add_class("kwb-prompt-panel")

    def _default_prompt(self) -> str:
        return generation_prompt(self.task, self.settings.language, device=self.settings.device,
                                 size=self.settings.size).text

    def set_task(self, task: Task | str) -> None:
        """Prompt for another task; an unedited prompt box follows, an edited one is kept."""
        old = self.default_prompt
        self.task = get_task(task) if isinstance(task, str) else task
        self.default_prompt = self._default_prompt()
        if self.prompt.value.strip() == old.strip():
            self.prompt.value = self.default_prompt
        self.status.value = f"<b>{html.escape(self.task.name)}</b>: ready"

    def on_result(self, callback: Callable[[Any], Any]) -> None:
        """Call `callback(result)` with each evaluated candidate's Result, on the kernel's main thread (the
        Workbench shows them in its other tabs)."""
        self._callbacks.append(callback)

    # -- running
    def current_settings(self) -> AgentSettings:
        custom = self.prompt.value.strip()
        return self.settings.replace(
            max_turns=int(self.turns.value), feedback=self.feedback.value,
            initial_prompt=custom if custom and custom != self.default_prompt.strip() else None)

    def run(self, block: bool = True, **run_kw: Any) -> AgentRun | None:
        """Run with the panel's current choices; `block=False` runs in a background thread."""
        if not block:
            self.start(**run_kw)
            return None
        return self._run(**run_kw)

    def start(self, **run_kw: Any) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        self._thread = threading.Thread(target=self._run, kwargs=run_kw, daemon=True, name="prompt-panel")
        self._thread.start()

    def wait(self, timeout: float | None = None) -> AgentRun | None:
        if self._thread is not None:
            self._thread.join(timeout)
        return self.run_result

    def stop(self) -> None:
        """End the run within a second: the call in flight is abandoned (recorded as cancelled), nothing waits."""
        self._cancel.set()

    def _run(self, **run_kw: Any) -> AgentRun | None:
        self._cancel.clear()
        self.nodes = []
        self.run_button.disabled, self.stop_button.disabled = True, False
        self.status.value = f"<b>{html.escape(self.task.name)}</b>: running {html.escape(self.strategy.value)}..."
        try:
            provider = resolve_provider(self.provider_picker.value, self.model.value.strip(), self.provider)
            run_kw.setdefault("progress", False)
            self.run_result = run_agent(self.task, provider, self.strategy.value, self.current_settings(),
                                        store=self.store, on_node=self._on_node, cancel=self._cancel, **run_kw)
            run = self.run_result
            best = run.best
            self.status.value = (f"<b>{html.escape(self.task.name)}</b>: {len(run.nodes)} candidates, "
                                 f"stopped ({html.escape(run.stop_reason)})"
                                 + (f", best {best.node_id}" if best else ", nothing passed")
                                 + " &middot; " + usage_text(run.usage.get("run_tokens", 0),
                                                             run.usage.get("run_spent_usd", 0.0), len(run.failed))
                                 + (f" &mdash; {html.escape(run.error)}" if run.error else ""))
            self._refresh(self.run_result.nodes)
            return self.run_result
        except Exception as exc:  # shown in the panel; a widget callback has nowhere else to report
            self.status.value = f"<b>error</b>: {html.escape(str(exc))}"
            if self._thread is None or threading.current_thread() is not self._thread:
                raise
            return None
        finally:
            self.run_button.disabled, self.stop_button.disabled = False, True

    def _on_node(self, node: Node, loop: Any) -> None:
        self._refresh(list(loop.nodes), loop.seed_node)
        self.status.value = (f"<b>{html.escape(self.task.name)}</b>: running {html.escape(self.strategy.value)}, "
                             f"{len(loop.nodes)}/{loop.settings.max_turns} candidates &middot; "
                             + usage_text(loop.tokens, loop.cost, loop.failures))
        if node.result is not None and self._callbacks:
            from widgets._runner import call_on_main

            result = node.result
            call_on_main(lambda: [callback(result) for callback in self._callbacks])

    def _refresh(self, nodes: list[Node], seed: Node | None = None) -> None:
        with self._lock:
            self.nodes = nodes
            tree = Lineage.from_nodes(nodes[0].run_id if nodes else "", nodes, [seed] if seed else [])
            self.table.value = candidates_html(nodes, tree.best, tree.external)
            self.figure_box.layout.display = "flex" if nodes else "none"
            fresh = lineage_figure(tree)
            with self.figure.batch_update():  # the legend grows with the verdicts seen: traces are replaced
                self.figure.data = ()
                self.figure.add_traces([source.to_plotly_json() for source in fresh.data])
                self.figure.layout.yaxis2.title.text = fresh.layout.yaxis2.title.text

    # -- static rendering
    def _static_parts(self) -> list[Any]:
        nodes = self.run_result.nodes if self.run_result else self.nodes
        seed = self.run_result.forked_from if self.run_result else None
        tree = Lineage.from_nodes(nodes[0].run_id if nodes else "", nodes, [seed] if seed else [])
        settings = self.current_settings()
        head = (f"<h4>{html.escape(self.task.name)}: {html.escape(self.strategy.value)} with "
                f"{html.escape(self.provider_picker.value)} {html.escape(self.model.value)}</h4>"
                f"<p>turns {settings.max_turns}, feedback {html.escape(settings.feedback.label)}"
                + (f", stopped: {html.escape(self.run_result.stop_reason)}" if self.run_result else "") + "</p>")
        return [head, candidates_html(nodes, tree.best, tree.external), lineage_figure(tree) if nodes else None]

    def to_html(self, include_plotlyjs: str | bool = "cdn") -> str:
        """A self-describing HTML snapshot (settings, candidates, figure) for headless runs and exports."""
        from widgets.static import join

        return f'<div class="kwb-prompt-panel">{join(self._static_parts(), include_plotlyjs)}</div>'
