"""The verdict card and the error heatmap, from hand-built Results shaped like the engine's (message lines,
per-round details, pooled error maps), and the code editor's synced state."""

from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("plotly")

from widgets._html import status_badge  # noqa: E402
from widgets.code_editor import CodeEditor  # noqa: E402
from widgets.error_map import error_heatmap, map_view, pool_error_map  # noqa: E402
from widgets.verdict import (  # noqa: E402
    cited_round,
    findings,
    flag_chip,
    line_refs,
    result_html,
    stats_rows,
)
from workbench.eval.checks.flags import FLAGS  # noqa: E402
from workbench.result import Result, Timing  # noqa: E402

SOURCE = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x.foo\n"
MISMATCH = ("[mismatch] output differs from the float64 reference beyond tolerance (round 1 of 5 (default inputs, "
            "size {'batch_size': 8, 'dim': 100}), call 1: 800 of 800 elements beyond atol=1e-08, rtol=1e-05; max abs "
            "error 6.79e-05; at index (0, 0) got 0.00329627, expected 0.00329957). Fix: compare your indexing")


def rounds() -> list[dict]:
    sizes = [{"batch_size": 8, "dim": 100}, {"batch_size": 64, "dim": 256}, {"batch_size": 37, "dim": 100},
             {"batch_size": 8, "dim": 100}, {"batch_size": 64, "dim": 256}]
    dists = ["default", "uniform", "normal", "heavy", "negative"]
    errs = [6.79e-05, 6.4e-06, 1.3e-04, 7.6e-04, 1.9e-05]
    return [{"size": s, "dist": d, "seed": i, "max_abs": e, "max_rel": 1e-3, "ok": False, "flags": ["mismatch"]}
            for i, (s, d, e) in enumerate(zip(sizes, dists, errs, strict=True))]


def failed(**kw) -> Result:
    error_map = np.full((8, 50), 99.8).tolist()  # 8 x 100 output, columns pooled by 2
    base = dict(task="softmax", candidate_id="c", candidate_name="off-by-0.1%", language="triton", status="incorrect",
                message=MISMATCH, flags=["mismatch"], size={"batch_size": 8, "dim": 100}, max_abs_err=7.6e-4,
                max_rel_err=1e-3, details={"rounds": rounds(), "error_map": error_map}, source=SOURCE)
    return Result(**{**base, **kw})


def passed(**kw) -> Result:
    t = Timing(2.0, 1.9, 2.6, 0.1, 1.95, 2.1, 50, "cuda-events", stop_reason="ci-target")
    base = dict(task="softmax", candidate_id="c", candidate_name="fast", language="triton", status="ok",
                message="all checks passed", size={"batch_size": 8, "dim": 100}, max_abs_err=3e-7, max_rel_err=1e-6,
                timing=t, reference_timing=Timing(5.0, 4.9, 5.2, 0.1, 4.95, 5.05, 50, "cuda-events"), speedup=2.5,
                sol_fraction=0.8, bound="memory", details={"error_map": [[0.1, 0.2], [0.3, 0.4]]})
    return Result(**{**base, **kw})


def test_flags_are_chips_with_severity_and_the_catalogs_why_and_fix():
    chip = flag_chip("mismatch")
    assert 'data-kwb-flag="mismatch"' in chip and "kwb-reject" in chip
    assert f'title="{FLAGS["mismatch"].why}. Fix: {FLAGS["mismatch"].fix}"' in chip
    assert "kwb-warn" in flag_chip("weak-task") and "not in the flag catalog" in flag_chip("made-up")
    r = failed(flags=["mismatch", "input-mutation"])
    assert [flag for flag, _, _ in findings(r)] == ["mismatch", "input-mutation"]
    html = result_html(r)
    assert html.count('<li class="kwb-finding') == 2 and 'data-kwb-flag="input-mutation"' in html
    assert "the candidate modified its inputs" in html  # no message line: the catalog explains it
    assert html.count('class="kwb-chip') >= 4  # headline chips + one per finding
    assert 'data-kwb-status="rejected"' in status_badge("rejected")


def test_error_numbers_agree_with_the_finding_text():
    r = failed()
    assert cited_round(r) == {"round": 1, "of": 5, "dist": "default", "size": {"batch_size": 8, "dim": 100},
                              "call": 1, "max_abs": 6.79e-05}
    rows = dict(stats_rows(r))
    assert rows["max abs error"].startswith("6.79e-05 in round 1 of 5 (default inputs, batch_size=8 dim=100), call 1")
    assert rows["largest over all rounds"] == "0.00076 in round 4 of 5 (heavy inputs, batch_size=8 dim=100)"
    assert "max rel error" not in rows  # the finding cites no relative error: nothing to contradict it
    html = result_html(r)
    assert "6.79e-05" in html and "5 correctness rounds" in html
    ok = dict(stats_rows(passed()))
    assert ok["max abs error"] == "3e-07" and "largest over all rounds" not in ok


