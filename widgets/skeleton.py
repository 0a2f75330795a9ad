"""The code a student starts from: the task's contract (ModelNew with the reference's signatures) and TODOs.

Opening the editor on the reference solution hands students the answer. The skeleton gives what the checker
needs and nothing that solves the task: imports, a `@triton.jit` kernel stub with a TODO, and `ModelNew` with
the same constructor and forward signature as the reference `Model`, its forward still to write. What it must
compute is shown as a comment (the reference's forward body), so the student never has to leave the editor.
Run as it is, it fails with a NotImplementedError that says what to write.
"""

from __future__ import annotations

import ast
from typing import Any

from workbench.tasks.task import Task


def _reference(task: Task) -> str:
    try:
        from workbench.tasks._builtin import reference_source

        return reference_source(task)
    except ImportError:  # pragma: no cover - a task package without the builtin helpers
        return task.source


def _model(tree: ast.Module) -> ast.ClassDef | None:
    return next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), None)


def _method(cls: ast.ClassDef | None, name: str) -> ast.FunctionDef | None:
    if cls is None:
        return None
    return next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == name), None)


def _signature(fn: ast.FunctionDef | None, fallback: str) -> str:
    if fn is None:
        return fallback
    text = ast.unparse(fn.args)
    returns = f" -> {ast.unparse(fn.returns)}" if fn.returns is not None else ""
    return f"({text}){returns}"


def _body_as_comment(fn: ast.FunctionDef | None, source: str) -> list[str]:
    """The reference forward's statements (docstring dropped) as comment lines."""
    if fn is None:
        return []
    lines = source.splitlines()
    body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(getattr(s, "value", None), ast.Constant))]
    if not body:
        return []
    start, end = body[0].lineno, body[-1].end_lineno or body[-1].lineno
    chunk = lines[start - 1:end]
    indent = min((len(x) - len(x.lstrip()) for x in chunk if x.strip()), default=0)
    return [f"        #   {x[indent:]}".rstrip() for x in chunk]


def _init_body(fn: ast.FunctionDef | None) -> str:
    """`super().__init__()` plus the reference's own attribute assignments (self.stride = stride, ...)."""
    keep = []
    for stmt in (fn.body if fn is not None else []):
        if isinstance(stmt, ast.Assign) and all(isinstance(t, ast.Attribute) for t in stmt.targets):
            keep.append(f"        {ast.unparse(stmt)}")
    return "\n".join(["        super().__init__()", *keep])


def skeleton_source(task: Task) -> str:
    """A starting point with the task's contract and TODOs, never its solution."""
    source = _reference(task)
    try:
        tree = ast.parse(source)
    except SyntaxError:
        tree = ast.parse("")
    cls = _model(tree)
    init, forward = _method(cls, "__init__"), _method(cls, "forward")
    reference = _body_as_comment(forward, source)
    what = ["        # The reference computes (your kernel must give the same result):", *reference] if reference else []
    kernel = f"{task.name}_kernel".replace("-", "_")
    return "\n".join([
        f'"""{task.name}: {(task.description or "write a Triton kernel for this task").rstrip(".")}.',
        "",
        "Write the kernel, then press Run: the workbench checks ModelNew against the reference Model",
        '(several sizes and input distributions) and times it."""',
        "import torch",
        "import torch.nn as nn",
        "import triton",
        "import triton.language as tl",
        "",
        "",
        "@triton.jit",
        f"def {kernel}(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):",
        "    # TODO: each program handles BLOCK elements: compute its offsets, load (mask the tail),",
        "    # compute, store. Change the arguments to what your kernel needs.",
        "    pid = tl.program_id(0)",
        "",
        "",
        "class ModelNew(nn.Module):",
        '    """Built like the reference Model; forward launches your kernel."""',
        "",
        f"    def __init__{_signature(init, '(self)')}:",
        _init_body(init),
        "",
        f"    def forward{_signature(forward, '(self, *inputs)')}:",
        *what,
        f"        # TODO: allocate the output, launch {kernel}[grid](...) and return the output.",
        '        raise NotImplementedError("write the kernel launch: see the TODOs above")',
        "",
    ])


def is_starting_point(source: str, task: Any) -> bool:
    """True when `source` is what the editor hands out for `task` (its skeleton or, once shown, its solution),
    so switching tasks may replace it without losing the student's work."""
    text = source.strip()
    if not text or text == skeleton_source(task).strip():
        return True
    try:
        return bool(task.solution) and text == task.solution_candidate().source.strip()
    except Exception:  # noqa: BLE001 - a task whose solution cannot load has no solution to compare with
        return False
