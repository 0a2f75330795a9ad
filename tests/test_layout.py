"""The engine's layout holds the trust boundary in place: the untrusted runner imports nothing of the caller's side
or the judge's, and nothing imports the CLI (docs/architecture.md)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

from test_import_graph import import_graph  # the project's import graph, circles checked there

ROOT = Path(__file__).resolve().parents[1]
EVAL = ROOT / "workbench" / "eval"

#: What the runner process imports: its entry, the fork server it is forked from, and what it imports on demand.
RUNNER_ENTRIES = ("workbench.eval.runner.forkserver", "workbench.eval.runner.main", "workbench.eval.runner.loading",
                  "workbench.eval.runner.build_hooks", "workbench.sandbox.namespaces", "workbench.tasks.precision")
#: Packages the runner must never hold: the caller's side, the judge, the checks, and everything above the engine.
FORBIDDEN_IN_RUNNER = ("workbench.dispatch", "workbench.eval.results", "workbench.eval.judge", "workbench.eval.checks",
                       "workbench.eval.evaluate", "workbench.store", "workbench.llm", "workbench.study",
                       "workbench.cli", "widgets", "roofline")


def test_the_runner_imports_nothing_of_the_caller_or_the_judge_in_a_fresh_interpreter():
    code = ("import importlib, json, sys\n"
            f"for name in {RUNNER_ENTRIES!r}:\n"
            "    importlib.import_module(name)\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('workbench', 'widgets', 'roofline')))))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={"PYTHONPATH": str(ROOT), "TRITON_INTERPRET": "1", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr[-2000:]
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    leaked = [m for m in loaded if m.startswith(FORBIDDEN_IN_RUNNER)]
    assert not leaked, f"the runner imported {leaked}"
    assert "workbench.eval.runner.main" in loaded and "workbench.eval.wire.runner_messages" in loaded


def _imports(path: Path) -> set[str]:
    """Every module a file imports, at any depth (function-level imports included), resolved to dotted names."""
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def test_no_runner_module_imports_the_caller_or_the_judge_even_lazily():
    """The runner's own modules, the sandbox it applies to itself (workbench/sandbox/), and the language modules
    whose loader code it runs (workbench/languages/)."""
    for path in sorted([*(EVAL / "runner").glob("*.py"), *(ROOT / "workbench" / "sandbox").glob("*.py"),
                        *(ROOT / "workbench" / "languages").glob("*.py")]):
        bad = sorted(n for n in _imports(path) if n.startswith(FORBIDDEN_IN_RUNNER))
        assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


def test_nothing_imports_the_cli():
    for package in ("workbench", "widgets", "roofline"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if path.is_relative_to(ROOT / "workbench" / "cli"):
                continue
            bad = sorted(n for n in _imports(path) if n == "workbench.cli" or n.startswith("workbench.cli."))
            assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


def test_importing_workbench_loads_no_engine_module():
    code = ("import json, sys, workbench\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('workbench'))))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == ["workbench"]


def test_a_study_points_own_process_imports_no_torch():
    """Each study point starts a process that only hands the notebook to papermill; the kernel it starts imports
    what the notebook needs. Importing torch there too would cost every point seconds for nothing."""
    code = "import sys, workbench.study.point\nprint('torch' in sys.modules, 'papermill' in sys.modules)\n"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["False", "False"]  # papermill too is imported only when a point runs


def test_a_notebook_that_only_records_results_imports_no_torch():
    """A study's bookkeeping (its context, parameters, results, the task registry) reads no tensor: a notebook that
    only records results does not pay torch's import in its kernel (a task's reference brings it when loaded)."""
    code = ("import sys, workbench as wb\n"
            "from workbench.study.context import StudyContext\n"
            "from workbench.study.params import json_parameter\n"
            "wb.Result(task='t', candidate_id='c', candidate_name='n', language='torch', status='ok')\n"
            "print(sorted(wb.tasks())[:2], 'torch' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["['attention',", "'conv2d']", "False"]


def test_the_fork_server_imports_the_package_the_judge_runs():
    """The fork server starts with an allow-listed environment whose PYTHONPATH is all it has to find `workbench`
    (no installed copy on a bare GPU node): it must name the folder that holds this very package."""
    import workbench
    from workbench.eval.judge.runners.process import package_root

    assert os.path.realpath(os.path.join(package_root(), "workbench")) == \
        os.path.realpath(os.path.dirname(workbench.__file__))


def test_dispatch_knows_judges_and_jobs_never_what_a_judge_decides():
    """Where evaluations run imports, of the engine, only what crosses to a judge (`wire/`)."""
    graph = import_graph()
    for name, imported in sorted(graph.items()):
        if name.startswith("workbench.dispatch"):
            bad = sorted(m for m in imported if m.startswith("workbench.eval") and not m.startswith("workbench.eval.wire"))
            assert not bad, f"{name} imports {bad}"


#: The engine's size limits: one module, one function (decorators included), the whole of workbench/eval in lines
#: (a ceiling lowered as the engine is cut, on its way to 12,000: it may shrink, never grow).
MAX_MODULE_LINES, MAX_FUNCTION_LINES, MAX_ENGINE_LINES = 500, 80, 12_000


def _engine_files() -> list[tuple[Path, str]]:
    return [(path, path.read_text()) for path in sorted(EVAL.rglob("*.py"))]


def test_no_engine_module_or_function_is_too_long_to_read():
    too_long = []
    for path, text in _engine_files():
        if (lines := len(text.splitlines())) > MAX_MODULE_LINES:
            too_long.append(f"{path.relative_to(ROOT)}: {lines} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                if (length := (node.end_lineno or node.lineno) - first + 1) > MAX_FUNCTION_LINES:
                    too_long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {length} lines")
    assert not too_long, too_long


def test_the_sandbox_stands_alone():
    """Confining a process needs nothing of the engine: workbench/sandbox/ imports only itself of the project."""
    for path in sorted((ROOT / "workbench" / "sandbox").glob("*.py")):
        bad = sorted(n for n in _imports(path) if n.split(".")[0] in ("workbench", "widgets", "roofline")
                     and not n.startswith("workbench.sandbox"))
        assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


def test_the_engine_stays_readable_in_size():
    lines = sum(len(text.splitlines()) for _, text in _engine_files())
    assert lines <= MAX_ENGINE_LINES, f"workbench/eval is {lines} lines, over {MAX_ENGINE_LINES}"