def test_heatmap_only_for_failures_with_round_size_and_real_indices():
    view = map_view(failed())
    assert view.rows == 8 and view.cols == 100
    assert view.source == "worst of failing rounds 1 or 4 of 5 (batch_size=8 dim=100)"  # round 3 is 37 rows
    fig = error_heatmap(failed())
    heat = fig.data[0]
    assert list(heat.x)[:3] == [0, 2, 4] and list(heat.y) == list(range(8))  # output columns, pooled by 2
    assert heat.customdata[0][1][0] == "rows 0, cols 2–3" and heat.customdata[0][1][1] == 99.8
    assert "|error| / tolerance" in fig.layout.title.text and fig.layout.title.subtitle.text.startswith(view.source)
    assert error_heatmap(passed()) is None and map_view(passed()) is None
    below = failed(details={"rounds": rounds(), "error_map": [[0.5, 0.9]]})  # failed, but not in the numbers
    assert map_view(below) is None
    one = failed(details={"rounds": rounds(), "error_map": [[0.5, 3.0]], "error_map_round": 3,
                          "error_map_shape": [37, 100]})
    assert map_view(one).source == "round 3 of 5 (normal inputs, batch_size=37 dim=100)"


def test_a_map_of_a_256_wide_output_pooled_to_64_names_real_columns_and_its_blocks():
    """The engine's map record carries the output's extent and pooling: a softmax of 64 x 256 whose last column was
    never written (an off-by-one mask) is drawn on columns 0-255 in blocks of 4, the unwritten column darkest."""
    cells = [[3.0] * 63 + [1e6] for _ in range(64)]  # every element off a little, the last column unwritten
    r = failed(details={"rounds": rounds(), "error_map": {"cells": cells, "rows": 64, "cols": 256, "pool": [1, 4]},
                        "error_map_round": 1})
    view = map_view(r)
    assert (view.rows, view.cols) == (64, 256)
    heat = error_heatmap(r).data[0]
    assert list(heat.x)[-1] == 252 and list(heat.x)[:2] == [0, 4] and len(heat.y) == 64
    assert heat.customdata[0][63][0] == "rows 0, cols 252–255"  # the unwritten column 255 is in the last block
    assert heat.z[0][63] > heat.z[0][0]  # log colour: the unwritten block stands out from the slightly wrong ones
    subtitle = error_heatmap(r).layout.title.subtitle.text
    assert "each cell is the worst of a block of 1 row x 4 columns" in subtitle
    assert "every element is wrong" in subtitle  # one colour, said in words
    partly = failed(details={"rounds": rounds(), "error_map": {"cells": [[0.5, 2.0]], "rows": 1, "cols": 2,
                                                               "pool": [1, 1]}})
    assert "every element" not in error_heatmap(partly).layout.title.subtitle.text
    assert "block" not in error_heatmap(partly).layout.title.subtitle.text


def test_new_result_fields_are_shown_when_present():
    r = passed(sandbox="namespaces", coverage=0.93, precision="ieee", kernel_policy="strict", speedup_ci=(2.41, 2.6),
               speedup_verdict="faster", speedup_basis="gpu-only",
               error_budget={"atol": 1e-8, "rtol": 1e-5, "k": 4.0, "native_max_abs": 1.2e-9})
    rows = dict(stats_rows(r))
    assert rows["speedup vs eager"] == ("2.50x [2.41, 2.60] 95% CI, faster (gpu-only basis); coverage 93% of GPU "
                                        "time in the candidate's own kernels")
    assert rows["protocol"] == "precision ieee, kernel policy strict, sandbox namespaces"
    assert rows["error budget"] == "atol 1e-08, rtol 1e-05, k 4, native max abs 1.2e-09"
    assert rows["time (median)"].endswith("n=50, cuda-events clock, stopped: ci-target")
    assert "kwb-sandbox-none" not in result_html(r)
    bare = dict(stats_rows(passed()))
    assert "protocol" not in bare and "error budget" not in bare and "coverage" not in bare["speedup vs eager"]
    interp = dict(stats_rows(passed(timing=Timing(9.0, 8.0, 10.0, 1.0, 8.5, 9.5, 5, "interpreter"), speedup=None)))
    assert "reference (eager)" not in interp and "not comparable with compiled code" in interp["note"]
    assert "reference (eager)" in dict(stats_rows(passed()))
    unsafe = result_html(passed(sandbox="none"))
    assert "kwb-sandbox-none" in unsafe and "No sandbox" in unsafe


def test_error_budget_is_said_in_words_not_printed_as_a_dict():
    """The budget the comparison records (tolerance dict, k, native error, which term bound, the worst ratio,
    how many comparisons were merged) reads as a sentence: no braces, no "k 16 ... merged 10"."""
    budget = {"tolerance": {"atol": 1e-5, "rtol": 1e-5}, "k": 16.0, "native_error": 1.2e-7, "native_bound": 1.92e-6,
              "bound": "both", "worst_ratio": 1.7, "norm": "max-abs per output", "merged": 10}
    row = dict(stats_rows(passed(error_budget=budget)))["error budget"]
    assert row == ("each element may be off by the larger of atol 1e-05 + rtol 1e-05 x |expected| and 16 x the "
                   "reference's own error in this precision (E = 1.2e-07, so 16 x E = 1.92e-06); the tolerance on large values, "
                   "the reference's own error on small ones; the worst element used 1.7x its allowance (beyond it; 1 "
                   "is the limit); worst of 10 comparisons (each output of each checked call)")
    assert "{" not in row and "merged" not in row
    fallback = dict(stats_rows(passed(error_budget={"tolerance": {"atol": 0.01, "rtol": 0.0}, "merged": 1,
                                                     "note": "no float64 reference"})))["error budget"]
    assert fallback == ("each element may be off by atol 0.01 + rtol 0 x |expected|; worst of 1 comparison (each "
                        "output of each checked call); no float64 reference")


