"""PromptPanel: its plain functions on hand-made nodes, and the widget driving a scripted server."""

from __future__ import annotations

import time

import pytest
from llm_server import CHEAT, HONEST_FAST, TINY_SOURCE, ScriptedLLMServer, reply

from workbench.llm.agent import Lineage, Node
from workbench.llm.openai_provider import OpenAIProvider
from workbench.llm.recording import Recorder
from workbench.tasks.task import Task

pytest.importorskip("ipywidgets")
pytest.importorskip("plotly")
pytest.importorskip("openai")

from widgets.prompt_panel import (  # noqa: E402
    STATUS_COLORS,
    PromptPanel,
    candidates_html,
    lineage_figure,
    tree_positions,
)


def _node(i: int, parent: int | None, status: str, time_ms: float | None = None) -> Node:
    return Node(run_id="r", node_id=f"n{i:02d}", turn=i, parent=None if parent is None else f"n{parent:02d}",
                role="refine" if parent is not None else "generate", strategy="refine", candidate_id=f"c{i}",
                status=status, flags=["no-custom-kernel"] if status == "rejected" else [], time_ms=time_ms)


@pytest.fixture
def chain() -> list[Node]:
    return [_node(0, None, "rejected"), _node(1, 0, "ok", 4.0), _node(2, 1, "ok", 1.0), _node(3, 2, "incorrect")]


def test_table_marks_verdicts_and_the_best(chain):
    tree = Lineage.from_nodes("r", chain)
    html = candidates_html(chain, tree.best)
    assert html.count("<tr>") == 5  # header + 4 rows
    assert html.count(STATUS_COLORS["ok"]) == 2 and STATUS_COLORS["rejected"] in html and "no-custom-kernel" in html
    assert "n02 &#9733;" in html and "n01 &#9733;" not in html
    assert candidates_html([]) == "<p><i>No candidates yet.</i></p>"


def test_lineage_figure_has_edges_nodes_and_best_so_far(chain):
    tree = Lineage.from_nodes("r", chain)
    assert tree_positions(tree) == {"n00": (0, 0), "n01": (1, 1), "n02": (2, 2), "n03": (3, 3)}
    fig = lineage_figure(tree)
    edges, points, curve = fig.data
    assert list(edges.x) == [0, 1, None, 1, 2, None, 2, 3, None]
    assert list(points.marker.color) == [STATUS_COLORS[s] for s in ("rejected", "ok", "ok", "incorrect")]
    assert list(points.marker.symbol) == ["circle", "circle", "star", "circle"]
    assert list(curve.y) == [None, 0.25, 1.0, 1.0]  # 1/time of the best correct node so far
    assert fig.layout.yaxis2.title.text == "1 / time (1/ms)"


def test_panel_runs_shows_candidates_and_renders_statically():
    task = Task.from_source(TINY_SOURCE, name="tiny_add", sizes={"M": 2, "N": 256})
    with ScriptedLLMServer([reply(HONEST_FAST), reply(CHEAT)]) as server:
        provider = OpenAIProvider("scripted", base_url=server.openai_base_url, api_key="k", max_retries=0,
                                  recorder=Recorder())
        panel = PromptPanel(task, provider=provider, strategy="best-of-n")
        assert "class Model" in panel.prompt.value and panel.provider_picker.value == "openai"
        panel.turns.value = 2
        panel.settings = panel.settings.replace(time_it=False)
        panel.prompt.value = panel.prompt.value + "\nKeep it short."
        run = panel.run()
        sent = [r.text for r in server.requests]
    assert [n.status for n in run.nodes] == ["ok", "rejected"]
    assert all(t.endswith("Keep it short.") for t in sent)  # the edited prompt box is what was sent
    assert STATUS_COLORS["ok"] in panel.table.value and STATUS_COLORS["rejected"] in panel.table.value
    assert list(panel.figure.data[1].marker.color) == [STATUS_COLORS["ok"], STATUS_COLORS["rejected"]]
    assert "2 candidates" in panel.status.value and "best n00" in panel.status.value
    assert not panel.run_button.disabled and panel.stop_button.disabled
    page = panel.to_html(include_plotlyjs=False)
    assert "kwb-candidates" in page and "plotly-graph-div" in page and "best-of-n" in page


def test_stop_button_cancels_a_background_run():
    task = Task.from_source(TINY_SOURCE, name="tiny_add", sizes={"M": 2, "N": 256})
    with ScriptedLLMServer([reply(HONEST_FAST)] * 5, delay_s=0.3) as server:
        provider = OpenAIProvider("scripted", base_url=server.openai_base_url, api_key="k", max_retries=0,
                                  recorder=Recorder())
        panel = PromptPanel(task, provider=provider, strategy="best-of-n")
        panel.turns.value = 5
        panel.settings = panel.settings.replace(time_it=False)
        panel.run_button.click()
        time.sleep(0.1)
        assert panel.run_button.disabled
        panel.stop_button.click()
        run = panel.wait(timeout=120)
    assert run is not None and run.stop_reason == "cancelled" and len(run.nodes) < 5
