"""Kernel Workbench in JupyterLab, driven in a real Chromium: the `%%kwb` cell magic on an honest and a
cheating kernel, the CPU roofline projection in a tutorial-wide column, the verdict card of a failed run, the
Roofline tab with points, a two-knob sweep of the built-in softmax solution, and three re-renders and reloads
of the Workbench; then the block-size study's HTML report, opened offline. Every check reads the page;
screenshots of each go to the artifacts folder (and to docs/ with KWB_UPDATE_DOCS=1).

Recipe (tests/browser/README.md): Debian's chromium + Python playwright (no browser download), `jupyter lab`
on loopback with a temporary root (conftest.py), the test notebook opened and run.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import NOTEBOOK, ROOT, artifacts

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]

CHROMIUM = os.environ.get("KWB_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
#: Screenshots in docs/ stay small enough for a README.
MAX_SHOT_BYTES = 300_000

if not Path(CHROMIUM).exists():
    pytest.skip(f"no Chromium at {CHROMIUM} (Debian: `apt-get install chromium`)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="needs Python playwright (`pip install playwright`)")
if importlib.util.find_spec("jupyterlab") is None:  # the server runs in its own process: found, not imported here
    pytest.skip("needs jupyterlab (`pip install 'kernel-workbench[lab]'`)", allow_module_level=True)

KERNEL_IDLE = """() => {
  const panel = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  const ctx = panel && panel.sessionContext;
  const kernel = ctx && ctx.session && ctx.session.kernel;
  return !!kernel && kernel.connectionStatus === 'connected' && kernel.status === 'idle';
}"""
WB = ".kwb-workbench"
#: Text of a plotly figure that must stay readable: every label inside the figure and no two on top of each other.
LABEL_LAYOUT = """(root) => {
  const box = root.querySelector('svg.main-svg').getBoundingClientRect();
  const sel = '.annotation-text, .legendtext, .g-gtitle text, .g-xtitle text, .g-ytitle text';
  const items = [...root.querySelectorAll(sel)].map((e) => {
    const r = e.getBoundingClientRect();
    return {text: e.textContent, l: r.left, r: r.right, t: r.top, b: r.bottom};
  }).filter((i) => i.r - i.l > 0 && i.text.trim());
  const clipped = items.filter((i) => i.l < box.left - 1 || i.r > box.right + 1 || i.t < box.top - 1 ||
                                      i.b > box.bottom + 1).map((i) => i.text);
  const overlaps = [];
  for (let a = 0; a < items.length; a++) {
    for (let b = a + 1; b < items.length; b++) {
      const x = items[a], y = items[b];
      if (x.l < y.r - 1 && y.l < x.r - 1 && x.t < y.b - 1 && y.t < x.b - 1) overlaps.push([x.text, y.text]);
    }
  }
  return {n: items.length, clipped, overlaps, width: box.width};
}"""
#: Buttons whose label does not fit (ipywidgets cuts it with an ellipsis: "TFLO...", "Time over ...").
CUT_BUTTONS = """(els) => els.filter((e) => e.offsetParent !== null && e.scrollWidth > e.clientWidth + 1)
                     .map((e) => e.textContent.trim())"""
#: Every status a run can end in (a Result's, or the editor's "error" when evaluation itself failed).
ENDINGS = ("ok", "compile_error", "runtime_error", "timeout", "crashed", "incorrect", "rejected", "error")


def _wrong_tail() -> str:
    """The softmax solution with columns 160 and up scaled by 1.01: a numeric failure confined to the right of
    each row, so the card's heatmap shows where (on the output's own column indices)."""
    from workbench.tasks.task import get_task

    src = get_task("softmax").solution_candidate().source
    honest = "y = num / tl.sum(num, axis=0)"
    assert honest in src, "the softmax solution changed; update the failing kernel in this test"
    return src.replace(honest, honest + "\n    y = tl.where(cols < 160, y, y * 1.01)", 1)


def _shot(locator, name: str, *more) -> Path:
    """Screenshot an element (or the box around several) to the artifacts folder, and to docs/ when
    KWB_UPDATE_DOCS=1 (size-checked)."""
    path = artifacts() / name
    locator.scroll_into_view_if_needed()
    boxes = [b for b in (x.bounding_box() for x in (locator, *more)) if b]
    x0, y0 = min(b["x"] for b in boxes), min(b["y"] for b in boxes)
    x1, y1 = max(b["x"] + b["width"] for b in boxes), max(b["y"] + b["height"] for b in boxes)
    locator.page.screenshot(path=str(path), clip={"x": x0, "y": y0, "width": x1 - x0, "height": y1 - y0})
    if os.environ.get("KWB_UPDATE_DOCS") == "1":
        assert path.stat().st_size < MAX_SHOT_BYTES, f"{name} is {path.stat().st_size} bytes: crop it"
        shutil.copy(path, ROOT / "docs" / name)
    return path


def _labels_fit(plot, least: int = 4) -> dict:
    """Every title, roof label and legend entry of a plotly figure lies inside it, none over another."""
    found = plot.evaluate(LABEL_LAYOUT)
    assert found["n"] >= least, found
    assert not found["clipped"], f"labels cut at the figure's edge ({found['width']:.0f} px wide): {found['clipped']}"
    assert not found["overlaps"], f"labels over each other ({found['width']:.0f} px wide): {found['overlaps']}"
    return found


def _tab(page, title: str) -> None:
    page.locator(f"{WB} .kwb-tabs .lm-TabBar-tab", has_text=title).click()


def _check_cell_magic(page) -> None:
    """The honest cell passes; the cheating cell is rejected and its card names the cell line of the cheat."""
    ok = page.locator('.kwb-cell-verdict .kwb-result[data-kwb-status="ok"]', has_text="honest-add")
    bad = page.locator('.kwb-cell-verdict .kwb-result[data-kwb-status="rejected"]', has_text="torch-does-the-work")
    ok.wait_for(timeout=180_000)
    bad.wait_for(timeout=120_000)
    assert "honest-add" in ok.inner_text() and "interpreter clock" in ok.inner_text()
    chips = bad.locator(".kwb-chip").evaluate_all("els => els.map(e => e.dataset.kwbFlag)")
    assert "torch-compute-in-forward" in chips, chips
    tip = bad.locator('.kwb-chip[data-kwb-flag="torch-compute-in-forward"]').first.get_attribute("title")
    assert "Fix:" in tip
    # `return torch.add(a, b)` is line 15 of the cell (line 1 is `%%kwb ...`), as the cell's gutter numbers it.
    ref = bad.locator('.kwb-line-ref[data-kwb-line="15"]')
    assert "cell line 15" in ref.inner_text() and "return torch.add(a, b)" in ref.inner_text()
    cell = page.locator(".jp-CodeCell", has=bad)
    gutter = cell.locator(".cm-lineNumbers .cm-gutterElement", has_text="15")
    assert gutter.count() >= 1, "cell line numbers are not shown"
    _shot(cell, "magic-cheat.png")
    _shot(page.locator(".jp-CodeCell", has=ok), "magic-ok.png")
    _check_torch_cells(page)
    _check_error_map(page)


def _cell_verdict(page, name: str):
    """The verdict card of the `%%kwb` cell named `name`, once it has ended."""
    card = page.locator(".kwb-cell-verdict .kwb-result", has_text=name).first
    card.wait_for(timeout=180_000)
    return card


def _check_torch_cells(page) -> None:
    """Plain PyTorch in a `%%kwb` cell is no kernel (its language was only inferred); declared with `--language
    torch` it is a baseline, and the card says the kernel policy was not applied."""
    plain = _cell_verdict(page, "plain-torch")
    assert plain.get_attribute("data-kwb-status") == "rejected", plain.inner_text()
    chips = plain.locator(".kwb-chip").evaluate_all("els => els.map(e => e.dataset.kwbFlag)")
    assert "no-custom-kernel" in chips, chips
    baseline = _cell_verdict(page, "eager-baseline")
    assert baseline.get_attribute("data-kwb-status") == "ok", baseline.inner_text()
    assert "PyTorch baseline: kernel policy not applied" in baseline.inner_text()


def _check_error_map(page) -> None:
    """The off-by-one softmax (64 x 256): the heatmap's columns are the output's own (ticks up to 250, not 63), each
    cell is said to be the worst of a block of 4 columns, and a map of one colour says what it means."""
    card = _cell_verdict(page, "off-by-one")
    assert card.get_attribute("data-kwb-status") == "incorrect", card.inner_text()
    cell = page.locator(".jp-CodeCell", has=card)
    heat = cell.locator(".js-plotly-plot").first
    heat.wait_for(state="visible", timeout=30_000)
    ticks = [t.strip() for t in heat.locator(".xtick text").all_text_contents()]
    assert max(int(t) for t in ticks if t.isdigit()) >= 200, ticks
    title = heat.locator(".g-gtitle").text_content() or ""
    assert "worst of a block of 1 row x 4 columns" in title and "every element is wrong" in title, title
    _shot(cell, "verdict-error-map.png")


def _check_projection(page) -> None:
    """The tutorial's CPU projection: each task's counted work on the H100's datasheet roofline with its bound,
    every label readable at the notebook's width and in a narrower window (the tutorial column)."""
    plot = page.locator(".jp-CodeCell", has_text="projection_figure").locator(".js-plotly-plot").first
    plot.wait_for(state="visible", timeout=60_000)
    legend = plot.locator(".legendtext").all_text_contents()
    assert sum("memory-bound" in t for t in legend) == 3 and sum("compute-bound" in t for t in legend) == 1, legend
    assert "projection" in (plot.locator(".g-gtitle").text_content() or "")
    _labels_fit(plot, least=8)
    page.set_viewport_size({"width": 1000, "height": 2000})
    try:
        page.wait_for_timeout(1_500)  # plotly redraws on the window's resize
        narrow = _labels_fit(plot, least=8)
        assert narrow["width"] < 700, narrow["width"]  # the narrow case really is narrow
    finally:
        page.set_viewport_size({"width": 1280, "height": 2000})
        page.wait_for_timeout(1_500)
    _shot(plot, "roofline-projection.png")


