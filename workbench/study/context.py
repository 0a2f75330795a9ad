"""What a study notebook records its results with: the store plus the point's provenance."""

from __future__ import annotations

import uuid
from typing import Any

from workbench.study.params import RUNNER_PARAMETERS


class StudyContext:
    """What a study notebook uses to record results: the store plus this point's provenance.

    Works the same under `kwb study run` (which passes store_path/run_id/point_id) and under plain papermill
    or interactive use (run id and point id then default to a fresh interactive id).
    """

    def __init__(self, store_path: str = "results.db", run_id: str = "", point_id: str = "",
                 parameters: dict[str, Any] | None = None):
        from workbench.store import Store

        self.store = Store(store_path)
        self.run_id = run_id or f"interactive-{uuid.uuid4().hex[:8]}"
        self.point_id = point_id or "interactive"
        self.parameters = {k: v for k, v in (parameters or {}).items() if k not in RUNNER_PARAMETERS}
        self.results: list[Any] = []
        self._cleared = False

    def add(self, result: Any) -> Any:
        """Store one result with this point's run id, point id and parameters."""
        if not self._cleared:
            self._clear_partial()
        # The study's ids go beside any run id the result already carries (an agent run's, say).
        result.metadata.update(study_run_id=self.run_id, point_id=self.point_id, parameters=self.parameters)
        self.store.add(result, run_id=self.run_id, point_id=self.point_id, **{f"param_{k}": v for k, v in self.parameters.items()})
        self.results.append(result)
        return result

    def _clear_partial(self) -> None:
        # A point re-run after a kill starts clean: drop what its unfinished first attempt stored.
        self._cleared = True
        remove = getattr(self.store, "delete_point", None)
        if remove and self.point_id != "interactive":
            remove(self.run_id, self.point_id)

    def frame(self):
        return self.store.frame(run_id=self.run_id)
