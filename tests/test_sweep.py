"""Sweeps as data: knobs found in and written into kernel sources (constants, launch parameters, variables),
grids, best-config selection, and a real two-knob sweep of the built-in softmax solution on the CPU."""

from __future__ import annotations

import ast

import pandas as pd
import pytest

from workbench.errors import CandidateError
from workbench.study.sweep import (
    RESULT_COLUMNS,
    Sweep,
    best_config,
    knobs,
    module_constant_values,
    run_sweep,
    suggest_grid,
    ties_with_best,
    with_constants,
    with_knobs,
)
from workbench.tasks.task import get_task

TEMPLATE = """import triton
BLOCK = 256
NUM_WARPS = 4  # tuned
NAME = "x"

def f():
    BLOCK = 3  # a local, not the knob
    return BLOCK
"""


def solution(task: str) -> str:
    return get_task(task).solution_candidate().source


def changed_lines(before: str, after: str) -> list[tuple[str, str]]:
    assert len(before.splitlines()) == len(after.splitlines())
    return [(a.strip(), b.strip()) for a, b in zip(before.splitlines(), after.splitlines(), strict=True) if a != b]


def test_with_constants_rewrites_only_top_level_values_and_keeps_comments():
    out = with_constants(TEMPLATE, BLOCK=64, NUM_WARPS=8)
    values = module_constant_values(out)
    assert values["BLOCK"] == 64 and values["NUM_WARPS"] == 8 and values["NAME"] == "x"
    assert "NUM_WARPS = 8  # tuned" in out and "    BLOCK = 3  # a local, not the knob" in out
    assert out.count("\n") == TEMPLATE.count("\n")


def test_unknown_constant_names_the_templates_constants():
    with pytest.raises(CandidateError, match="BLOCK_M.*BLOCK, NAME, NUM_WARPS"):
        with_constants(TEMPLATE, BLOCK_M=32)


def test_softmax_launch_parameters_are_knobs_without_editing_the_solution():
    src = solution("softmax")
    found = knobs(src)
    assert found["BLOCK"].kind == "launch" and "softmax_row_kernel" in found["BLOCK"].where
    assert found["num_warps"].kind == "launch" and found["block"].kind == "variable"
    out = with_knobs(src, BLOCK=512, num_warps=2)
    assert changed_lines(src, out) == [
        ("softmax_row_kernel[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=block, num_warps=warps)",
         "softmax_row_kernel[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=512, num_warps=2)"),
        ("softmax_looped_kernel[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=max_block // 4,",
         "softmax_looped_kernel[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=512,"),
        ("num_warps=8 if x.is_cuda else 4)", "num_warps=2)"),
    ]
    one = with_knobs(src, **{"softmax_looped_kernel.BLOCK": 128})  # one kernel's launches only
    assert changed_lines(src, one)[0][1].endswith("BLOCK=128,") and len(changed_lines(src, one)) == 1
    assert suggest_grid(src) == {"BLOCK": [256, 512, 1024], "num_warps": [2, 4]}


def test_a_block_size_that_sizes_the_grid_is_swept_through_its_variable():
    src = solution("vector_add")
    assert knobs(src)["block"].sizes_grid and suggest_grid(src) == {"block": [128, 256, 512], "num_warps": [2, 4]}
    out = with_knobs(src, block=128, num_stages=2)
    assert changed_lines(src, out) == [
        ("block = 4096 if a.is_cuda else 256", "block = 128"),
        ("add_kernel[(triton.cdiv(n, block),)](a, b, out, n, BLOCK=block, num_warps=8 if a.is_cuda else 4)",
         "add_kernel[(triton.cdiv(n, block),)](a, b, out, n, BLOCK=block, num_warps=8 if a.is_cuda else 4, "
         "num_stages=2)"),
    ]


def test_star_kwargs_and_tuple_unpacking_are_overridden_not_edited():
    matmul = solution("matmul")
    out = with_knobs(matmul, BLOCK_M=64, num_stages=2)
    assert "**{**cfg, 'BLOCK_M': 64, 'num_stages': 2})" in out
    ast.parse(out)
    attention = solution("attention")
    out = with_knobs(attention, block_m=32)
    lines = out.splitlines()
    overrides = [i for i, line in enumerate(lines) if line.strip() == "block_m = 32"]
    assert len(overrides) == 2 and all(lines[i - 1].lstrip().startswith("block_m, block_n") for i in overrides)
    ast.parse(out)


