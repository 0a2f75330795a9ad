"""Dispatch modes without Dynamo's import: the FLOP count and the op record leave `torch._dynamo` unloaded, and once
something imports it every mode is back under torch's own guard (each case in a fresh interpreter)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

COUNT_AND_RECORD = textwrap.dedent('''
    import json, sys
    import torch
    from roofline.counting import count_work
    from workbench.eval.runner import op_record

    work = count_work(torch.nn.Linear(16, 8), [torch.zeros(4, 16)])
    with op_record.recording(torch.nn.Module()) as record:
        torch.ones(3).sin()
    print(json.dumps({"flops": work["flops"], "ops": record.report().ops,
                      "complete": record.report().complete, "dynamo": "torch._dynamo" in sys.modules}))
''')


def _run(code: str) -> dict:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_flop_count_and_the_op_record_work_without_importing_dynamo():
    seen = _run(COUNT_AND_RECORD)
    assert seen["flops"] == 2 * 4 * 16 * 8
    assert seen["ops"] == {"aten.ones.default": 1, "aten.sin.default": 1} and seen["complete"]
    assert seen["dynamo"] is False


AFTER_IMPORT = textwrap.dedent('''
    import json
    import torch
    from roofline.counting import count_work
    from torch.utils.flop_counter import _FlopCounterMode
    from workbench.eval.runner import op_record

    count_work(torch.nn.Linear(4, 4), [torch.zeros(2, 4)])
    import torch._dynamo

    compiled = torch.compile(lambda x: torch.mm(x, x).sin(), backend="eager")
    with op_record.recording(torch.nn.Module()) as record:
        compiled(torch.ones(4, 4))
    count = count_work(torch.nn.Linear(4, 4), [torch.zeros(2, 4)])
    guards = [_FlopCounterMode.__dict__["__torch_dispatch__"].__wrapped__.__dynamo_disable,
              op_record._DispatchRecord.__dict__["__torch_dispatch__"].__wrapped__.__dynamo_disable]
    print(json.dumps({"ops": record.report().ops, "flops": count["flops"],
                      "torch_guard": [bool(getattr(g, "_torchdynamo_disable", False)) for g in guards]}))
''')


def test_once_dynamo_is_imported_every_mode_is_under_torchs_guard_and_still_records():
    seen = _run(AFTER_IMPORT)
    assert seen["torch_guard"] == [True, True]
    assert seen["ops"].get("aten.mm.default") == 1 and seen["ops"].get("aten.sin.default") == 1
    assert seen["flops"] == 2 * 2 * 4 * 4
