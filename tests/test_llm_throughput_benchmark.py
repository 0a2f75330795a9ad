"""benchmarks/llm_throughput.py runs end to end (tiny latency and counts: its figures are not checked here, only
that it measures all three loops against the local protocol server and prints their rates)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

pytest.importorskip("openai")

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "llm_throughput.py"


def _benchmark():
    spec = importlib.util.spec_from_file_location("llm_throughput", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_benchmark_measures_serial_and_concurrent_loops(capsys):
    code = _benchmark().main(["--latency", "0.3", "--samples", "2", "--candidates", "2", "--no-time"])
    out = capsys.readouterr().out
    assert code in (0, 1), out  # 1: the 4x target missed, as it may be at 0.3 s latency
    rows = {m[0]: m[1:] for m in re.findall(r"^(serial|refine x2|best-of-n)\s+(\d+)\s+\S+\s+(\S+)\s+(\S+)", out, re.M)}
    assert set(rows) == {"serial", "refine x2", "best-of-n"}, out
    assert all(cand == "2" and float(per_min) > 0 for cand, per_min, _ in rows.values()), out
    assert rows["serial"][2] == "1.00" and "target (CPU)" in out
    in_flight = re.search(r"^refine x2 .* (\d+)  \{", out, re.M)
    assert in_flight and in_flight.group(1) == "2", out  # both drafts of the round were asked at once


def test_cuda_without_a_gpu_says_so_in_one_line(capsys):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    assert _benchmark().main(["--device", "cuda"]) == 2
    assert capsys.readouterr().out.strip() == ("llm_throughput: --device cuda needs a CUDA GPU; none is visible. "
                                               "Nothing measured.")
