"""The judge's last word on a static torch-compute finding on a GPU: a profiled forward decides it
(`workbench.eval.checks.what_ran`). The profile the coverage measurement took is used when there is one; otherwise
(timing off, or it stopped before coverage) one forward at the timing size is profiled here.
"""

from __future__ import annotations

from typing import Any

from workbench.eval.checks.flags import Finding
from workbench.eval.checks.runtime import own_kernel_names


def settle(ev: Any, result: dict[str, Any]) -> list[Finding]:
    """Findings of the decision for the evaluation `ev` (a judge.evaluation.Evaluation); its notes go to `result`."""
    kernels = ev.session.profiles[-1] if ev.session.profiles else _profile(ev)
    found = ev.ran.after_profile(kernels, own_kernel_names(ev.cand["source"]))
    result.setdefault("details", {}).setdefault("notes", []).extend(ev.ran.take_notes())
    return found


def _profile(ev: Any) -> dict[str, float]:
    ref = ev.reference()
    model = ev.session.model(ev.reference_model(), ref.init_inputs(ev.time_size, ev.seed), ev.seed,
                             {**ref.defaults, **ev.time_size})
    return ev.session.profile(model.model_id, ref.make_inputs(ev.time_size, ev.seed + 101, ev.device))
