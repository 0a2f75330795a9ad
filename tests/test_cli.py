"""The real `kwb` entry point in subprocesses: doctor, tasks, flags, eval (good and bad kernels), demo, results;
usage and input mistakes through `main()` in this process (their message and exit status are the point)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import workbench
from workbench.cli.common import size_defaults
from workbench.eval.checks.flags import FLAGS
from workbench.store import Store

# A KernelBench-format problem written for these tests, so they need nothing from the built-in library.
AXPY_TASK = textwrap.dedent("""
    import torch
    import torch.nn as nn

    n = 1 << 20


    class Model(nn.Module):
        def __init__(self):
            super().__init__()

        def forward(self, x, y):
            return 2.0 * x + y


    def get_inputs():
        return [torch.randn(n), torch.randn(n)]


    def get_init_inputs():
        return []
""")

_AXPY_KERNEL = textwrap.dedent("""
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def axpy_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        y = tl.load(y_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, A * x + y, mask=mask)


    class ModelNew(torch.nn.Module):
        def __init__(self):
            super().__init__()

        def forward(self, x, y):
            out = torch.empty_like(x)
            n = x.numel()
            axpy_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
            return out
""")
HONEST = _AXPY_KERNEL.replace("A * x", "2.0 * x")
WRONG = _AXPY_KERNEL.replace("A * x", "3.0 * x")  # compiles, runs, and is wrong everywhere


REPO = Path(__file__).resolve().parents[1]


def _env(*front: Path) -> dict[str, str]:
    # The repo root on the path too, so the tests also run from a checkout that was never pip-installed.
    parts = [str(p) for p in (*front, REPO)] + [os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, parts))}


def kwb(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "workbench.cli.main", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=_env())


@pytest.fixture
def files(tmp_path):
    (tmp_path / "axpy_task.py").write_text(AXPY_TASK)
    (tmp_path / "honest.py").write_text(HONEST)
    (tmp_path / "wrong.py").write_text(WRONG)
    return tmp_path


def test_doctor_reports_versions_and_interpreter_mode(tmp_path):
    text = kwb("doctor", cwd=tmp_path)
    assert text.returncode == 0, text.stderr
    assert f"torch             {torch.__version__}" in text.stdout
    data = json.loads(kwb("doctor", "--json", cwd=tmp_path).stdout)
    assert data["versions"]["torch"] == torch.__version__ and data["versions"]["python"] == sys.version.split()[0]
    names = {e["name"] for e in data["extras"]}
    assert {"jupyterlab", "ipywidgets", "plotly", "papermill", "openai", "anthropic", "dask", "playwright",
            "chromium"} <= names
    assert all(e["install"].split()[0] in ("pip", "apt-get") for e in data["extras"])
    if torch.cuda.is_available():
        assert data["cuda"] and data["interpreter"]["used"] is False
    else:
        assert data["cuda"] == [] and data["interpreter"]["used"] is True
        assert "ON: no CUDA device" in text.stdout and "CUDA devices\n  none" in text.stdout


def test_tasks_and_flags(tmp_path):
    out = kwb("tasks", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    names = workbench.tasks()
    if not names:
        pytest.skip("no built-in tasks registered yet")
    listed = json.loads(kwb("tasks", "--json", cwd=tmp_path).stdout)
    assert [t["name"] for t in listed] == names
    lines = out.stdout.splitlines()
    assert lines[0].split()[:3] == ["name", "dtypes", "cpu"]
    for name in names:
        assert any(line.startswith(name + " ") for line in lines[2:]), name
    softmax = next(t for t in listed if t["name"] == "softmax")
    assert softmax["cpu"] == workbench.get_task("softmax").sizes["cpu"]

    flags = kwb("flags", cwd=tmp_path)
    assert flags.returncode == 0 and flags.stdout.startswith("| flag | severity |")
    assert all(f"`{name}`" in flags.stdout for name in FLAGS)


def test_usage_errors_exit_2(files, kwb_here):
    assert kwb_here(cwd=files).returncode == 2  # no command: help, usage status
    unknown = kwb_here("eval", "--task", "no_such_task", "honest.py", cwd=files)
    assert unknown.returncode == 2 and "unknown task 'no_such_task'" in unknown.stderr
    missing = kwb_here("eval", "--task", "axpy_task.py", "--sizes", "n=64", "nope.py", cwd=files)
    assert missing.returncode == 2 and "nope.py" in missing.stderr
    bad_size = kwb_here("eval", "--task", "axpy_task.py", "--sizes", "n", "honest.py", cwd=files)
    assert bad_size.returncode == 2 and "NAME=VALUE" in bad_size.stderr
    bad_const = kwb_here("eval", "--task", "axpy_task.py", "--sizes", "batch=3", "honest.py", cwd=files)
    assert bad_const.returncode == 2 and "has no size 'batch'; its sizes are n" in bad_const.stderr
    bad_device = kwb_here("eval", "--task", "axpy_task.py", "--device", "tpu", "honest.py", cwd=files)
    assert bad_device.returncode == 2 and "cpu, cuda" in bad_device.stderr
    no_store = kwb_here("results", "--store", "absent.db", cwd=files)
    assert no_store.returncode == 2 and "no results store" in no_store.stderr
    assert not (files / "absent.db").exists()


def _refused(proc: subprocess.CompletedProcess) -> str:
    """A user mistake: exit status 2, one to three lines on stderr, no traceback, nothing on stdout."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and not proc.stdout.strip(), proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert 1 <= len(lines) <= 3, proc.stderr
    return proc.stderr


