"""Dispatch modes without Dynamo's import: the FLOP count and the op record leave `torch._dynamo` unloaded, and once
something imports it they run under torch's own guard, through the same function (what the runner seals), with
Dynamo compiling around them as it does around torch's guard alone (each case in a fresh interpreter)."""

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
    raws = [_FlopCounterMode.__dict__["__torch_dispatch__"].__wrapped__, op_record.DISPATCH]
    before = [r.__dynamo_disable for r in raws]
    import torch._dynamo
    from torch._dynamo.utils import counters

    def forward(x):
        y = torch.mm(x, x)
        torch._dynamo.graph_break()
        return y.sin()

    compiled = torch.compile(forward, backend="eager")
    with op_record.recording(torch.nn.Module()) as record:
        compiled(torch.ones(4, 4))
    count = count_work(torch.nn.Linear(4, 4), [torch.zeros(2, 4)])
    print(json.dumps({"ops": record.report().ops, "flops": count["flops"],
                      "same": [r.__dynamo_disable is b for r, b in zip(raws, before)],
                      "breaks": [k.splitlines()[0] for k in counters["graph_break"]]}))
''')


def test_once_dynamo_is_imported_the_modes_keep_their_function_and_record_under_a_compiled_forward():
    seen = _run(AFTER_IMPORT)
    assert seen["same"] == [True, True]
    # As with torch's guard alone, Dynamo leaves the forward under the mode to run as it is: no graph break (one at
    # the record's frame, "Skip calling `torch.compiler.disable()`d function", if Dynamo traced that frame).
    assert seen["breaks"] == []
    assert seen["ops"].get("aten.mm.default") == 1 and seen["ops"].get("aten.sin.default") == 1
    assert seen["flops"] == 2 * 2 * 4 * 4