def test_bad_knobs_say_what_the_kernel_offers():
    src = solution("softmax")
    with pytest.raises(CandidateError, match=r"no knob 'BLOKC'.*BLOCK \(launch parameter of softmax_row_kernel"):
        with_knobs(src, BLOKC=64)
    with pytest.raises(CandidateError, match="no launch of a kernel named 'nope'"):
        with_knobs(src, **{"nope.BLOCK": 64})
    with pytest.raises(CandidateError, match="rewrite the same code"):
        with_knobs(src, BLOCK=64, **{"softmax_row_kernel.BLOCK": 128})
    with pytest.raises(CandidateError, match="does not parse"):
        knobs("def broken(:\n")
    with pytest.raises(CandidateError, match="no configs"):
        Sweep(src, {"BLOCK": []}).check()


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
        {"BLOCK": 512, "status": "ok", "time_ms": float("nan")},
    ])
    assert best_config(frame, ["BLOCK"]) == {"BLOCK": 256, "time_ms": 1.5}
    assert best_config(frame[frame.status != "ok"], ["BLOCK"]) is None


def test_ties_count_configs_whose_ci_overlaps_the_best():
    frame = pd.DataFrame([
        {"BLOCK": 64, "status": "ok", "time_ms": 2.0, "ci95_low_ms": 1.7, "ci95_high_ms": 2.4},
        {"BLOCK": 128, "status": "incorrect", "time_ms": 0.1, "ci95_low_ms": 0.05, "ci95_high_ms": 0.2},
        {"BLOCK": 256, "status": "ok", "time_ms": 1.5, "ci95_low_ms": 1.4, "ci95_high_ms": 1.8},
        {"BLOCK": 512, "status": "ok", "time_ms": 3.0, "ci95_low_ms": 2.9, "ci95_high_ms": 3.1},
    ])
    assert ties_with_best(frame) == 1  # 64's CI [1.7, 2.4] reaches into the best's [1.4, 1.8]; 512's does not
    assert ties_with_best(frame.assign(ci95_high_ms=[2.4, 0.2, 1.6, 3.1])) == 0
    assert ties_with_best(frame.iloc[:2]) == 0  # one correct config: nothing to tie with
    assert ties_with_best(frame.drop(columns=["ci95_low_ms", "ci95_high_ms"])) == 0


def test_two_knob_sweep_of_the_softmax_solution_on_cpu():
    """BLOCK is the row kernel's width: 128 cannot hold a 200-wide row, so those configs must fail and keep
    their rows; 256 passes whatever num_warps (which the interpreter ignores)."""
    task = get_task("softmax")
    sweep = Sweep(solution("softmax"), {"BLOCK": [128, 256], "num_warps": [2, 4]}, name="softmax")
    seen = []
    frame = run_sweep(task, sweep, device="cpu", size={"batch_size": 4, "dim": 200}, record=seen.append,
                      progress=False)
    assert list(frame.columns) == ["BLOCK", "num_warps", *RESULT_COLUMNS]
    assert [(r.BLOCK, r.num_warps) for r in frame.itertuples()] == [(128, 2), (128, 4), (256, 2), (256, 4)]
    assert list(frame["status"])[2:] == ["ok", "ok"], frame[["status", "flags"]]
    for flags in frame["flags"][:2]:  # the row's tail was never written: caught however the engine names it
        assert {"unwritten-output", "mismatch"} & set(flags), flags
    assert len(seen) == 4 and seen[2].candidate_name == "softmax[BLOCK=256,num_warps=2]"
    ok = frame[frame.status == "ok"]
    assert (ok["ci95_low_ms"] <= ok["time_ms"]).all() and (ok["time_ms"] <= ok["ci95_high_ms"]).all()
    assert set(ok["clock"]) == {"interpreter"}
    best = best_config(frame, ["BLOCK", "num_warps"])
    assert best["BLOCK"] == 256 and best["time_ms"] == ok["time_ms"].min()
