"""The engine's layout holds the trust boundary in place: the untrusted runner imports nothing of the caller's side
or the judge's, and nothing imports the CLI (docs/architecture.md)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EVAL = ROOT / "workbench" / "eval"

#: What the runner process imports: its entry, the fork server it is forked from, and what it imports on demand.
RUNNER_ENTRIES = ("workbench.eval.runner.forkserver", "workbench.eval.runner.main", "workbench.eval.runner.loading",
                  "workbench.eval.runner.build_hooks", "workbench.eval.runner.sandbox", "workbench.tasks.precision")
#: Packages the runner must never hold: the caller's side, the judge, the checks, and everything above the engine.
FORBIDDEN_IN_RUNNER = ("workbench.eval.caller", "workbench.eval.judge", "workbench.eval.checks",
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
    """The runner's own modules, and the language modules whose loader code it runs (workbench/languages/)."""
    for path in sorted([*(EVAL / "runner").glob("*.py"), *(ROOT / "workbench" / "languages").glob("*.py")]):
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


def test_the_fork_server_imports_the_package_the_judge_runs():
    """The fork server starts with an allow-listed environment whose PYTHONPATH is all it has to find `workbench`
    (no installed copy on a bare GPU node): it must name the folder that holds this very package."""
    import workbench
    from workbench.eval.judge.runners.process import package_root

    assert os.path.realpath(os.path.join(package_root(), "workbench")) == \
        os.path.realpath(os.path.dirname(workbench.__file__))


def _runtime_imports(path: Path, known: set[str]) -> set[str]:
    """The engine modules a file imports when it runs (function-level imports included, `if TYPE_CHECKING:` aside)."""
    tree = ast.parse(path.read_text())
    typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
                   for n in ast.walk(node)}
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.update(n for n in (node.module, *(f"{node.module}.{a.name}" for a in node.names)) if n in known)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in known)
    return found


def _circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every group of modules that import one another round a circle (strongly connected, more than one module)."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        order[node] = low[node] = len(order)
        stack.append(node)
        for other in edges.get(node, ()):
            if other not in order:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], order[other])
        if low[node] == order[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(edges):
        if node not in order:
            visit(node)
    return found


def test_the_circle_finder_finds_a_circle_through_a_function_level_import():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


def test_the_engine_has_no_import_circle_no_module_over_500_lines_and_no_function_over_80():
    paths = {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p
             for p in EVAL.rglob("*.py")}
    edges = {name: _runtime_imports(path, set(paths)) - {name} for name, path in paths.items()}
    assert _circles(edges) == []
    long_modules = {name: n for name, path in paths.items() if (n := path.read_text().count("\n")) > 500}
    assert long_modules == {}
    long_functions = [f"{name}.{node.name}: {node.end_lineno - node.lineno + 1}" for name, path in paths.items()
                      for node in ast.walk(ast.parse(path.read_text()))
                      if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                      and node.end_lineno - node.lineno + 1 > 80]
    assert long_functions == []
