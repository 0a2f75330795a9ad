"""Meta-parameter sweeps described as data: a candidate template, a grid, a tidy DataFrame out.

The template is an ordinary candidate whose module-level constants (e.g. `BLOCK = 256`, `NUM_WARPS = 4`) are
the knobs; a sweep rewrites those assignments, so every point is a complete, readable candidate file.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from workbench.candidate import Candidate
from workbench.errors import CandidateError


def module_constant_values(source: str) -> dict[str, Any]:
    """Top-level `NAME = <literal>` assignments of a source file."""
    values: dict[str, Any] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                values[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                continue
    return values


def with_constants(source: str, **values: Any) -> str:
    """`source` with the given top-level constants re-assigned; names the template lacks raise CandidateError."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    found: dict[str, ast.Assign] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id in values:
                found[node.targets[0].id] = node
    missing = sorted(set(values) - set(found))
    if missing:
        known = ", ".join(sorted(module_constant_values(source))) or "(none)"
        raise CandidateError(f"the template has no top-level constant {', '.join(missing)}; its constants: {known}")
    # Replace from the bottom up so earlier line numbers stay valid.
    for name, node in sorted(found.items(), key=lambda kv: -kv[1].lineno):
        start, end = node.lineno - 1, node.end_lineno
        lines[start:end] = [f"{name} = {values[name]!r}\n"]
    return "".join(lines)


@dataclass(frozen=True)
class Sweep:
    """A grid over a template's constants: `Sweep(src, {"BLOCK": [64, 128], "NUM_WARPS": [2, 4]})`."""

    template: str
    grid: dict[str, list[Any]]
    name: str = "sweep"
    language: str | None = None
    #: Drop configs the kernel cannot run (e.g. BLOCK larger than a row for a single-pass kernel).
    valid: Callable[[dict[str, Any]], bool] | None = field(default=None, compare=False)

    def configs(self) -> list[dict[str, Any]]:
        keys = list(self.grid)
        combos = [dict(zip(keys, vals, strict=False)) for vals in itertools.product(*(self.grid[k] for k in keys))]
        return [c for c in combos if self.valid is None or self.valid(c)]

    def candidate(self, config: dict[str, Any]) -> Candidate:
        label = ",".join(f"{k}={v}" for k, v in config.items())
        return Candidate(source=with_constants(self.template, **config), language=self.language,
                         name=f"{self.name}[{label}]", metadata={"config": dict(config)})


def run_sweep(task: Any, sweep: Sweep, *, device: str | None = None, size: Any = None,
              record: Callable[[Any], Any] | None = None, progress: bool = True, **evaluate_kw: Any):
    """Evaluate every config; one tidy row per config (its knobs as columns). `record(result)` stores each."""
    import pandas as pd
    from tqdm.auto import tqdm

    from workbench.eval.evaluate import evaluate

    rows = []
    for config in tqdm(sweep.configs(), desc=sweep.name, disable=not progress, unit="config"):
        result = evaluate(task, sweep.candidate(config), device=device, size=size, **evaluate_kw)
        if record is not None:
            record(result)
        rows.append({**config, "status": result.status, "flags": list(result.flags),
                     "time_ms": result.time_ms, "clock": result.timing.clock if result.timing else None,
                     "speedup": result.speedup, "sol_fraction": result.sol_fraction,
                     "candidate": result.candidate_name})
    return pd.DataFrame(rows)


def best_config(frame, knobs: list[str] | None = None) -> dict[str, Any] | None:
    """The fastest correct config of a run_sweep frame, or None when nothing passed."""
    ok = frame[(frame["status"] == "ok") & frame["time_ms"].notna()]
    if ok.empty:
        return None
    row = ok.sort_values("time_ms").iloc[0]
    knobs = knobs or [c for c in frame.columns if c not in
                      ("status", "flags", "time_ms", "clock", "speedup", "sol_fraction", "candidate")]
    return {k: (row[k].item() if hasattr(row[k], "item") else row[k]) for k in knobs} | {"time_ms": float(row["time_ms"])}
