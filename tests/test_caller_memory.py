"""The caller stays light: evaluating a candidate adds little to the user's process, and the roofline ceilings are
measured and cached by the judge, not by the notebook (issue 16)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Most the caller's memory may grow over one evaluation (resident now and at its peak).
GROWTH_LIMIT_MIB = 50

_SCRIPT = r"""
import json, resource, sys
import torch
import workbench as wb

def rss_mib():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS")) / 1024

task = wb.get_task("softmax")
src = ("import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
       "        return torch.softmax(x, dim=-1)\n")
before, peak_before = rss_mib(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
result = wb.evaluate(task, wb.Candidate(source=src, language="torch"), device="cpu")
after, peak_after = rss_mib(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"status": result.status, "message": result.message, "clock": result.timing.clock,
                  "roof": result.metadata.get("roof"), "sol": result.sol_fraction, "growth": after - before,
                  "peak_growth": peak_after - peak_before, "triton": "triton" in sys.modules}))
"""


def test_an_honest_torch_evaluation_grows_the_caller_by_at_most_50_mib_and_the_judge_caches_the_ceilings(tmp_path):
    cache = tmp_path / "cache"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KWB_CACHE_DIR": str(cache)}
    out = subprocess.run([sys.executable, "-c", _SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["clock"] == "wall", got["message"]  # timed (the verdict itself is not what this test is about)
    # A wall-clock result on the CPU is judged on the CPU's measured ceilings: the judge measured them and wrote
    # the cache (the caller never imported triton, which keying that cache needs).
    assert got["roof"] and got["roof"].startswith("cpu") and got["sol"] is not None and got["sol"] > 0
    assert len(list((cache / "ceilings").glob("*.json"))) == 1
    assert not got["triton"], "the caller imported triton"
    assert got["growth"] <= GROWTH_LIMIT_MIB, f"the caller grew by {got['growth']:.0f} MiB"
    assert got["peak_growth"] <= GROWTH_LIMIT_MIB, f"the caller's peak grew by {got['peak_growth']:.0f} MiB"
