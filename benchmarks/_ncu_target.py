"""Runs one built-in task's reference solution a few times at its GPU size (the program ncu profiles)."""

from __future__ import annotations

import sys

import torch

import workbench as wb
from workbench.eval.runner.loading import load_candidate

task = wb.get_task(sys.argv[1])
size = task.size("gpu")
ref = task.load()
module, cls = load_candidate(task.solution_candidate().to_spec(), "cuda")
model = cls(*ref.init_inputs(size, 0)).cuda()
inputs = ref.make_inputs(size, 1, "cuda")
with torch.no_grad():
    for _ in range(int(sys.argv[2]) if len(sys.argv) > 2 else 5):
        model(*inputs)
torch.cuda.synchronize()
