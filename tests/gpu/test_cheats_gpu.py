"""The whole adversarial gallery on a GPU: compiled Triton, CUDA-event timing, profiler coverage, side streams
and the roofline. Prints the gallery table (run with -s):

    python -m pytest tests/gpu/test_cheats_gpu.py -s
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from workbench.dispatch.pool import discard_worker

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cheats"))
import gallery  # noqa: E402

pytestmark = pytest.mark.gpu


def _flag_text(flag) -> str:
    return " or ".join(flag) if isinstance(flag, list) else (flag or "-")


@pytest.mark.slow  # nvcc or the whole gallery: outside the 5-minute fast GPU subset
def test_whole_gallery_on_cuda():
    rows, failures = [], []
    try:
        for name in gallery.entries():
            started = time.perf_counter()
            if gallery.missing(name):
                rows.append((name, _flag_text(gallery.expected_flag(name, "cuda")), "skipped", "-", "-", "-", "-",
                             f"SKIPPED: {gallery.missing(name)[:60]}"))
                continue
            # Every entry is timed: profiler coverage, side streams, the result-cache re-check and the roofline
            # only run in the timing phase. torch.compile of the reference is left out: it adds nothing here.
            result = gallery.evaluate(name, "cuda", time_it=True, compile_reference=False)
            problems = gallery.verdict_problems(name, result, "cuda")
            timing = f"{result.timing.median_ms:.4g} ms" if result.timing else "-"
            floor = result.metadata.get("floor_ms")
            rows.append((name, _flag_text(gallery.expected_flag(name, "cuda")), result.status,
                         ",".join(result.flags) or "-", ",".join(result.warnings) or "-",
                         timing + (f" (floor {floor:.3g} ms)" if floor else ""),
                         f"{time.perf_counter() - started:.1f}s", "PASS" if not problems else "FAIL"))
            if problems:
                failures.append(f"{name}: {problems}\n    {result.message[:600]}")
    finally:
        discard_worker("cuda")  # cheats patched timers and started threads in that worker
    header = ("file", "expected flag", "status", "flags", "warnings", "time", "eval", "verdict")
    print("\n| " + " | ".join(header) + " |\n|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    assert not failures, "\n".join(failures)
