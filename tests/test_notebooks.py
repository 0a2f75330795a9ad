"""Every tutorial and study notebook runs top to bottom headlessly (papermill), on the CPU interpreter in CI."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

papermill = pytest.importorskip("papermill")

ROOT = Path(__file__).resolve().parents[1]
TUTORIALS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
STUDIES = sorted((ROOT / "studies").glob("*.ipynb"))


def _execute(path: Path, tmp_path: Path, **parameters) -> tuple[dict, float]:
    out = tmp_path / path.name
    started = time.perf_counter()
    papermill.execute_notebook(str(path), str(out), parameters=parameters, kernel_name="python3",
                               cwd=str(path.parent), progress_bar=False, store_widget_state=False)
    return json.loads(out.read_text()), time.perf_counter() - started


def test_notebooks_are_stored_without_outputs():
    for path in TUTORIALS + STUDIES:
        nb = json.loads(path.read_text())
        for cell in nb["cells"]:
            if cell["cell_type"] == "code":
                assert not cell.get("outputs") and cell.get("execution_count") is None, f"{path.name} has outputs"
        tagged = [c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
        assert len(tagged) == 1, f"{path.name} needs exactly one `parameters` cell"


@pytest.mark.parametrize("path", TUTORIALS, ids=lambda p: p.stem)
def test_tutorial_runs_on_cpu(path, tmp_path):
    nb, seconds = _execute(path, tmp_path, device="cpu")
    errors = [o for c in nb["cells"] for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
    # Tutorials promise a CPU-only laptop run in under a minute; CI's 2 shared cores get some slack.
    assert seconds < 120, f"{path.name} took {seconds:.0f} s"


@pytest.mark.parametrize("path", STUDIES, ids=lambda p: p.stem)
def test_study_runs_on_cpu(path, tmp_path):
    store = tmp_path / "results.db"
    nb, _ = _execute(path, tmp_path, device="cpu", store_path=str(store), run_id="ci", point_id="p0")
    size = len(json.dumps(nb))
    assert size < 2_000_000, f"executed {path.name} is {size} bytes: widget state or plotly.js leaked into it"
    from workbench.store import Store

    frame = Store(str(store)).frame(run_id="ci")
    assert len(frame) > 0, f"{path.name} stored no results"
