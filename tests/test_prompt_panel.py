"""PromptPanel: its plain functions on hand-made nodes, and the widget driving a scripted server."""

from __future__ import annotations

import time

import pytest
from llm_server import CHEAT, HONEST_FAST, TINY_SOURCE, ScriptedLLMServer, by_seed, hang, reply

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
    shorten,
    source_diff,
    tree_positions,
)


@pytest.fixture(autouse=True)
def _shared_ceilings_cache(tmp_path_factory, monkeypatch):
    """The CPU roofline is measured (seconds), once per test session, never read from or written to home."""
    monkeypatch.setenv("KWB_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "kwb-cache"))


def _node(i: int, parent: int | None, status: str, time_ms: float | None = None, message: str = "") -> Node:
    return Node(run_id="r", node_id=f"n{i:02d}", turn=i, parent=None if parent is None else f"n{parent:02d}",
                role="refine" if parent is not None else "generate", strategy="refine", candidate_id=f"c{i}",
                status=status, flags=["no-custom-kernel"] if status == "rejected" else [], time_ms=time_ms,
                message=message, source=f"BLOCK = {64 * (i + 1)}\nx = 1\n")


@pytest.fixture
def chain() -> list[Node]:
    return [_node(0, None, "rejected"), _node(1, 0, "ok", 4.0), _node(2, 1, "ok", 1.0), _node(3, 2, "incorrect")]


def test_table_marks_verdicts_and_the_best(chain):
    tree = Lineage.from_nodes("r", chain)
    html = candidates_html(chain, tree.best)
    assert html.count('<tr class="kwb-candidate"') == 4 and html.count('<tr class="kwb-candidate-more"') == 4
    assert html.count(STATUS_COLORS["ok"]) == 2 and STATUS_COLORS["rejected"] in html and "no-custom-kernel" in html
    assert "n02 &#9733;" in html and "n01 &#9733;" not in html
    assert candidates_html([]) == "<p><i>No candidates yet.</i></p>"


def test_rows_open_source_and_diff_against_the_parent_and_notes_never_wrap_or_cut_words(chain):
    long_note = "the kernel reads every row twice because the reduction is split; " * 4
    chain[2].message = long_note
    html = candidates_html(chain, None)
    assert source_diff(chain[1], chain[2]).splitlines()[2:] == ["@@ -1,2 +1,2 @@", "-BLOCK = 128", "+BLOCK = 192",
                                                                  " x = 1"]
    assert source_diff(None, chain[0]) == ""
    detail = html[html.index('data-kwb-node="n02"><summary'):]
    assert "n02: source and diff against n01" in detail and "-BLOCK = 128" in detail and "+BLOCK = 192" in detail
    assert "no parent" not in detail[:200] and 'class="kwb-candidate-source"' in detail
    assert "n00: source and notes" in html  # the first candidate has no parent to diff against
    short = shorten(long_note, 70)
    assert len(short) <= 70 and short.endswith(" …") and long_note.startswith(short[:-2])  # whole words only
    assert f'title="{long_note}"' in html and "white-space:nowrap" in html and "text-overflow:ellipsis" in html


def test_lineage_figure_has_edges_nodes_and_best_so_far(chain):
    tree = Lineage.from_nodes("r", chain)
    assert tree_positions(tree) == {"n00": (0, 0), "n01": (1, 1), "n02": (2, 2), "n03": (3, 3)}
    fig = lineage_figure(tree)
    edges, points, curve, *legend = fig.data
    assert list(edges.x) == [0, 1, None, 1, 2, None, 2, 3, None]
    assert list(points.marker.color) == [STATUS_COLORS[s] for s in ("rejected", "ok", "ok", "incorrect")]
    assert list(points.marker.symbol) == ["circle", "circle", "star", "circle"]
    assert list(curve.y) == [None, 0.25, 1.0, 1.0]  # 1/time of the best correct node so far
    assert fig.layout.yaxis2.title.text == "1 / time (1/ms)"
    # The node colours and the star have legend entries of their own (legend-only traces: no points).
    assert [(t.name, t.marker.color) for t in legend] == [
        ("rejected", STATUS_COLORS["rejected"]), ("ok", STATUS_COLORS["ok"]), ("incorrect", STATUS_COLORS["incorrect"]),
        ("best correct", STATUS_COLORS["ok"])]
    assert all(list(t.x) == [None] for t in legend) and legend[-1].marker.symbol == "star"
    assert fig.layout.showlegend is True and points.showlegend is False and curve.showlegend is False


def test_prompt_tab_of_the_workbench_runs_and_feeds_the_other_tabs(tmp_path):
    from widgets.workbench_widget import Workbench

    task = Task.from_source(TINY_SOURCE, name="tiny_add", sizes={"M": 2, "N": 256})
    ui = Workbench(task, store=tmp_path / "wb.db", device="cpu")
    panel = ui.prompt
    assert ui.tabs.titles[-1] == "Prompt" and ui.tabs.children[-1] is panel
    assert panel.figure_box.layout.display == "none"  # no empty "1 / time" axes before the first candidate
    # best-of-n asks both at once: each request is answered by its seed (= sample: turn 0, turn 1)
    with ScriptedLLMServer(router=by_seed({0: reply(HONEST_FAST), 1: reply(CHEAT)})) as server:
        panel.provider = OpenAIProvider("scripted", base_url=server.openai_base_url, api_key="k", max_retries=0,
                                        recorder=Recorder())
        panel.provider_picker.value = "openai"  # the scripted server speaks the OpenAI API
        assert "class Model" in panel.prompt.value
        panel.strategy.value = "best-of-n"
        panel.turns.value = 2
        panel.settings = panel.settings.replace(time_it=False)
        panel.prompt.value = panel.prompt.value + "\nKeep it short."
        run = panel.run()
        sent = [r.text for r in server.requests]
    assert [n.status for n in run.nodes] == ["ok", "rejected"]
    assert all(t.endswith("Keep it short.") for t in sent)  # the edited prompt box is what was sent
    assert STATUS_COLORS["ok"] in panel.table.value and STATUS_COLORS["rejected"] in panel.table.value
    assert list(panel.figure.data[1].marker.color) == [STATUS_COLORS["ok"], STATUS_COLORS["rejected"]]
    assert panel.figure_box.layout.display == "flex"
    assert "2 candidates" in panel.status.value and "best n00" in panel.status.value
    assert "tokens" in panel.status.value and "failed" not in panel.status.value
    assert not panel.run_button.disabled and panel.stop_button.disabled
    # stored once by the agent (with lineage), shown in the Results tab without a second copy
    assert sorted(r.status for r in ui.table.records) == ["ok", "rejected"] and len(ui.store.frame()) == 2
    page = panel.to_html(include_plotlyjs=False)
    assert "kwb-candidates" in page and "plotly-graph-div" in page and "best-of-n" in page
    assert ">Prompt</h3>" in ui.to_html(include_plotlyjs=False)


def test_stop_cancels_the_call_in_flight_within_a_second():
    task = Task.from_source(TINY_SOURCE, name="tiny_add", sizes={"M": 2, "N": 256})
    with ScriptedLLMServer([hang(60)] * 5) as server:  # the model never answers (the default timeout is 120 s)
        recorder = Recorder()
        provider = OpenAIProvider("scripted", base_url=server.openai_base_url, api_key="k", recorder=recorder)
        panel = PromptPanel(task, provider=provider, strategy="best-of-n")
        panel.turns.value = 5
        panel.settings = panel.settings.replace(time_it=False, concurrency=2)
        panel.run_button.click()
        assert server.wait_for_requests(2)
        assert panel.run_button.disabled
        started = time.monotonic()
        panel.stop_button.click()
        run = panel.wait(timeout=5)
        waited = time.monotonic() - started
    assert run is not None and run.stop_reason == "cancelled" and run.nodes == [] and waited < 1.0, waited
    # both calls in flight are recorded as cancelled, with no reply
    cancelled = [c for c in recorder.calls if c.error_kind == "cancelled"]
    assert len(cancelled) == 2 and all(c.reply is None for c in cancelled)
    assert not panel.run_button.disabled and "cancelled" in panel.status.value


def test_typing_a_model_name_keeps_the_base_url_passed_in():
    task = Task.from_source(TINY_SOURCE, name="tiny_add", sizes={"M": 2, "N": 256})
    with ScriptedLLMServer(["no code here"]) as server:
        provider = OpenAIProvider("first-model", base_url=server.openai_base_url, api_key="k", max_retries=0,
                                  recorder=Recorder())
        panel = PromptPanel(task, provider=provider, strategy="single-shot")
        panel.model.value = "typed-model"
        run = panel.run()
    assert server.hits == 1 and server.requests[0].body["model"] == "typed-model"
    assert run.model == "typed-model" and provider.model == "first-model"  # the panel's provider is untouched