def test_backticks_in_messages_become_code_not_literal_ticks():
    from widgets._html import plain, plural, rich
    from widgets.verdict import flag_chip, state_html

    assert rich("pass `BLOCK=...` at <launch>") == "pass <code>BLOCK=...</code> at &lt;launch&gt;"
    assert plain("add `import torch`") == "add import torch"
    assert [plural(n, "result") for n in (0, 1, 2)] == ["0 results", "1 result", "2 results"]
    card = state_html("error", "WorkbenchError: install `einops` (`pip install einops`)")
    assert "<code>einops</code>" in card and "`" not in card
    from workbench.eval.checks.flags import FLAGS

    assert "`" in FLAGS["non-finite"].why + FLAGS["non-finite"].fix  # the catalog writes code in backticks
    tip = flag_chip("non-finite")
    assert "`" not in tip.split('title="')[1].split('"')[0]
    warned = result_html(passed(warnings=["size `dim` was rounded"]))
    assert "<code>dim</code>" in warned and "`dim`" not in warned


def test_failing_lines_are_shown_with_their_code():
    r = failed(status="runtime_error", flags=[], message="forward raised AttributeError: 'Tensor' object has no "
               "attribute 'foo' at candidate line 6 in forward: return x.foo", details={})
    assert line_refs(r) == [6]
    html = result_html(r, where="cell line")
    ref = re.search(r'<div class="kwb-line-ref" data-kwb-line="6"><b>cell line 6</b>: <code>return x.foo</code>', html)
    assert ref is not None and html.count("<span style=\"display:block;") == 2  # line 6 and line 5 (context)
    static = failed(status="rejected", message="[torch-compute-in-forward] torch compute ops do the work in forward "
                    "(.foo(...) on a tensor at line 6). Fix: move it", flags=["torch-compute-in-forward"])
    assert line_refs(static) == [6] and line_refs(failed(message="at line 99")) == []  # beyond the source


def test_long_messages_wrap_and_code_scrolls():
    long = "x" * 3000
    html = result_html(failed(status="compile_error", flags=[], message=long, log="trace\n" * 500, details={}))
    assert "overflow-wrap:anywhere" in html and "max-height:16em;overflow:auto" in html


def test_pooling_keeps_every_failure_visible():
    big = np.zeros((300, 5))
    big[217, 3] = 7.0
    pooled = pool_error_map(big, max_cells=128)
    assert pooled.shape == (100, 5) and pooled.max() == 7.0 and pooled[72, 3] == 7.0
    assert pool_error_map([1.0, 2.0]) is None and pool_error_map(None) is None


def test_code_editor_syncs_text_and_marks_lines():
    ed = CodeEditor(value="a = 1\n", rows=10)
    assert ed.value == "a = 1\n" and ed.error_lines == [] and "highlight" in ed._esm and ".kwb-code-gutter" in ed._css
    ed.error_lines = [1]
    state = ed.get_state()
    assert state["value"] == "a = 1\n" and state["error_lines"] == [1] and state["rows"] == 10
    with pytest.raises(Exception, match="rows must be at least 1"):
        ed.rows = 0


def test_the_cards_error_budget_adds_up_and_agrees_with_the_mismatch_line():
    """One definition of the budget on one card: the budget row's E and k x E come from the comparison the mismatch
    line names, and k x E is k times E."""
    import re

    import workbench as wb

    src = ("import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
           "        y = torch.softmax(x, dim=-1)\n        return y + 1e-4 * (y > y.mean())\n")
    r = wb.evaluate("softmax", wb.Candidate(src, language="torch"), device="cpu", time_it=False)
    assert r.status == "incorrect" and "mismatch" in r.flags, r.message
    budget = r.error_budget
    assert budget["native_bound"] == pytest.approx(budget["k"] * budget["native_error"])
    row = dict(stats_rows(r))["error budget"]
    e, bound = (float(v) for v in re.search(r"\(E = ([\d.e+-]+), so 16 x E = ([\d.e+-]+)\)", row).groups())
    assert bound == pytest.approx(16 * e, rel=1e-2) and e == pytest.approx(budget["native_error"], rel=1e-2)
    line = re.search(r"or 16 x the native error ([\d.e+-]+) = ([\d.e+-]+)", r.message)
    assert line is not None, r.message
    assert float(line.group(1)) == pytest.approx(e, rel=1e-2) and float(line.group(2)) == pytest.approx(bound, rel=1e-2)
