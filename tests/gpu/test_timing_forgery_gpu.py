"""The timing attacks of `tests/redteam/test_timing_forgery.py` in their GPU form (docs/anti-cheating.md, cheats 23-25): on a GPU
the runner reports CUDA-event times, so a forged clock rewrites the event reading instead of the wall clock; the
hidden-work attacks are the same code. The judge's clock around each batch must catch each one or leave it no
faster than the honest control.

    python -m pytest tests/gpu/test_timing_forgery_gpu.py -q
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import workbench as wb

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "redteam"))
import test_timing_forgery as cpu_forms  # noqa: E402

pytestmark = pytest.mark.gpu

#: A 0.2 ms softmax on an H100: long enough for the judge's clock to tell, short enough to time quickly.
SIZE = {"batch_size": 4096, "dim": 4096}

# The runner's event reading, reached through an assembled module name and divided by 24.
SLOW_EVENT_CLOCK = '''
_t = __import__("work" + "bench.eval.wire.timed_loop", fromlist=["x"])
_real = _t._elapsed
_t._elapsed = lambda a, b: _real(a, b) / 24
'''

FRAME_WALK_EVENTS = '''
f = _get()
while f is not None:
    g = getattr(f, "f_" + "globals")
    if "_elapsed" in g and not g.get("_kwb_forged"):
        real = g["_elapsed"]
        g["_elapsed"] = lambda a, b: real(a, b) / 8
        g["_kwb_forged"] = True
    f = getattr(f, "f_" + "back")
'''


def evaluate(cand: wb.Candidate) -> wb.Result:
    return wb.evaluate(wb.get_task("softmax"), cand, device="cuda", size=SIZE)


@pytest.fixture(scope="module")
def honest() -> wb.Result:
    res = evaluate(cpu_forms.candidate())
    assert res.status == "ok" and res.speedup is not None, res.message
    return res


@pytest.mark.parametrize("prelude,forward", [
    (SLOW_EVENT_CLOCK, ""),
    (cpu_forms.REWRITE_TIMING_FRAMES, ""),
    (cpu_forms.FRAME_WALK_GLOBALS, FRAME_WALK_EVENTS),
    (cpu_forms.PRECOMPUTE_BATCH, cpu_forms.PRECOMPUTE_FORWARD),
    (cpu_forms.COPY_OUT_WORK, cpu_forms.COPY_OUT_FORWARD),
    (cpu_forms.SAMPLED_VALUE_CACHE, cpu_forms.SAMPLED_VALUE_FORWARD),
], ids=["event-clock", "channel-frames", "frame-walk-events", "precompute-batch", "copy-out", "sampled-cache"])
def test_a_forged_or_hidden_time_fools_nothing_on_a_gpu(prelude, forward, honest):
    res = evaluate(cpu_forms.candidate(prelude, forward))
    if prelude is cpu_forms.SAMPLED_VALUE_CACHE and res.status == "runtime_error":
        # Never a hit, so the cache keeps a 64 MiB output per timed call until the GPU is full (seen on an H100):
        # the attack ends itself, gaining nothing.
        assert "out of memory" in res.message, res.message
        return
    cpu_forms.caught_or_no_faster(res, honest, {"timer-patch", "result-cache", "lazy-output", "module-cache"})
    print(f"{res.status} {res.flags} speedup {res.speedup} (honest {honest.speedup:.2f})")


def test_an_address_keyed_cache_is_caught_on_a_gpu():
    res = evaluate(cpu_forms.candidate(cpu_forms.ADDRESS_CACHE, cpu_forms.ADDRESS_FORWARD))
    assert res.status == "rejected" and "result-cache" in res.flags, (res.status, res.flags, res.message)