def test_every_input_mistake_gets_a_short_message_and_exit_2(files, kwb_here):
    (files / "kernel.bin").write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 4)
    (files / "latin1.py").write_bytes("# caf\xe9\nimport torch\n".encode("latin-1"))

    err = _refused(kwb_here("eval", "--task", "vector_add", "kernel.bin", cwd=files))
    assert "candidate file kernel.bin is a binary file, not source text" in err
    err = _refused(kwb_here("eval", "--task", "vector_add", "latin1.py", cwd=files))
    assert "latin1.py is not UTF-8 text (byte 0xe9 at offset 5)" in err
    err = _refused(kwb_here("eval", "--task", "softmax", "--size", "dim=abc", "honest.py", cwd=files))
    dim = size_defaults(workbench.get_task("softmax").source)["dim"]  # the message quotes the task's own default
    assert isinstance(dim, int) and f"--size dim=abc: dim must be a whole number (the task's default is {dim}), " \
        f"e.g. dim={dim}" in err
    err = _refused(kwb_here("eval", "--task", "softmax", "--size", "dimm=64", "honest.py", cwd=files))
    assert "task 'softmax' has no size 'dimm' (did you mean 'dim'?); its sizes are batch_size, dim" in err
    err = _refused(kwb_here("eval", "--task", "softmax", "--size", "batch_size=2.5", "honest.py", cwd=files))
    assert "--size batch_size=2.5: batch_size must be a whole number" in err
    for bad in ("batch_size=-4", "batch_size=0"):  # never a runtime_error blaming get_inputs, never "ok" on nothing
        err = _refused(kwb_here("eval", "--task", "softmax", "--size", bad, "honest.py", cwd=files))
        assert f"--size {bad}: batch_size is a dimension and must be at least 1" in err
    err = _refused(kwb_here("eval", "--task", "softmax", "--size", "tiny", "honest.py", cwd=files))
    assert "bad size 'tiny': give a preset (cpu, gpu) or NAME=VALUE pairs" in err
    err = _refused(kwb_here("eval", "--task", "softmax", "--size", "dtype=int3", "honest.py", cwd=files))
    assert "--size dtype=int3: use one of" in err
    err = _refused(kwb_here("eval", "--task", "axpy_task.py", "--sizes", "n=lots", "honest.py", cwd=files))
    assert "--sizes n=lots: n must be a whole number (the task's default is 1048576), e.g. n=1048576" in err
    err = _refused(kwb_here("eval", "--task", "kernel.bin", "honest.py", cwd=files))
    assert "KernelBench file kernel.bin is a binary file" in err
    err = _refused(kwb_here("eval", "--task", "softmx", "honest.py", cwd=files))
    assert "unknown task 'softmx'; known tasks: " in err and "softmax" in err
    err = _refused(kwb_here("eval", "--task", "softmax", "absent.py", cwd=files))
    assert f"candidate file absent.py does not exist; check the path (relative paths start at {files})" in err
    err = _refused(kwb_here("eval", "--task", "softmax", ".", cwd=files))
    assert "candidate file . is a directory" in err
    err = _refused(kwb_here("eval", "--task", "softmax", "--rounds", "many", "honest.py", cwd=files))
    assert "argument --rounds: expected a whole number, not 'many'" in err
    err = _refused(kwb_here("results", "--limit", "0", "--store", "absent.db", cwd=files))
    assert "argument --limit: must be positive, not 0" in err
    err = _refused(kwb_here("results", "--store", "honest.py", cwd=files))
    assert "--store honest.py is not a results store (not an SQLite file)" in err
    err = _refused(kwb_here("results", "--store", ".", cwd=files))
    assert "--store . is a directory" in err
    assert not list(files.glob("*.db")), "a refused command must not create a store"