def _check_buttons(page) -> None:
    """Every button label of the Variants and Results tabs is whole (no "TFLO...", "Time over ..."); the Prompt
    tab draws no chart before its first run."""
    for title, view, labels in (("Variants", ".kwb-variants", {"TFLOP/s", "Time over sizes"}),
                                ("Results", ".kwb-results-table", {"speedup", "Refresh"})):
        _tab(page, title)
        buttons = page.locator(f"{WB} {view} button")
        buttons.first.wait_for(state="visible", timeout=30_000)
        assert labels <= {t.strip() for t in buttons.all_inner_texts()}, buttons.all_inner_texts()
        assert buttons.evaluate_all(CUT_BUTTONS) == [], title
    _tab(page, "Prompt")  # nothing run yet: no empty "1 / time" axes
    page.locator(f"{WB} .kwb-prompt-panel").first.wait_for(state="visible", timeout=30_000)
    assert page.locator(f"{WB} .kwb-prompt-panel .js-plotly-plot").count() == 0 or \
        not page.locator(f"{WB} .kwb-prompt-panel .js-plotly-plot").first.is_visible()


def _run_in_editor(page, source: str, timeout_s: float = 180) -> str:
    """Type `source` into the Workbench editor, press Run, wait for this candidate's verdict; its status."""
    from widgets.editor import build_candidate

    ident = build_candidate(source).id[:8]
    area = page.locator(f"{WB} .kwb-source textarea")
    area.fill(source)
    # The info line is computed in the kernel: once it names this candidate, the kernel has the new text.
    page.locator(f"{WB} .kwb-source-info", has_text=ident).wait_for(timeout=30_000)
    page.locator(f"{WB} button.kwb-run").click()
    selector = ", ".join(f'{WB} .kwb-result-panel .kwb-result[data-kwb-status="{v}"]' for v in ENDINGS)
    try:
        page.locator(selector, has_text=ident).first.wait_for(timeout=timeout_s * 1000)
    except sync_api.TimeoutError:
        panel = page.locator(f"{WB} .kwb-result-panel").first.inner_text()
        pytest.fail(f"no verdict for candidate {ident} within {timeout_s:.0f} s; the panel says: {panel[:2000]}")
    return page.locator(f"{WB} .kwb-result-panel .kwb-badge").first.get_attribute("data-kwb-status") or ""


