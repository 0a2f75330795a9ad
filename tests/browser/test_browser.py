"""Kernel Workbench in JupyterLab, driven in a real Chromium: the `%%kwb` cell magic on an honest and a
cheating kernel, the verdict card of a failed run, the Roofline tab with points, and a two-knob sweep of the
built-in softmax solution. Every check reads the page; screenshots of each go to the artifacts folder (and
to docs/ with KWB_UPDATE_DOCS=1).

Recipe (tests/browser/README.md): Debian's chromium + Python playwright (no browser download), `jupyter lab`
on loopback with a temporary root (conftest.py), the test notebook opened and run.
"""

from __future__ import annotations

import os
import shutil
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
pytest.importorskip("jupyterlab", reason="needs jupyterlab (`pip install 'kernel-workbench[lab]'`)")

KERNEL_IDLE = """() => {
  const panel = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  const ctx = panel && panel.sessionContext;
  const kernel = ctx && ctx.session && ctx.session.kernel;
  return !!kernel && kernel.connectionStatus === 'connected' && kernel.status === 'idle';
}"""
WB = ".kwb-workbench"
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


def _tab(page, title: str) -> None:
    page.locator(f"{WB} .kwb-tabs .lm-TabBar-tab", has_text=title).click()


def _check_cell_magic(page) -> None:
    """The honest cell passes; the cheating cell is rejected and its card names the cell line of the cheat."""
    ok = page.locator('.kwb-cell-verdict .kwb-result[data-kwb-status="ok"]')
    bad = page.locator('.kwb-cell-verdict .kwb-result[data-kwb-status="rejected"]')
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
    status = _run_in_editor(page, _wrong_tail())
    panel = page.locator(f"{WB} .kwb-result-panel").first
    assert status == "incorrect", panel.inner_text()
    assert panel.locator('.kwb-chip[data-kwb-flag="mismatch"]').count() >= 1
    text = panel.inner_text()
    assert "the round the finding cites" in text and "correctness rounds" in text
    heat = page.locator(f"{WB} .kwb-editor .js-plotly-plot").first
    heat.wait_for(state="visible", timeout=30_000)
    title = heat.locator(".g-gtitle").text_content() or ""
    assert "|error| / tolerance" in title and "rounds 1 or 4 of 5 (batch_size=4 dim=200)" in title, title
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
    _shot(view, "roofline.png")


def _check_sweep(page) -> None:
    """BLOCK x num_warps over the shipped softmax solution: BLOCK=128 cannot hold a 200-wide row and keeps its
    cell with its status; the fastest correct config is starred."""
    _tab(page, "Editor")
    page.locator(f"{WB} button.kwb-show-solution").click()
    _tab(page, "Sweep")
    sweep = page.locator(f"{WB} .kwb-sweep")
    assert sweep.locator(".js-plotly-plot").count() == 0 or not sweep.locator(".js-plotly-plot").first.is_visible()
    assert "launch parameter of softmax_row_kernel" in sweep.locator(".kwb-sweep-help").inner_text()
    sweep.locator(".kwb-sweep-grid textarea").fill("BLOCK = 128, 256, 512\nnum_warps = 2, 4")
    sweep.locator("button.kwb-sweep-run").click()
    sweep.get_by_text("6 configs").wait_for(timeout=300_000)
    assert "fastest correct config" in sweep.locator(".kwb-sweep-best").inner_text()
    cells = sweep.locator(".js-plotly-plot .heatmap-label").all_text_contents()
    assert any(c in ("incorrect", "rejected") for c in cells) and any(c.startswith("★") for c in cells), cells
    _shot(sweep, "sweep.png")


def test_workbench_in_jupyterlab(lab):
    console: list[str] = []
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        # Tall enough that each screenshotted output fits on the page (the notebook scrolls inside it).
        page = browser.new_page(viewport={"width": 1280, "height": 2000})
        try:
            page.on("console", lambda m: console.append(f"{m.type}: {m.text}") if m.type == "error" else None)
            page.goto(f"{lab}/lab/workspaces/kwb/tree/{NOTEBOOK}?reset", timeout=120_000)
            page.wait_for_function(KERNEL_IDLE, timeout=120_000, polling=500)
            page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
            _check_cell_magic(page)
            page.locator(f"{WB} button.kwb-run").wait_for(timeout=150_000)
            assert page.get_by_text("Error displaying widget").count() == 0, console
            titles = page.locator(f"{WB} .kwb-tabs .lm-TabBar-tab").all_inner_texts()
            assert titles == ["Editor", "Results", "Variants", "Roofline", "Sweep", "Prompt"], titles
            _check_failed_card(page)
            _check_roofline(page)
            _check_sweep(page)
            assert page.get_by_text("Error displaying widget").count() == 0, console
        except BaseException:
            try:
                page.screenshot(path=str(artifacts() / "failure.png"), full_page=True)
                (artifacts() / "console.txt").write_text("\n".join(console))
            except Exception:  # noqa: BLE001 - the original failure is what matters
                pass
            raise
        finally:
            browser.close()
