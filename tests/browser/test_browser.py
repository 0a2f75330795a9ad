"""The Workbench in JupyterLab, driven in a real Chromium: widgets render, Run gives the right verdict badge.

Recipe (tests/browser/README.md): Debian's chromium + Python playwright (no browser download), `jupyter lab`
on loopback with a temporary root, the test notebook opened and run, assertions read from the DOM.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.timeout(420)]

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CHROMIUM = os.environ.get("KWB_CHROMIUM", "/usr/bin/chromium")
NOTEBOOK = "workbench_browser.ipynb"
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]

if not Path(CHROMIUM).exists():
    pytest.skip(f"no Chromium at {CHROMIUM} (Debian: `apt-get install chromium`)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="needs Python playwright (`pip install playwright`)")
pytest.importorskip("jupyterlab", reason="needs jupyterlab (`pip install 'kernel-workbench[lab]'`)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _artifacts() -> Path:
    path = Path(os.environ.get("KWB_ARTIFACTS") or HERE / "artifacts")
    path.mkdir(parents=True, exist_ok=True)
    return path


def _zeros_kernel() -> str:
    """The honest solution with its store turned into zeros: launches its kernel, passes static checks, and
    returns a constant. The correctness protocol must reject it."""
    from workbench.tasks.task import get_task

    src = get_task("vector_add").solution_candidate().source
    honest = "tl.store(out_ptr + offs, (a + b).to(out_ptr.dtype.element_ty), mask=mask)"
    assert honest in src, "the vector_add solution changed; update the cheat in this test"
    return src.replace(honest, "tl.store(out_ptr + offs, (a * 0.0).to(out_ptr.dtype.element_ty), mask=mask)")


#: Defines a Triton kernel it never launches and lets PyTorch do the work: the static checks must reject it.
TORCH_ONLY = """import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def decoy_kernel(x_ptr):
    pass


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.add(a, b)
"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server on 127.0.0.1 with a temporary root holding the test notebook; yields its URL."""
    root = tmp_path_factory.mktemp("lab-root")
    home = tmp_path_factory.mktemp("lab-home")
    shutil.copy(HERE / NOTEBOOK, root / NOTEBOOK)
    # No news or update prompts: they cover the page and would ask the network.
    settings = home / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text('{"fetchNews": "false", "checkForUpdates": false}')
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "TRITON_INTERPRET": "1", "JUPYTER_CONFIG_DIR": str(home / "config"),
           "JUPYTER_RUNTIME_DIR": str(home / "runtime"), "JUPYTERLAB_SETTINGS_DIR": str(home / "settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"), "IPYTHONDIR": str(home / "ipython"),
           "KWB_CACHE_DIR": str(home / "cache")}
    log = open(_artifacts() / "jupyter-lab.log", "w")  # noqa: SIM115 - closed in the teardown
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", "--allow-root", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
         "--ServerApp.port_retries=0", "--IdentityProvider.token=", "--ServerApp.password=",
         "--ServerApp.disable_check_xsrf=True", "--LabApp.expose_app_in_browser=True", f"--ServerApp.root_dir={root}",
         "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
        cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        try:
            with urllib.request.urlopen(f"{url}/api/status", timeout=2) as reply:
                json.load(reply)
            break
        except (urllib.error.URLError, ConnectionError, OSError):
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                log.close()
                pytest.fail(f"jupyter lab did not start: see {_artifacts() / 'jupyter-lab.log'}")
            time.sleep(0.5)
    yield url
    try:  # shut kernels down cleanly (their evaluation workers exit with them), then the server
        urllib.request.urlopen(urllib.request.Request(f"{url}/api/shutdown", method="POST"), timeout=10).close()
        proc.wait(timeout=20)
    except Exception:  # noqa: BLE001 - fall back to ending the process group this fixture started
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
    log.close()


KERNEL_IDLE = """() => {
  const panel = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  const ctx = panel && panel.sessionContext;
  const kernel = ctx && ctx.session && ctx.session.kernel;
  return !!kernel && kernel.connectionStatus === 'connected' && kernel.status === 'idle';
}"""

BADGE = ".kwb-result-panel .kwb-badge"


def _badge(page) -> str:
    return page.locator(BADGE).first.get_attribute("data-kwb-status") or ""


#: Every status a run can end in (a Result's, or the editor's "error" when evaluation itself failed).
ENDINGS = ("ok", "compile_error", "runtime_error", "timeout", "crashed", "incorrect", "rejected")