def test_eval_honest_and_wrong_kernels(files):
    pytest.importorskip("workbench.eval.evaluate")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    common = ["--task", "axpy_task.py", "--sizes", "n=2000", "--device", device, "--store", "r.db"]

    good = kwb("eval", *common, "honest.py", "--run-id", "cli-test", cwd=files)
    assert good.returncode == 0, good.stdout + good.stderr
    assert "status     ok" in good.stdout
    assert "evaluating honest.py on task axpy_task" in good.stderr  # the progress line
    if device == "cpu":
        assert "interpreter" in good.stdout and "speedup    n/a (interpreter)" in good.stdout

    bad = kwb("eval", *common, "wrong.py", "--json", cwd=files)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    data = json.loads(bad.stdout)
    assert data["status"] == "incorrect" and "mismatch" in data["flags"] and data["max_abs_err"] > 0.1
    assert "source" not in data

    frame = Store(files / "r.db").frame()
    assert frame["candidate_name"].tolist() == ["honest", "wrong"]
    assert frame["status"].tolist() == ["ok", "incorrect"] and frame["run_id"].iloc[0] == "cli-test"
    assert frame["flags"].iloc[1] == data["flags"] and frame["size"].iloc[0] == {"n": 2000}

    listed = kwb("results", "--store", "r.db", cwd=files)
    assert listed.returncode == 0, listed.stderr
    rows = listed.stdout.splitlines()[2:]
    assert len(rows) == 2 and "honest" in rows[0] and " ok " in rows[0] and "mismatch" in rows[1]
    only_bad = kwb("results", "--store", "r.db", "--status", "incorrect", cwd=files)
    assert len(only_bad.stdout.splitlines()) == 3


def test_a_partial_size_keeps_the_cpu_preset_for_the_rest_and_prints_the_full_size(tmp_path, kwb_here):
    """`--size dim=64` runs the CPU preset's 64 rows (seconds), not the reference file's 8192 (minutes on the
    interpreter), and both the progress line and the result header name every size (`kwb eval` in this process:
    the sizes it chose and printed are the point)."""
    pytest.importorskip("workbench.eval.evaluate")
    task = workbench.get_task("softmax")
    (tmp_path / "sol.py").write_text(task.solution_candidate().source)
    rows = task.sizes["cpu"]["batch_size"]
    out = kwb_here("eval", "--task", "softmax", "sol.py", "--size", "dim=64", "--device", "cpu", "--json",
                   "--no-time", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert json.loads(out.stdout)["size"] == {"batch_size": rows, "dim": 64}
    assert f"evaluating sol.py on task softmax (batch_size={rows}, dim=64, float32), cpu" in out.stderr
    # No hardware time on a CPU, but the counted work has a place on a GPU's roofline (the H100 unless --gpu).
    from workbench.cli.format import format_result
    from workbench.result import Result

    shown = format_result(Result.from_dict(json.loads(out.stdout)))
    assert "roofline   0.625 FLOP/B: memory-bound on H100 SXM, floor " in shown  # 5 FLOPs per 8 bytes (fp32)
    text = kwb_here("eval", "--task", "softmax", "sol.py", "--size", "dim=64,dtype=float16", "--device", "cpu",
                    "--no-time", "--gpu", "A100", cwd=tmp_path)
    assert f"task       softmax (batch_size={rows}, dim=64, float16)\n" in text.stdout, text.stdout + text.stderr
    assert "roofline   1.25 FLOP/B: memory-bound on A100 SXM 80GB, floor " in text.stdout  # 5 FLOPs per 4 bytes
    assert "(projection of the counted work, not measured)" in text.stdout
    bad = kwb_here("eval", "--task", "softmax", "sol.py", "--gpu", "nope", cwd=tmp_path)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) <= 2 and "H100" in bad.stderr, bad.stderr


