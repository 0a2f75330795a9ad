"""A JupyterLab server for the browser test: loopback, temporary root and home, no news or update prompts,
cell line numbers on (the `%%kwb` card cites them), this checkout on the kernel's path."""

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

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
NOTEBOOK = "workbench_browser.ipynb"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def artifacts() -> Path:
    path = Path(os.environ.get("KWB_ARTIFACTS") or HERE / "artifacts")
    path.mkdir(parents=True, exist_ok=True)
    return path


def _settings(home: Path) -> Path:
    settings = home / "settings"
    for plugin, name, value in (
        ("apputils-extension", "notification", {"fetchNews": "false", "checkForUpdates": False}),
        ("notebook-extension", "tracker", {"codeCellConfig": {"lineNumbers": True}}),
    ):
        folder = settings / "@jupyterlab" / plugin
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{name}.jupyterlab-settings").write_text(json.dumps(value))
    return settings


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server on 127.0.0.1 with a temporary root holding the test notebook; yields its URL."""
    root = tmp_path_factory.mktemp("lab-root")
    home = tmp_path_factory.mktemp("lab-home")
    shutil.copy(HERE / NOTEBOOK, root / NOTEBOOK)
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "TRITON_INTERPRET": "1", "JUPYTER_CONFIG_DIR": str(home / "config"),
           "JUPYTER_RUNTIME_DIR": str(home / "runtime"), "JUPYTERLAB_SETTINGS_DIR": str(_settings(home)),
           "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"), "IPYTHONDIR": str(home / "ipython"),
           "KWB_CACHE_DIR": str(home / "cache")}
    log = open(artifacts() / "jupyter-lab.log", "w")  # noqa: SIM115 - closed in the teardown
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
                pytest.fail(f"jupyter lab did not start: see {artifacts() / 'jupyter-lab.log'}")
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