def _run_and_wait(page, source: str, timeout_s: float = 150) -> str:
    """Type `source` into the editor, press Run, wait for this candidate's verdict; return its status."""
    from widgets.editor import build_candidate

    ident = build_candidate(source).id[:8]
    if page.locator(".kwb-source textarea").input_value() != source:
        page.locator(".kwb-source textarea").fill(source)
    # The info line is computed in the kernel: once it names this candidate, the kernel has the new source.
    page.locator(".kwb-source-info", has_text=ident).wait_for(timeout=30_000)
    page.locator("button.kwb-run").click()
    # The headline names the candidate, so a verdict left from the previous run never matches.
    selector = ", ".join(f'.kwb-result-panel .kwb-result[data-kwb-status="{v}"]' for v in ENDINGS)
    failed = page.locator('.kwb-result-panel .kwb-result[data-kwb-status="error"]')
    try:
        page.locator(selector, has_text=ident).or_(failed).first.wait_for(timeout=timeout_s * 1000)
    except sync_api.TimeoutError:
        panel = page.locator(".kwb-result-panel").first.inner_text()
        pytest.fail(f"no verdict for candidate {ident} within {timeout_s:.0f} s; the panel says: {panel[:2000]}")
    return _badge(page)


def test_workbench_in_jupyterlab(lab):
    artifacts = _artifacts()
    console: list[str] = []
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.on("console", lambda m: console.append(f"{m.type}: {m.text}") if m.type == "error" else None)
            page.goto(f"{lab}/lab/workspaces/kwb/tree/{NOTEBOOK}?reset", timeout=120_000)
            page.wait_for_function(KERNEL_IDLE, timeout=120_000, polling=500)
            page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
            page.locator(".kwb-workbench button.kwb-run").wait_for(timeout=150_000)

            # Rendered, not an error box; the editor starts idle with the task's honest solution.
            assert page.get_by_text("Error displaying widget").count() == 0, console
            assert _badge(page) == "idle"
            assert page.locator(".kwb-tabs .lm-TabBar-tab").count() == 5

            from workbench.tasks.task import get_task

            honest = get_task("vector_add").solution_candidate().source
            assert _run_and_wait(page, honest) == "ok", page.locator(".kwb-result-panel").first.inner_text()
            assert "interpreter clock" in page.locator(".kwb-result-panel").first.inner_text()
            shot = artifacts / "workbench-ok.png"
            page.locator(".kwb-workbench").first.screenshot(path=str(shot))
            if os.environ.get("KWB_UPDATE_DOCS") == "1":
                shutil.copy(shot, ROOT / "docs" / "workbench.png")

            verdict = _run_and_wait(page, _zeros_kernel())
            assert verdict in ("rejected", "incorrect"), page.locator(".kwb-result-panel").first.inner_text()
            flags = page.locator(".kwb-result-panel li.kwb-finding").evaluate_all(
                "els => els.map(e => e.dataset.kwbFlag)")
            assert "degenerate-output" in flags or "mismatch" in flags, flags
            page.locator(".kwb-workbench").first.screenshot(path=str(artifacts / "workbench-cheat.png"))

            verdict = _run_and_wait(page, TORCH_ONLY)
            assert verdict == "rejected", page.locator(".kwb-result-panel").first.inner_text()
            flags = page.locator(".kwb-result-panel li.kwb-finding").evaluate_all(
                "els => els.map(e => e.dataset.kwbFlag)")
            assert "torch-compute-in-forward" in flags, flags

            # The results tab lists both runs; the variants tab draws the passing one with plotly.
            page.locator(".kwb-tabs .lm-TabBar-tab", has_text="Results").click()
            rows = page.locator(".kwb-results tr.kwb-row")
            rows.nth(1).wait_for(timeout=30_000)
            rows.nth(2).wait_for(timeout=30_000)
            statuses = rows.evaluate_all("els => els.map(e => e.dataset.kwbStatus)")
            assert statuses[0] == "ok" and set(statuses[1:]) <= {"rejected", "incorrect"}, statuses
            page.locator(".kwb-workbench").first.screenshot(path=str(artifacts / "workbench-results.png"))
            page.locator(".kwb-tabs .lm-TabBar-tab", has_text="Variants").click()
            plot = page.locator(".kwb-variants .js-plotly-plot").first
            plot.wait_for(state="visible", timeout=60_000)
            page.locator(".kwb-variants .js-plotly-plot .scatterlayer .trace").first.wait_for(timeout=30_000)
            assert page.locator(".js-plotly-plot").count() >= 1
            assert page.get_by_text("Error displaying widget").count() == 0, console
            page.locator(".kwb-workbench").first.screenshot(path=str(artifacts / "workbench-variants.png"))
            page.locator(".kwb-tabs .lm-TabBar-tab", has_text="Roofline").click()
            page.locator(".kwb-roofline .js-plotly-plot").first.wait_for(state="visible", timeout=60_000)
            assert "not plotted" in page.locator(".kwb-roofline").first.inner_text()  # interpreter times
            page.locator(".kwb-workbench").first.screenshot(path=str(artifacts / "workbench-roofline.png"))
        except BaseException:
            try:
                page.screenshot(path=str(artifacts / "failure.png"), full_page=True)
                (artifacts / "console.txt").write_text("\n".join(console))
            except Exception:  # noqa: BLE001 - the original failure is what matters
                pass
            raise
        finally:
            browser.close()