def _check_failed_card(page) -> None:
    """A numerically wrong kernel: chips, the numbers of the cited round, and the heatmap with its round."""
    gutter = page.locator(f"{WB} .kwb-code-gutter").inner_text()
    assert gutter.startswith("1\n2\n3\n"), gutter[:40]  # the editor numbers its lines
    opening = page.locator(f"{WB} .kwb-source textarea").input_value()  # a skeleton, not the answer
    assert "TODO" in opening and "raise NotImplementedError" in opening and "tl.exp" not in opening, opening[:400]
    assert page.locator(f"{WB} button.kwb-show-solution").inner_text().strip() == "Show solution"
    status = _run_in_editor(page, _wrong_tail())
    panel = page.locator(f"{WB} .kwb-result-panel").first
    assert status == "incorrect", panel.inner_text()
    assert panel.locator('.kwb-chip[data-kwb-flag="mismatch"]').count() >= 1
    text = panel.inner_text()
    assert "the round the finding cites" in text and "correctness rounds" in text
    heat = page.locator(f"{WB} .kwb-editor .js-plotly-plot").first
    heat.wait_for(state="visible", timeout=30_000)
    title = heat.locator(".g-gtitle").text_content() or ""
    # The map is the worst failing round's, named with its inputs and size.
    assert "|error| / tolerance" in title and re.search(r"round \d+ of \d+ \(\w+ inputs, batch_size=\d+ dim=\d+\)", title), \
        title
    _shot(panel, "verdict-failed.png", page.locator(f"{WB} .kwb-editor .js-plotly-plot").first)
    _shot(page.locator(WB), "workbench.png")


