"""The child side of one study point: papermill runs the notebook in a fresh kernel. It imports only papermill and
the failure format (no torch: the kernel it starts imports what the notebook needs), so a point's own process
starts in a fraction of a second; `run.run_point` starts it as `python -m workbench.study.point REQUEST`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from workbench.errors import require
from workbench.study import failures


def execute(request: dict[str, Any]) -> int:
    """Papermill with widget state off (saved notebooks stay small). A failure prints one MARKER line with the
    exception's fields, which the parent turns into the point's message; the traceback stays in the notebook."""
    papermill = require("papermill", "lab", "running study notebooks")
    Path(request["output"]).parent.mkdir(parents=True, exist_ok=True)
    try:
        papermill.execute_notebook(
            request["input"], request["output"], parameters=request["parameters"],
            kernel_name=request["kernel_name"], progress_bar=False, cwd=request["cwd"], store_widget_state=False,
            start_timeout=120,
        )
    except Exception as exc:
        import traceback

        traceback.print_exc()  # the raw stack first: retry markers (ZMQError...) are searched in it
        print(failures.MARKER + json.dumps(failures.from_exception(exc), default=str), file=sys.stderr, flush=True)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) != 1:
        print("usage: python -m workbench.study.point REQUEST_JSON (the study runner's child entry point; run "
              "studies with `kwb study run NOTEBOOK`)", file=sys.stderr)
        return 2
    return execute(json.loads(argv[0]))


if __name__ == "__main__":
    sys.exit(main())
