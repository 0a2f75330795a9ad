"""Every kernel language on a real GPU: the softmax of benchmarks/candidates/ in each language is ok on the
gallery's large softmax, with a speedup and the coverage of its own kernels; CuTe DSL and Helion need their
packages (`pip install -e '.[cute,helion]'`) and are skipped, with the reason, without them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import workbench as wb
from workbench import languages

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "cheats"))
import gallery  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("language", ["triton", "cuda", "cute", "helion"])
def test_each_language_softmax_is_ok_with_a_speedup_and_its_own_kernels_covering_the_work(language):
    available = languages.get(language).availability("cuda")
    if not available.runs:
        pytest.skip(available.message)
    candidate = wb.Candidate.from_file(ROOT / "benchmarks" / "candidates" / f"softmax_{language}.py")
    assert candidate.language == language
    result = wb.evaluate(gallery.big_task(), candidate, device="cuda", time_it=True, compile_reference=False)
    assert result.status == "ok", result.message
    assert result.timing.clock == "cuda-events" and result.speedup is not None
    assert result.coverage is not None and result.coverage >= 0.9, result.coverage
    assert result.evidence.get("launches") == "corroborated", result.evidence
    if language == "helion":
        assert result.metadata.get("tuned_config"), result.metadata
    print(f"\n{language}: {result.timing.median_ms:.4f} ms, speedup {result.speedup:.2f} "
          f"{result.speedup_ci}, coverage {result.coverage:.2f}, load {result.protocol.get('load_seconds')} s")
