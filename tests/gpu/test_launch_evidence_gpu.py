"""Forged launch evidence on a GPU (issue 22 item 3): compiled Triton, launches corroborated by the profiled forward.

The CPU forms are in tests/redteam/test_launch_forgery.py. On a GPU no probe calls are made: the judge takes the
candidate's own kernels (names parsed from its source) from a profiled forward, made by a profiler the runner bound
and sealed before the candidate was imported, and checks its kernel time against the judge's clock. Prints one line
per case (run with -s):

    python -m pytest tests/gpu/test_launch_evidence_gpu.py -s
"""

from __future__ import annotations

import pytest
from redteam.attacks import HONEST, softmax_task
from redteam.test_launch_forgery import FORGE_LOG, FRAME_WALK, REPLACED_REPORT, REWRITE_OUTPUT_FRAMES, decoy

import workbench as wb

pytestmark = pytest.mark.gpu

SIZE = {"batch_size": 4096, "dim": 1024}

# The profiler the runner reports kernels from, replaced by module attribute with one whose records name the
# candidate's kernel for every kernel that ran.
FORGED_PROFILER = '''
_profiler = importlib.import_module("to" + "rch.prof" + "iler")
_real_profile = _profiler.profile


class _Forged(_real_profile):
    def events(self):
        out = super().events()
        for evt in out:
            try:
                evt.name = "softmax_kernel"
            except Exception:
                pass
        return out


_profiler.profile = _Forged
'''


def _evaluate(cand: wb.Candidate, time_it: bool) -> wb.Result:
    return wb.evaluate(softmax_task(), cand, device="cuda", size=SIZE, time_it=time_it, compile_reference=False)


@pytest.mark.parametrize("time_it", [False, True], ids=["untimed", "timed"])
def test_the_honest_kernel_has_its_launches_corroborated_by_the_profiler(time_it):
    res = _evaluate(wb.Candidate(source=HONEST, language="triton"), time_it)
    print(f"\nhonest ({'timed' if time_it else 'untimed'}): {res.status} {res.evidence} "
          f"{res.protocol.get('evidence', {}).get('launches')}")
    assert res.status == "ok" and res.evidence["launches"] == "corroborated", (res.message, res.evidence)
    assert res.coverage is not None and res.coverage > 0.5


@pytest.mark.parametrize("prelude,forward", [
    (REPLACED_REPORT, "return _softmax(x, -1)"),
    (FRAME_WALK, FORGE_LOG),
    (REWRITE_OUTPUT_FRAMES, "return _softmax(x, -1)"),
    (FORGED_PROFILER, "return _softmax(x, -1)"),
], ids=["report", "frame-walk-log", "output-frames", "profiler"])
@pytest.mark.parametrize("time_it", [False, True], ids=["untimed", "timed"])
def test_forged_launch_evidence_is_not_ok_on_a_gpu(prelude, forward, time_it):
    res = _evaluate(decoy(prelude, forward), time_it)
    print(f"\n{res.status} {res.flags} {res.evidence} {res.protocol.get('evidence', {}).get('launches')}")
    assert res.status == "rejected", (res.status, res.message)
    assert set(res.flags) & {"decoy-kernel", "low-coverage", "unverified-evidence", "harness-tamper"}, res.flags
    assert res.evidence.get("launches") != "corroborated", res.evidence
