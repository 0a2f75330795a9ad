"""`kwb eval --precision/--level/--policy`: the CLI can say everything the Python API can about a task's policies,
and a registered task is never changed in the registry."""

from __future__ import annotations

from pathlib import Path

import pytest

import workbench as wb
from workbench.cli.common import UsageError
from workbench.cli.eval import load_task_arg
from workbench.cli.main import build_parser

KB = Path(__file__).parent / "kernelbench"


def test_the_eval_command_takes_precision_level_and_policy():
    args = build_parser().parse_args(["eval", "k.py", "--task", "softmax", "--precision", "tf32", "--level", "2",
                                      "--policy", "partial"])
    assert (args.precision, args.level, args.policy) == ("tf32", 2, "partial")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["eval", "k.py", "--task", "softmax", "--precision", "tf64"])


def test_a_registered_task_gets_its_policies_overridden_in_a_copy():
    task = load_task_arg("softmax", precision="tf32", policy="partial")
    assert (task.precision.name, task.kernel_policy) == ("tf32", "partial")
    assert (wb.get_task("softmax").precision.name, wb.get_task("softmax").kernel_policy) == ("ieee", "strict")
    with pytest.raises(UsageError, match="--level applies to KernelBench files"):
        load_task_arg("softmax", level=1)


def test_a_kernelbench_file_takes_its_level_policy_and_precision():
    path = KB / "level1" / "12_Mean_last_dim.py"
    assert load_task_arg(str(path)).kernel_policy == "strict"
    assert load_task_arg(str(path), level=2).kernel_policy == "partial"
    task = load_task_arg(str(path), level=2, policy="strict", precision="tf32")
    assert (task.kernel_policy, task.precision.name) == ("strict", "tf32")
