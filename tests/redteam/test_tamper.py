"""docs/anti-cheating.md, cheats 15, 16, 19, 20: tampering with the checker, finding the reference, slowing the reference, and
poisoning what later evaluations trust. None of it can work: the checker, the reference and the timer of the
reference live in the judge, which never runs candidate code; each candidate has a runner of its own; the runner's
filesystem is read-only."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import workbench
import workbench as wb
from redteam.attacks import evaluate, kernel, needs_sandbox, softmax_task


def test_patching_checkers_and_installing_profile_hooks_changes_nothing_for_it_or_the_next_candidate():
    attack = '''
import sys
_c = __import__("work" + "bench.eval.judge.correctness.compare", fromlist=["compare"])  # past the static check, on purpose
_c.compare = lambda *a, **k: None
getattr(sys, "set" + "profile")(lambda *a: None)
def _ok(*a, **k):
    return None
try:
    _t = __import__("work" + "bench.eval.wire.timed_loop", fromlist=["timed_loop"])
    setattr(_t.time_batch, "__co" + "de__", _ok.__code__)
except Exception:
    pass
'''
    res = evaluate(kernel(at_import=attack, in_forward="y = y + 1.0"))
    assert res.status in ("incorrect", "rejected") and "mismatch" in res.flags, res.message
    wrong_next = evaluate(kernel(in_forward="y = y * 1.5"))  # a plain wrong kernel right after
    assert "mismatch" in wrong_next.flags, wrong_next.message


def test_the_reference_and_its_output_are_nowhere_in_the_runner():
    # Search every object, module and frame for the reference model or a tensor holding its result.
    attack = '''
import sys
gc = __import__("g" + "c")
found = [m for m in getattr(sys, "mod" + "ules") if m.startswith("kwb_ref")]
found += [type(o).__name__ for o in getattr(gc, "get_" + "objects")() if type(o).__name__ == "Model"]
f = getattr(sys, "_get" + "frame")()
while f is not None:
    found += [k for k in getattr(f, "f_" + "locals") if k in ("ref_model", "native", "ref64")]
    f = getattr(f, "f_" + "back")
raise RuntimeError(f"FOUND {found}")
'''
    res = evaluate(kernel(in_forward=attack))
    assert res.status == "runtime_error" and "FOUND []" in res.message, res.message


def test_slowing_the_torch_op_the_reference_uses_cannot_buy_a_speedup():
    # Identical code to the reference, plus a patch that would make torch.softmax 4x slower if the reference ran
    # in the same process. The reference runs in the judge: the speedup stays near 1.
    src = '''
import time
import torch
import torch.nn as nn

_softmax = torch.softmax


def _slow(*args, **kwargs):
    t = time.perf_counter()
    out = _softmax(*args, **kwargs)
    while time.perf_counter() - t < 0.002:
        pass
    return out


torch.softmax = _slow
torch.Tensor.softmax = _slow


class ModelNew(nn.Module):
    def forward(self, x):
        return _softmax(x, dim=-1)
'''
    res = wb.evaluate(softmax_task(), wb.Candidate(source=src, language="torch"), device="cpu")
    if res.status == "rejected":  # also no reward: on a loaded host the clock check may see the patched module
        assert "timer-patch" in res.flags, res.message
        return
    assert res.status == "ok", res.message
    assert res.speedup is not None and res.speedup < 2.0, res.speedup


@needs_sandbox
def test_planting_bytecode_and_caches_fails_on_a_read_only_filesystem(tmp_path):
    package = Path(workbench.__file__).parent
    before = sorted(p.name for p in package.rglob("*") if p.is_file())
    attack = f'''
import os, importlib.util
errors = []
for path in [{str(package / "eval" / "__pycache__" / "compare.cpython-311.pyc")!r},
             {str(package / "evil.py")!r}, os.path.expanduser("~/.cache/kernel-workbench/ceilings.json")]:
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write("poison")
        errors.append("WROTE " + path)
    except OSError as exc:
        errors.append(type(exc).__name__)
print("PLANT:", errors, flush=True)
'''
    res = evaluate(kernel(at_import=attack))
    assert res.status == "ok", res.message
    after = sorted(p.name for p in package.rglob("*") if p.is_file())
    assert after == before
    assert not (Path(os.path.expanduser("~")) / ".cache" / "kernel-workbench" / "ceilings.json").read_text(
    ).startswith("poison") if (Path(os.path.expanduser("~")) / ".cache/kernel-workbench/ceilings.json").exists() \
        else True


def test_shrinking_the_runners_own_clock_is_caught_by_the_judges_clock():
    # The runner's timing loop binds its clocks before any candidate is imported; this candidate rebinds them
    # inside the loop's module so every reported time is a tenth of the truth. The judge brackets each timed
    # batch with its own clock, and the time the runner's reports leave unexplained gives it away.
    attack = '''
_t = __import__("work" + "bench.eval.wire.timed_loop", fromlist=["timed_loop"])  # past the static check, on purpose
_real = _t._perf_ns
_start = [None]
def _slow_clock():
    return _real() // 10
_t._perf_ns = _slow_clock
'''
    # 128 rows: each interpreted call takes long enough that the missing time stands out from the noise.
    res = wb.evaluate(softmax_task(), kernel(at_import=attack), device="cpu", size={"batch_size": 128, "dim": 64})
    assert res.status == "rejected" and res.flags == ["timer-patch"], res.message
    assert "judge's clock" in res.message


def test_the_plain_spellings_of_these_attacks_are_rejected_before_anything_runs():
    attacks = ["import workbench.eval.judge.correctness.compare as c\nc.compare = None\n",
               "import sys\nsys.setprofile(lambda *a: None)\n",
               "import gc\nobjs = gc.get_objects()\n",
               "import sys\nframe = sys._getframe().f_back\n"]
    for attack in attacks:
        res = evaluate(kernel(at_import=attack))
        assert res.status == "rejected" and res.flags == ["harness-tamper"], (attack, res.message)
        assert res.protocol.get("runner_pid") is None  # rejected by the static check: no runner was started


_MATMUL = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(SIZE, SIZE), torch.randn(SIZE, SIZE)]


def get_init_inputs():
    return []
'''


def _matmul_task(size: int) -> wb.Task:
    return wb.Task.from_source(_MATMUL.replace("SIZE", str(size)), name=f"cpu_matmul_{size}", sweep={"cpu": [{}]})


def test_more_cpu_threads_than_the_reference_is_thread_use():
    # On the CPU the reference is timed on one thread; a candidate that raises torch's thread count (spelled so the
    # static check misses it) would be "faster" by using the cores the reference was not given.
    src = '''
import torch
import torch.nn as nn

getattr(torch, "set_num" + "_threads")(2)


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)
'''
    res = wb.evaluate(_matmul_task(384), wb.Candidate(source=src, language="torch"), device="cpu")
    assert res.status == "rejected" and res.flags == ["thread-use"], (res.status, res.flags, res.message)
    assert "threads other than the runner's own used" in res.message


def test_a_thread_started_and_joined_inside_forward_on_every_core_is_thread_use():
    # The judge pins the runner to one core while timing; this candidate widens its own affinity again and starts a
    # thread per call that is joined before forward returns. The judge finds the widened affinity after each batch
    # (harness-tamper, and puts the threads back), and the CPU time it reads from /proc (or a thread still exiting
    # when it looks) shows the second core (thread-use).
    src = '''
import torch
import torch.nn as nn

_threading = __import__("thre" + "ading")
_os = __import__("o" + "s")


class ModelNew(nn.Module):
    def forward(self, a, b):
        half = a.shape[0] // 2
        out = torch.empty(a.shape[0], b.shape[1])
        def low():
            torch.matmul(a[:half], b, out=out[:half])
        getattr(_os, "sched_set" + "affinity")(0, range(_os.cpu_count()))
        worker = getattr(_threading, "Thr" + "ead")(target=low)
        worker.start()
        torch.matmul(a[half:], b, out=out[half:])
        worker.join()
        return out
'''
    res = wb.evaluate(_matmul_task(768), wb.Candidate(source=src, language="torch"), device="cpu")
    assert res.status == "rejected" and set(res.flags) == {"thread-use", "harness-tamper"}, (res.status, res.flags,
                                                                                            res.message)
    assert "cores during a timed batch" in res.message or "threads other than the runner's own" in res.message


def test_a_single_threaded_candidate_is_not_mistaken_for_one_that_uses_more_cores():
    src = '''
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)
'''
    res = wb.evaluate(_matmul_task(768), wb.Candidate(source=src, language="torch"), device="cpu")
    assert res.status == "ok", res.message
    assert 0.8 < res.speedup < 1.25, res.speedup


_NEUTER_RECORD = {
    "count": '''
_r = __import__("work" + "bench.eval.runner.op_record", fromlist=["x"])
_r._State.count = lambda self, name: None
''',
    "dispatch-cache": '''
_r = __import__("work" + "bench.eval.runner.op_record", fromlist=["x"])
_raw = vars(_r._DispatchRecord)["__torch_dispatch__"].__wrapped__
def _quiet(self, func, types, args=(), kwargs=None):
    if args and args[0] is _r._PROBE[0]:
        self.state.probe_seen = True
    return func(*args, **(kwargs or {}))
setattr(_raw, "__dynamo" + "_disable", _quiet)
''',
}


@pytest.mark.parametrize("route", sorted(_NEUTER_RECORD))
def test_silencing_the_record_of_what_torch_ran_does_not_clear_torch_compute_in_forward(route):
    """On the CPU a complete, clean record of the dispatcher clears a static `torch-compute-in-forward` finding; a
    candidate that stops the record from counting (its counter, or the function torch's guard calls) while torch
    does the work (log_softmax, whose softmax the kernel merely repeats) is caught by the seal, never passed."""
    source = kernel(at_import=_NEUTER_RECORD[route]).source.replace(
        "        x = x.contiguous()\n", "        x = torch.log_softmax(x, dim=-1).contiguous()\n")
    res = evaluate(wb.Candidate(source=source, language="triton"))
    assert res.status == "rejected", (res.status, res.flags, res.message)
    assert {"harness-tamper", "torch-compute-in-forward"} & set(res.flags), res.flags