def _check_roofline(page) -> None:
    """H100 roofs (datasheet and measured, labelled), the stored GPU rows as points, interpreter runs listed."""
    _tab(page, "Roofline")
    view = page.locator(f"{WB} .kwb-roofline")
    view.locator(".js-plotly-plot").first.wait_for(state="visible", timeout=60_000)
    points = view.locator(".scatterlayer .trace .points path")
    points.nth(3).wait_for(timeout=30_000)
    labels = view.locator(".annotation-text").all_text_contents()
    assert "HBM 3.02 TB/s (measured)" in labels and "HBM 3.35 TB/s (datasheet)" in labels, labels
    assert "FP16 tensor 989 TFLOP/s (datasheet)" in labels, labels
    assert "performance (TFLOP/s)" in (view.locator(".ytitle").text_content() or "")
    assert "not timed (incorrect)" in view.locator(".kwb-roofline-left").inner_text()
    _labels_fit(view.locator(".js-plotly-plot").first, least=6)
    _shot(view, "roofline.png")


#: BLOCKs of the sweep: one too narrow for the row, one that fits; the screenshot in docs/ shows a third.
SWEEP_BLOCKS = "128, 256, 512" if os.environ.get("KWB_UPDATE_DOCS") else "128, 256"


def _check_sweep(page) -> None:
    """BLOCK x num_warps over the shipped softmax solution: BLOCK=128 cannot hold a 200-wide row and keeps its
    cell with its status; the fastest correct config is starred."""
    _tab(page, "Editor")
    page.locator(f"{WB} button.kwb-show-solution").click()
    _tab(page, "Sweep")
    sweep = page.locator(f"{WB} .kwb-sweep")
    assert sweep.locator(".js-plotly-plot").count() == 0 or not sweep.locator(".js-plotly-plot").first.is_visible()
    assert "launch parameter of softmax_row_kernel" in sweep.locator(".kwb-sweep-help").inner_text()
    sweep.locator(".kwb-sweep-grid textarea").fill(f"BLOCK = {SWEEP_BLOCKS}\nnum_warps = 2, 4")
    sweep.locator("button.kwb-sweep-run").click()
    sweep.get_by_text(f"{2 * len(SWEEP_BLOCKS.split(','))} configs").wait_for(timeout=300_000)
    assert "fastest correct config" in sweep.locator(".kwb-sweep-best").inner_text()
    cells = sweep.locator(".js-plotly-plot .heatmap-label").all_text_contents()
    assert any(c in ("incorrect", "rejected") for c in cells) and any(c.startswith("★") for c in cells), cells
    _shot(sweep, "sweep.png")


