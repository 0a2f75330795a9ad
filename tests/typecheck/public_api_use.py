"""A user's code against the public API, for the type checker only (never imported or run): pyproject's mypy `files`
name this module, so the README's `mypy` step checks it. The right uses must pass through the lazily loaded
`workbench` package with their types; each wrong use must be an error of the named code, because `warn_unused_ignores`
turns an ignore that silences nothing into an error of its own."""

from __future__ import annotations

import threading

import workbench as wb


def right_uses() -> None:
    task: wb.Task = wb.get_task("softmax")
    opts = wb.EvalOptions(device="cpu", rounds=6, cancel=threading.Event(), on_progress=lambda p: print(p.describe()))
    result: wb.Result = wb.evaluate(task, wb.Candidate(source="...", language="triton"), options=opts)
    speedup: float | None = result.speedup
    store = wb.Store("results.db")
    store.add(result)
    print(speedup)


def wrong_uses() -> None:
    wb.evaluate("softmax", "src", options="cpu")  # type: ignore[arg-type]
    wb.EvalOptions(rounds="five")  # type: ignore[arg-type]
    name: int = wb.get_task("softmax").name  # type: ignore[assignment]
    print(name)
