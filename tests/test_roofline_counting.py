"""Work counting: every built-in task's formulas against the reference counted by torch, hand formulas on tasks
defined here, the worker-side count, and the Nsight Compute CSV reader."""

from __future__ import annotations

import json
import os
import stat
import sys
import textwrap
import time

import pytest
import torch

import workbench as wb
from roofline import ncu
from roofline.counting import Work, count, count_reference, count_work, minimal_bytes, tensor_nbytes

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"

LINEAR = HEADER + textwrap.dedent('''
    B = 8
    K = 16
    N = 4


    class Model(nn.Module):
        def __init__(self, k, n):
            super().__init__()
            self.fc = nn.Linear(k, n)

        def forward(self, x):
            return self.fc(x)


    def get_inputs():
        return [torch.randn(B, K)]


    def get_init_inputs():
        return [K, N]
''')

BROADCAST = HEADER + textwrap.dedent('''
    R = 32
    D = 64
    dtype = torch.float32


    class Model(nn.Module):
        def forward(self, x, row, x_again):
            return x * row + x_again


    def get_inputs():
        x = torch.randn(R, D, dtype=dtype)
        return [x, torch.randn(1, D, dtype=dtype).expand(R, D), x]


    def get_init_inputs():
        return []
''')

CONV = HEADER + textwrap.dedent('''
    N = 2
    C = 3
    O = 5
    H = 10
    W = 12


    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(C, O, 3, padding=1, bias=False)

        def forward(self, x):
            return self.conv(x)


    def get_inputs():
        return [torch.randn(N, C, H, W)]


    def get_init_inputs():
        return []
''')

ATTENTION = HEADER + textwrap.dedent('''
    B = 2
    H = 3
    S = 16
    D = 8


    class Model(nn.Module):
        def forward(self, q, k, v):
            return F.scaled_dot_product_attention(q, k, v)


    def get_inputs():
        return [torch.randn(B, H, S, D) for _ in range(3)]


    def get_init_inputs():
        return []
''')

DATA_DEPENDENT = HEADER + textwrap.dedent('''
    N = 1000


    class Model(nn.Module):
        def forward(self, x):
            return x[x > 0].sum()


    def get_inputs():
        return [torch.randn(N)]


    def get_init_inputs():
        return []
''')


# ---- tasks defined here, checked against hand formulas -------------------------------------------------

def test_linear_counts_matmul_flops_and_reads_its_weights():
    task = wb.Task.from_source(LINEAR, name="linear")
    for b, k, n in [(8, 16, 4), (3, 40, 7)]:
        w = count_reference(task, {"B": b, "K": k, "N": n})
        assert w.flops == 2 * b * k * n  # the bias add is not a matmul: torch's counter leaves it out
        assert w.bytes == (b * k + k * n + n + b * n) * 4  # x, weight, bias read; y written
        assert w.source == "counted" and w.details["mode"] == "fake"


def test_broadcast_views_and_repeated_inputs_are_read_once():
    task = wb.Task.from_source(BROADCAST, name="bcast")
    w = count_reference(task, {"R": 32, "D": 64})
    assert w.flops is None  # elementwise ops are not in FlopCounterMode: a task formula must give them
    assert w.bytes == (32 * 64 + 64 + 32 * 64) * 4  # x once (passed twice), the expanded row once, out
    assert count_reference(task, {"R": 32, "D": 64, "dtype": "float16"}).bytes == w.bytes / 2
    row = torch.randn(1, 64).expand(32, 64)
    assert tensor_nbytes(row) == 64 * 4 and tensor_nbytes(torch.empty(0, 3)) == 0
    x = torch.randn(4, 4)
    assert minimal_bytes([x, x, x.view(16)], [x[:2]]) == 64 + 64 + 32


def test_conv_and_attention_flops_match_hand_formulas():
    conv = wb.Task.from_source(CONV, name="conv")
    w = count_reference(conv, {})
    outputs = 2 * 5 * 10 * 12
    assert w.flops == 2 * outputs * 3 * 3 * 3
    assert w.bytes == (2 * 3 * 10 * 12 + 5 * 3 * 3 * 3 + outputs) * 4
    att = wb.Task.from_source(ATTENTION, name="sdpa")
    w = count_reference(att, {"S": 16})
    assert w.flops == 4 * 2 * 3 * 16 * 16 * 8  # q @ k^T and p @ v, also on the CPU's flash path
    assert w.bytes == 4 * 2 * 3 * 16 * 8 * 4


def test_gpu_sizes_are_counted_without_computing():
    task = wb.Task.from_source(LINEAR, name="linear_big")
    started = time.perf_counter()
    w = count_reference(task, {"B": 65536, "K": 16384, "N": 16384})  # 70 TFLOP, 5 GB: shapes only
    assert time.perf_counter() - started < 10
    assert w.flops == 2 * 65536 * 16384 * 16384
    assert w.bytes == (65536 * 16384 + 16384 * 16384 + 16384 + 65536 * 16384) * 4