def _editor_text(page) -> str:
    return page.locator(f"{WB} .kwb-source textarea").input_value()


RUN_LAST_CELL = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  panel.content.activeCellIndex = panel.content.widgets.length - 1;
  return window.jupyterapp.commands.execute('notebook:run-cell');
}"""


def _type_into_editor(page, source: str) -> None:
    """Fill the editor and wait until the kernel has the text (the info line, computed there, names it)."""
    from widgets.editor import build_candidate

    page.locator(f"{WB} .kwb-source textarea").fill(source)
    page.locator(f"{WB} .kwb-source-info", has_text=build_candidate(source).id[:8]).wait_for(timeout=30_000)


def _check_reloads(page, console: list[str], times: int = 3) -> None:
    """Re-render the Workbench (run its cell again: the old widgets stay alive in the kernel), type into its
    editor, save and reload the page, `times` times: every reload brings the widgets back from the kernel with
    no console error (anywidget's "Failed to initialize model" once piled up: 3, 8, 33) and the editor shows
    the code the kernel holds (it once came back empty above a footer saying "68 lines")."""
    solution = page.locator(f"{WB} .kwb-source textarea").input_value()
    for attempt in range(1, times + 1):
        page.evaluate(RUN_LAST_CELL)
        page.wait_for_function(KERNEL_IDLE, timeout=120_000, polling=500)
        _tab(page, "Editor")
        expected = f"# re-render {attempt}\n{solution}"
        _type_into_editor(page, expected)
        page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
        page.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model.dirty", timeout=30_000)
        console.clear()
        page.reload(timeout=120_000)
        page.wait_for_function(KERNEL_IDLE, timeout=120_000, polling=500)
        page.locator(f"{WB} .kwb-tabs .lm-TabBar-tab", has_text="Editor").wait_for(timeout=60_000)
        _tab(page, "Editor")
        area = page.locator(f"{WB} .kwb-source textarea")
        area.wait_for(state="visible", timeout=60_000)
        page.wait_for_timeout(5_000)  # anywidget gives a model 2 s to initialize: wait well past that
        assert area.input_value() == expected, f"reload {attempt}: the editor lost its code"
        lines = expected.count("\n") + (0 if expected.endswith("\n") else 1)
        assert f"{lines} lines" in page.locator(f"{WB} .kwb-source-info").inner_text()
        gutter = page.locator(f"{WB} .kwb-code-gutter").inner_text().split()
        assert gutter == [str(i) for i in range(1, len(expected.split("\n")) + 1)], gutter[-3:]  # painted, not blank
        assert page.get_by_text("Error displaying widget").count() == 0, f"reload {attempt}"
        assert not console, f"reload {attempt}: console errors: {console}"


def test_workbench_in_jupyterlab(lab):
    console: list[str] = []
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        # Tall enough that each screenshotted output fits on the page (the notebook scrolls inside it).
        page = browser.new_page(viewport={"width": 1280, "height": 2000})
        try:
            page.on("console", lambda m: console.append(f"{m.type}: {m.text}") if m.type == "error" else None)
            page.on("pageerror", lambda e: console.append(f"pageerror: {e}"))  # e.g. an unhandled rejection
            page.goto(f"{lab}/lab/workspaces/kwb/tree/{NOTEBOOK}?reset", timeout=120_000)
            page.wait_for_function(KERNEL_IDLE, timeout=120_000, polling=500)
            page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
            _check_cell_magic(page)
            _check_projection(page)
            page.locator(f"{WB} button.kwb-run").wait_for(timeout=150_000)
            assert page.get_by_text("Error displaying widget").count() == 0, console
            titles = page.locator(f"{WB} .kwb-tabs .lm-TabBar-tab").all_inner_texts()
            assert titles == ["Editor", "Results", "Variants", "Roofline", "Sweep", "Prompt"], titles
            _check_failed_card(page)
            _check_buttons(page)
            _check_roofline(page)
            _check_sweep(page)
            assert page.get_by_text("Error displaying widget").count() == 0, console
            assert not console, console  # the first render too: no console or page error
            _check_reloads(page, console)
        except BaseException:
            try:
                page.screenshot(path=str(artifacts() / "failure.png"), full_page=True)
                (artifacts() / "console.txt").write_text("\n".join(console))
            except Exception:  # noqa: BLE001 - the original failure is what matters
                pass
            raise
        finally:
            browser.close()


# ---- the block-size study's report ---------------------------------------------------------------------

REPORT_LAYOUT = """() => ({page: document.scrollingElement.scrollWidth, window: window.innerWidth,
  boxes: [...document.querySelectorAll('.kwb-scroll')].map((b) => b.getBoundingClientRect().right),
  scrolling: [...document.querySelectorAll('.kwb-scroll')].filter((b) => b.scrollWidth > b.clientWidth).length})"""


#: Two BLOCKs draw every line and the heatmap; the screenshot in docs/ shows three.
BLOCK_SIZES = "[64, 128, 256]" if os.environ.get("KWB_UPDATE_DOCS") else "[64, 128]"


def _run_block_size_study(folder: Path) -> Path:
    """The block-size study as a user runs it: BLOCK x NUM_WARPS over the online softmax on the CPU interpreter
    at a small size, the report written when the run ends."""
    cmd = [sys.executable, "-m", "workbench.cli.main", "study", "run", str(ROOT / "studies" / "block_size_sweep.ipynb"),
           "-p", "block_sizes", BLOCK_SIZES, "-p", "num_warps", "[1, 4]", "-p", "size",
           '{"batch_size": 4, "dim": 200}', "-p", "rounds", "2", "--device", "cpu", "--store", "results.db",
           "--out", "runs", "--run-id", "block-sizes", "--report"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True, timeout=420)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return folder / "runs" / "block-sizes" / "report.html"


def test_block_size_study_report_opens_offline_and_fits_the_page(tmp_path):
    """The report of a real block-size run: under 1 MB beside the one shared plotly.js, drawn with nothing from
    the network, time against BLOCK (a line per NUM_WARPS) and a BLOCK x NUM_WARPS heatmap with readable
    labels, and wide tables scrolling inside their box on a 1230 px window (the page itself never scrolls
    sideways)."""
    report = _run_block_size_study(tmp_path)
    assert report.stat().st_size < 1_000_000, report.stat().st_size
    assert len(list((tmp_path / "runs").glob("plotly-*.min.js"))) == 1
    errors: list[str] = []
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1230, "height": 2000})
        try:
            page.on("console", lambda m: errors.append(f"{m.type}: {m.text}") if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
            page.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:")
                       else (errors.append(f"network: {route.request.url}"), route.abort()))
            page.goto(report.as_uri())
            plots = page.locator(".js-plotly-plot")
            plots.first.wait_for(state="visible", timeout=60_000)
            titles = [plots.nth(i).locator(".g-gtitle").text_content() or "" for i in range(plots.count())]
            lines = next(i for i, t in enumerate(titles) if "median time by BLOCK" in t)
            heat = next(i for i, t in enumerate(titles) if "fastest correct" in t)
            legend = plots.nth(lines).locator(".legendtext").all_text_contents()
            assert {"NUM_WARPS=1", "NUM_WARPS=4"} <= {t.strip() for t in legend}, legend
            assert plots.nth(heat).locator(".hm, .heatmaplayer").count() >= 1
            for i in range(plots.count()):
                _labels_fit(plots.nth(i), least=2)
            layout = page.evaluate(REPORT_LAYOUT)
            assert layout["page"] <= layout["window"], layout  # nothing runs off the page
            assert all(right <= layout["window"] for right in layout["boxes"]) and layout["scrolling"] >= 1, layout
            assert page.locator("#kwb-no-plotly").is_hidden()
            _shot(page.locator("h1").first, "study-report.png", plots.nth(lines), plots.nth(heat))
            assert not errors, errors
        except BaseException:
            page.screenshot(path=str(artifacts() / "report-failure.png"), full_page=True)
            (artifacts() / "report-console.txt").write_text("\n".join(errors))
            raise
        finally:
            browser.close()
