"""Sweeps as data: constant rewriting, grids, best-config selection."""

from __future__ import annotations

import pandas as pd
import pytest

from workbench.errors import CandidateError
from workbench.study.sweep import Sweep, best_config, module_constant_values, with_constants

TEMPLATE = """import triton
BLOCK = 256
NUM_WARPS = 4  # tuned
NAME = "x"

def f():
    BLOCK = 3  # a local, not the knob
    return BLOCK
"""


def test_with_constants_rewrites_only_top_level_assignments():
    out = with_constants(TEMPLATE, BLOCK=64, NUM_WARPS=8)
    values = module_constant_values(out)
    assert values["BLOCK"] == 64 and values["NUM_WARPS"] == 8 and values["NAME"] == "x"
    assert "    BLOCK = 3  # a local, not the knob" in out
    assert out.count("\n") == TEMPLATE.count("\n")


def test_unknown_knob_names_the_templates_constants():
    with pytest.raises(CandidateError, match="BLOCK_M.*BLOCK, NAME, NUM_WARPS"):
        with_constants(TEMPLATE, BLOCK_M=32)


def test_sweep_configs_candidates_and_validity_filter():
    sweep = Sweep(TEMPLATE, {"BLOCK": [64, 128, 512], "NUM_WARPS": [2, 4]}, name="t",
                  valid=lambda c: c["BLOCK"] <= 128, language="triton")
    configs = sweep.configs()
    assert len(configs) == 4 and all(c["BLOCK"] <= 128 for c in configs)
    cand = sweep.candidate({"BLOCK": 64, "NUM_WARPS": 2})
    assert cand.name == "t[BLOCK=64,NUM_WARPS=2]"
    assert module_constant_values(cand.source)["BLOCK"] == 64
    assert cand.metadata["config"] == {"BLOCK": 64, "NUM_WARPS": 2}
    assert cand.id != sweep.candidate({"BLOCK": 128, "NUM_WARPS": 2}).id


def test_best_config_is_the_fastest_correct_one():
    frame = pd.DataFrame([
        {"BLOCK": 64, "status": "ok", "time_ms": 2.0},
        {"BLOCK": 128, "status": "incorrect", "time_ms": 0.1},
        {"BLOCK": 256, "status": "ok", "time_ms": 1.5},
    ])
    assert best_config(frame, ["BLOCK"]) == {"BLOCK": 256, "time_ms": 1.5}
    assert best_config(frame[frame.status != "ok"], ["BLOCK"]) is None