def test_data_dependent_reference_falls_back_to_running_only_when_small():
    task = wb.Task.from_source(DATA_DEPENDENT, name="masked_sum")
    w = count_reference(task, {"N": 1000})
    assert w.details["mode"] == "real" and w.bytes == 1000 * 4 + 4
    with pytest.raises(wb.TaskError, match="formulas"):
        count_reference(task, {"N": 200_000_000})


def test_count_prefers_task_formulas_and_says_where_numbers_came_from():
    formulas = wb.Task.from_source(LINEAR, name="lin_f", flops=lambda s: 1.0, bytes=lambda s: 2.0)
    assert count(formulas, {"B": 8}) == Work(1.0, 2.0, "task")
    half = wb.Task.from_source(LINEAR, name="lin_h", flops=lambda s: 123.0)
    w = count(half, {"B": 8, "K": 16, "N": 4})
    assert w.flops == 123.0 and w.bytes == (8 * 16 + 16 * 4 + 4 + 8 * 4) * 4 and w.source == "task+counted"
    assert w.details["counted_flops"] == 2 * 8 * 16 * 4
    counted = count(wb.Task.from_source(LINEAR, name="lin_c"), {"B": 8, "K": 16, "N": 4})
    assert counted.source == "counted" and counted.intensity == pytest.approx(counted.flops / counted.bytes)


def test_worker_count_on_real_tensors_equals_the_fake_count():
    task = wb.Task.from_source(LINEAR, name="lin_w")
    size = {"B": 8, "K": 16, "N": 4}
    ref = task.load()
    model = ref.module.Model(*ref.init_inputs(size, 0))
    real = count_work(model, ref.make_inputs(size, 1))
    fake = count_reference(task, size)
    assert real == {"flops": fake.flops, "bytes": fake.bytes}


# ---- every built-in task: its formulas against the counted reference ---------------------------------

def _hand_flops(name: str, counted: float | None, size: dict) -> float | None:
    """What each built-in's formula should say given torch's count of the reference (None: no relation known)."""
    s = wb.get_task(name)
    if name == "matmul":
        return counted
    if name == "conv2d":  # multiply-adds (counted) plus one bias add per output element
        from workbench.tasks._builtin import module_defaults, size_namespace
        from workbench.tasks.conv2d import _out

        ns = size_namespace(module_defaults(s.source.split("# ====")[0]), size)
        return counted + ns.batch_size * ns.out_channels * _out(ns.height, ns) * _out(ns.width, ns)
    if name == "attention":  # causal: only the lower triangle (with the diagonal) is useful work
        seq = size.get("seq_len", 2048)
        return counted * (seq + 1) / (2 * seq)
    return None


@pytest.mark.parametrize("name", wb.tasks())
def test_builtin_task_formulas_match_the_reference(name):
    task = wb.get_task(name)
    assert task.flops is not None and task.bytes is not None, "built-in tasks carry their own formulas"
    for preset in ("cpu", "gpu"):
        size = task.size(preset)
        counted = count_reference(task, size)
        assert task.bytes(size) == counted.bytes, f"{name} {size}: formula bytes != inputs + outputs"
        expected = _hand_flops(name, counted.flops, size)
        if expected is not None:
            assert task.flops(size) == pytest.approx(expected, rel=1e-12), size
        elif counted.flops is not None:  # a new task with matmuls: its formula may only drop redundant work
            assert 0.4 * counted.flops <= task.flops(size) <= 1.1 * counted.flops
        else:
            assert task.flops(size) > 0


# ---- Nsight Compute output ---------------------------------------------------------------------------

COLUMNS = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
           '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value","Rule Name","Rule Type",'
           '"Rule Description","Estimated Speedup Type","Estimated Speedup"')


def _row(kid: str, kernel: str, metric: str, unit: str, value: str) -> str:
    return (f'"{kid}","4242","python3","127.0.0.1","{kernel}","1","7","(128, 1, 1)","(8192, 1, 1)","0","9.0",'
            f'"Command line profiler metrics","{metric}","{unit}","{value}","","","","",""')