def test_demo_runs_a_solution_and_shows_the_cheat(tmp_path):
    pytest.importorskip("workbench.eval.evaluate")
    if "softmax" not in workbench.tasks() or not workbench.get_task("softmax").solution:
        pytest.skip("the softmax task or its solution is not there yet")
    from workbench.cli.main import CHEAT_SOFTMAX
    from workbench.eval.checks.static_scan import scan

    out = kwb("demo", "--tasks", "softmax", "--store", "demo.db", cwd=tmp_path, timeout=300)
    store = Store(tmp_path / "demo.db")
    frame = store.frame()
    assert frame["candidate_name"].tolist() == ["softmax-solution", "softmax-torch-cheat"], out.stderr
    assert frame["status"].iloc[0] == "ok" and frame["run_id"].nunique() == 1
    assert [m["expected"] for m in frame["metadata"]] == ["ok", "rejected"]
    assert "[1/2] softmax: softmax-solution" in out.stderr and "[2/2]" in out.stderr  # progress per evaluation
    assert str((tmp_path / "demo.db").resolve()) in out.stdout
    run_id = frame["run_id"].iloc[0]
    report = tmp_path / "runs" / run_id / "report.html"  # under a results folder, never the working directory
    assert not list(tmp_path.glob("*.html"))
    try:
        import plotly  # noqa: F401
    except ImportError:
        assert "HTML report skipped" in out.stdout and not report.exists()
    else:
        assert f"HTML report: {report.resolve()}" in out.stdout
        page = report.read_text()
        library = next((tmp_path / "runs").glob("plotly-*.min.js"))  # shared by every report under runs/
        assert "softmax-torch-cheat" in page and f"src='../{library.name}'" in page and len(page) < 1_000_000
        assert page.count("class=\"plotly-graph-div\"") >= 2  # the time chart and the roofline projection
        assert "Roofline: projection on H100 SXM" in page
    if frame["status"].iloc[1] == "rejected":
        assert out.returncode == 0 and frame["flags"].iloc[1], out.stdout + out.stderr
    else:  # only while no check catches it yet; the demo must then say the cheat got through, not hide it
        assert not scan(CHEAT_SOFTMAX, "torch"), "the static checks flag the cheat but the evaluation passed it"
        assert out.returncode == 1 and "NO (expected rejected)" in out.stdout


def test_subcommands_plug_in(tmp_path):
    """Third parties add commands through the `kwb.commands` entry-point group; roofline through
    `roofline.cli` (an `add_ceilings_commands` hook or just `ceilings_command(args)`)."""
    plugins = tmp_path / "plugins"
    (plugins / "probe-1.0.dist-info").mkdir(parents=True)
    (plugins / "probe-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: probe\nVersion: 1.0\n")
    (plugins / "probe-1.0.dist-info" / "entry_points.txt").write_text("[kwb.commands]\nprobe = kwb_probe:add\n")
    (plugins / "kwb_probe.py").write_text(textwrap.dedent("""
        def add(sub):
            p = sub.add_parser("probe", help="a plug-in command")
            p.add_argument("--times", type=int, default=1)
            p.set_defaults(handler=lambda args: print("probe " * args.times) or 7)
    """))
    (plugins / "roofline").mkdir()
    (plugins / "roofline" / "__init__.py").write_text("")
    (plugins / "roofline" / "cli.py").write_text(
        "def ceilings_command(args):\n    print('ceilings for', args.device, 'refresh' if args.refresh else 'cached')\n")

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "workbench.cli.main", *args], cwd=tmp_path, text=True,
                              capture_output=True, env=_env(plugins), timeout=60)

    probe = run("probe", "--times", "2")
    assert probe.returncode == 7 and probe.stdout.split() == ["probe", "probe"], probe.stderr
    ceilings = run("ceilings", "--device", "cpu", "--refresh")
    assert ceilings.returncode == 0 and ceilings.stdout.strip() == "ceilings for cpu refresh", ceilings.stderr
    assert "probe" in run("--help").stdout

    # A plug-in whose own dependency is missing leaves a command that says so instead of "invalid choice".
    (plugins / "roofline" / "cli.py").write_text("import kwb_no_such_dependency\n")
    broken = run("ceilings", "--device", "cpu")
    assert broken.returncode == 2 and "kwb_no_such_dependency" in broken.stderr
    assert run("tasks").returncode == 0  # the other commands are unaffected