# What `ncu --csv --metrics ...` prints: the profiled program's own output first, then one row per
# kernel launch x metric; values carry thousands separators; an unsupported metric reads "n/a".
NCU_LONG = "\n".join([
    "==PROF== Connected to process 4242 (/usr/bin/python3.12)",
    "softmax ready: 8192 x 8192",
    '"quoted program output that is not the table"',
    "==PROF== Profiling \"softmax_kernel\" - 0: 0%....50%....100% - 9 passes",
    "==PROF== Disconnected from process 4242",
    COLUMNS,
    _row("0", "softmax_kernel", "dram__bytes.sum", "Gbyte", "0.54"),
    _row("0", "softmax_kernel", "gpu__time_duration.sum", "usecond", "185.50"),
    _row("0", "softmax_kernel", "sm__sass_thread_inst_executed_op_ffma_pred_on.sum", "inst", "1,048,576"),
    _row("0", "softmax_kernel", "sm__sass_thread_inst_executed_op_fadd_pred_on.sum", "inst", "500"),
    _row("0", "softmax_kernel", "sm__sass_thread_inst_executed_op_hfma_pred_on.sum", "inst", "0"),
    _row("0", "softmax_kernel", "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active", "%", "n/a"),
    _row("1", "softmax_kernel", "dram__bytes.sum", "Mbyte", "536.87"),
    _row("1", "softmax_kernel", "gpu__time_duration.sum", "nsecond", "184,000"),
    _row("1", "softmax_kernel", "sm__sass_thread_inst_executed_op_fmul_pred_on.sum", "inst", "2,000"),
])

NCU_RAW = "\n".join([
    "==PROF== Connected to process 7",
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
    '"Device","CC","dram__bytes_read.sum","dram__bytes_write.sum","gpu__time_duration.sum"',
    '"","","","","","","","","","","","Mbyte","Kbyte","msecond"',
    '"0","7","python3","h","layernorm_fwd","1","7","(256, 1, 1)","(8192, 1, 1)","0","9.0","268.44","268,435.46","0.19"',
    '"1","7","python3","h","matmul_kernel","1","7","(128, 1, 1)","(1024, 1, 1)","0","9.0","100","n/a","0.25"',
])


def test_ncu_long_csv_gives_bytes_seconds_and_flops_per_launch():
    first, second = ncu.parse_csv(NCU_LONG)
    assert first.name == second.name == "softmax_kernel" and (first.launch_id, second.launch_id) == ("0", "1")
    assert first.dram_bytes == pytest.approx(0.54e9) and first.seconds == pytest.approx(185.5e-6)
    assert first.fp_ops == 2 * 1_048_576 + 500  # fma = 2 FLOPs, add = 1
    assert "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active" not in first.metrics  # n/a
    assert second.dram_bytes == pytest.approx(536.87e6) and second.seconds == pytest.approx(184e-6)
    assert second.fp_ops == 2000
    total = ncu.summarize([first, second])
    assert total["launches"] == 2 and total["kernels"] == {"softmax_kernel": 2}
    assert total["seconds"] == pytest.approx(369.5e-6) and total["dram_bytes"] == pytest.approx(0.54e9 + 536.87e6)


def test_ncu_raw_page_csv_with_a_unit_row():
    ln, mm = ncu.parse_csv(NCU_RAW)
    assert ln.name == "layernorm_fwd" and ln.dram_bytes == pytest.approx(268.44e6 + 268435.46e3)
    assert ln.seconds == pytest.approx(0.19e-3)
    assert mm.metrics["dram__bytes_read.sum"] == pytest.approx(100e6) and mm.dram_bytes is None  # write was n/a
    assert ncu.parse_csv("no table here\n") == []


@pytest.fixture
def fake_ncu(tmp_path, monkeypatch):
    """A stand-in `ncu` executable behaving like ncu on a pre-Hopper GPU: it rejects the Hopper-only gmma
    metric, otherwise prints the captured table; it logs each command line it was given."""
    log = tmp_path / "calls.jsonl"
    script = tmp_path / "ncu"
    script.write_text(textwrap.dedent(f"""\
        #!{sys.executable}
        import json, sys
        args = sys.argv[1:]
        with open({str(log)!r}, "a") as fh:
            fh.write(json.dumps(args) + "\\n")
        metrics = args[args.index("--metrics") + 1]
        if "gmma" in metrics:
            print("==ERROR== Failed to find metric sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
                  file=sys.stderr)
            sys.exit(1)
        print({NCU_LONG!r})
    """))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    return log


def test_run_ncu_drops_metrics_the_gpu_lacks_and_retries(fake_ncu):
    kernels = ncu.profile_script(["bench.py", "softmax"], kernel_regex="softmax")
    assert [k.launch_id for k in kernels] == ["0", "1"]
    calls = [json.loads(line) for line in fake_ncu.read_text().splitlines()]
    assert len(calls) == 2
    first, retry = calls
    assert "--clock-control" in first and first[first.index("--clock-control") + 1] == "none"
    assert "regex:softmax" in first and first[-2:] == ["bench.py", "softmax"]
    dropped = set(first[first.index("--metrics") + 1].split(",")) - set(retry[retry.index("--metrics") + 1].split(","))
    assert dropped == {"sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active"}


def test_without_ncu_the_error_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert not ncu.available()
    with pytest.raises(ncu.NcuError, match="not on PATH"):
        ncu.profile_function("json:dumps")
    with pytest.raises(ncu.NcuError, match="module:function"):
        ncu.profile_function("no_colon")
