"""Meta-parameter sweeps described as data: a candidate template, a grid, a tidy DataFrame out.

A knob is something the template's source already says, so every point of a sweep is a complete, readable
candidate file and any kernel can be swept without editing it first:

- a module constant: `BLOCK = 256` at the top of the file;
- a launch parameter of a Triton kernel launched in the file: a `tl.constexpr` argument such as `BLOCK=block`
  in `kernel[grid](..., BLOCK=block)`, or the launch options `num_warps` / `num_stages`. `kernel.BLOCK`
  restricts the knob to one kernel's launches;
- a local variable that feeds a launch, e.g. `block` in `block = 256` when the grid is `cdiv(n, block)`: a
  block size that also sizes the grid has to change in both places, so the variable is what gets swept.

The source is rewritten with `ast` positions (only the value text changes; comments and layout stay).
"""

from __future__ import annotations

import ast
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from workbench.candidate import Candidate
from workbench.errors import CandidateError

#: Options every Triton launch accepts, whether the kernel names them or not.
LAUNCH_OPTIONS = ("num_warps", "num_stages")
#: Columns of a sweep frame that are not knobs.
RESULT_COLUMNS = ("status", "flags", "time_ms", "ci95_low_ms", "ci95_high_ms", "clock", "speedup", "sol_fraction",
                  "candidate")


# ---- reading the template ------------------------------------------------------------------------------------

def _parse(source: str) -> ast.Module:
    try:
        return ast.parse(source)
    except SyntaxError as exc:
        raise CandidateError(f"the sweep template does not parse (line {exc.lineno}: {exc.msg}); fix it first") from exc


def _constant_nodes(tree: ast.Module) -> dict[str, ast.Assign]:
    """Top-level `NAME = <literal>` assignments."""
    out: dict[str, ast.Assign] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                ast.literal_eval(node.value)
            except ValueError:
                continue
            out[node.targets[0].id] = node
    return out


def module_constant_values(source: str) -> dict[str, Any]:
    """Top-level `NAME = <literal>` assignments of a source file."""
    return {name: ast.literal_eval(node.value) for name, node in _constant_nodes(_parse(source)).items()}


def _is_jit(fn: ast.FunctionDef) -> bool:
    return any(any(part in ast.unparse(d) for part in ("jit", "autotune", "heuristics")) for d in fn.decorator_list)


@dataclass
class Launch:
    """One `kernel[grid](...)` call, with the function it sits in (its locals are variable knobs)."""

    kernel: str
    params: list[str]
    #: `tl.constexpr` parameters the launch does not pass positionally (they can be set by keyword).
    constexprs: list[str]
    call: ast.Call
    grid: ast.expr
    function: ast.FunctionDef | None

    def keyword(self, name: str) -> ast.keyword | None:
        return next((k for k in self.call.keywords if k.arg == name), None)

    def star_kwargs(self) -> ast.keyword | None:
        return next((k for k in self.call.keywords if k.arg is None), None)

    def accepts(self, name: str) -> bool:
        return name in self.params or name in LAUNCH_OPTIONS or self.keyword(name) is not None


def launches(tree: ast.Module) -> list[Launch]:
    kernels = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef) and _is_jit(n)}
    found: list[Launch] = []

    def visit(node: ast.AST, function: ast.FunctionDef | None) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
            if (isinstance(child, ast.Call) and isinstance(child.func, ast.Subscript)
                    and isinstance(child.func.value, ast.Name) and child.func.value.id in kernels):
                kernel = kernels[child.func.value.id]
                params = [a.arg for a in kernel.args.args]
                constexprs = [a.arg for i, a in enumerate(kernel.args.args) if i >= len(child.args)
                              and a.annotation is not None and "constexpr" in ast.unparse(a.annotation)]
                found.append(Launch(kernel.name, params, constexprs, child, child.func.slice, function))
            visit(child, inner)  # type: ignore[arg-type]

    visit(tree, None)
    return found


def _local_assignments(function: ast.FunctionDef, name: str) -> list[ast.Assign]:
    """Statements in `function` that bind `name`: `name = ...` or a tuple unpacking `a, name = ...`."""
    def binds(target: ast.expr) -> bool:
        if isinstance(target, ast.Name):
            return target.id == name
        return isinstance(target, (ast.Tuple, ast.List)) and any(binds(e) for e in target.elts)

    return [n for n in ast.walk(function) if isinstance(n, ast.Assign) and len(n.targets) == 1 and binds(n.targets[0])]


def _bound_value(assign: ast.Assign, name: str) -> str:
    """The source text of the value `assign` gives `name` (its element, for a literal tuple unpacking)."""
    target, value = assign.targets[0], assign.value
    if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts):
        for t, v in zip(target.elts, value.elts, strict=True):
            if isinstance(t, ast.Name) and t.id == name:
                return ast.unparse(v)
    return ast.unparse(value)


@dataclass(frozen=True)
class Knob:
    """One sweepable name in a template: what it is, where it acts, and its current value(s) as source text."""

    name: str
    kind: str  # "constant" | "launch" | "variable"
    where: str
    current: tuple[str, ...]
    #: A variable that also sizes a launch grid (sweep it rather than the launch keyword it feeds).
    sizes_grid: bool = False


def knobs(source: str) -> dict[str, Knob]:
    """Every knob of `source`, constants first, then launch parameters, then variables feeding launches."""
    tree = _parse(source)
    out: dict[str, Knob] = {}
    for name, node in _constant_nodes(tree).items():
        out[name] = Knob(name, "constant", "module constant", (ast.unparse(node.value),))
    calls = launches(tree)
    keyword_kernels: dict[str, list[str]] = {}
    keyword_values: dict[str, list[str]] = {}
    for launch in calls:
        star = launch.star_kwargs()
        names = [k.arg for k in launch.call.keywords if k.arg] + list(launch.constexprs) + list(LAUNCH_OPTIONS)
        for name in dict.fromkeys(names):
            keyword_kernels.setdefault(name, []).append(launch.kernel)
            kw = launch.keyword(name)
            now = ast.unparse(kw.value) if kw else (f"from **{ast.unparse(star.value)}" if star else
                                                    "triton's default" if name in LAUNCH_OPTIONS else "default")
            keyword_values.setdefault(name, []).append(now)
    for name, kernels in keyword_kernels.items():
        if name not in out:
            where = "launch option" if name in LAUNCH_OPTIONS else "launch parameter"
            out[name] = Knob(name, "launch", f"{where} of {', '.join(dict.fromkeys(kernels))}",
                             tuple(dict.fromkeys(keyword_values[name])))
    for launch in calls:
        if launch.function is None:
            continue
        grid_names = {n.id for n in ast.walk(launch.grid) if isinstance(n, ast.Name)}
        for name in list(grid_names):  # `grid = (cdiv(n, block),)` then `kernel[grid]`: one level through
            for assign in _local_assignments(launch.function, name):
                grid_names |= {n.id for n in ast.walk(assign.value) if isinstance(n, ast.Name)}
        fed = [k.value.id for k in launch.call.keywords if k.arg and isinstance(k.value, ast.Name)]
        for name in dict.fromkeys(fed):
            assigns = _local_assignments(launch.function, name)
            if not assigns or name in out and out[name].kind != "variable":
                continue
            sizes_grid = name in grid_names or (name in out and out[name].sizes_grid)
            out[name] = Knob(name, "variable", f"variable in {launch.function.name}()",
                             tuple(dict.fromkeys(_bound_value(a, name) for a in assigns)), sizes_grid)
    return out


def knobs_text(source: str) -> str:
    """One line per knob, for help text: `BLOCK: launch parameter of k (now: block)`."""
    try:
        found = knobs(source)
    except CandidateError as exc:
        return str(exc)
    return "\n".join(f"{k.name}: {k.where} (now: {' | '.join(k.current)})" for k in found.values())


# ---- rewriting ------------------------------------------------------------------------------------------------

class _Edits:
    """Text replacements at ast positions (UTF-8 byte columns), applied bottom-up; overlaps are an error."""

    def __init__(self, source: str):
        self.data = source.encode()
        self.starts = [0]
        for line in source.encode().splitlines(keepends=True):
            self.starts.append(self.starts[-1] + len(line))
        self.edits: list[tuple[int, int, str, str]] = []
        #: `**cfg` of a launch -> entries merged into it (several knobs may override the same dict).
        self.merges: dict[int, tuple[ast.keyword, list[str], list[str]]] = {}

    def offset(self, line: int, col: int) -> int:
        return self.starts[line - 1] + col

    def replace(self, node: ast.AST, text: str, knob: str) -> None:
        self.add(self.offset(node.lineno, node.col_offset), self.offset(node.end_lineno, node.end_col_offset),
                 text, knob)

    def add(self, start: int, end: int, text: str, knob: str) -> None:
        for s, e, _, other in self.edits:
            if start < e and s < end:
                raise CandidateError(f"knobs {other} and {knob} rewrite the same code; sweep only one of them")
        self.edits.append((start, end, text, knob))

    def merge(self, star: ast.keyword, param: str, text: str, knob: str) -> None:
        self.merges.setdefault(id(star), (star, [], []))[1].append(f"{param!r}: {text}")
        self.merges[id(star)][2].append(knob)

    def apply(self) -> str:
        for star, entries, names in self.merges.values():
            self.replace(star, f"**{{**{ast.unparse(star.value)}, {', '.join(entries)}}}", ", ".join(names))
        self.merges = {}
        data = self.data
        for start, end, text, _ in sorted(self.edits, key=lambda e: -e[0]):
            data = data[:start] + text.encode() + data[end:]
        return data.decode()


def _launch_edit(edits: _Edits, launch: Launch, param: str, text: str, knob: str) -> None:
    kw = launch.keyword(param)
    if kw is not None:
        edits.replace(kw.value, text, knob)
        return
    if param in launch.params:
        index = launch.params.index(param)
        if index < len(launch.call.args) and not any(isinstance(a, ast.Starred) for a in launch.call.args[:index + 1]):
            edits.replace(launch.call.args[index], text, knob)
            return
    star = launch.star_kwargs()
    if star is not None:  # `**cfg` may already hold the name: merge so the swept value wins
        edits.merge(star, param, text, knob)
        return
    last = max([*launch.call.args, *launch.call.keywords], key=lambda n: (n.end_lineno, n.end_col_offset), default=None)
    if last is None:
        end = edits.offset(launch.call.end_lineno, launch.call.end_col_offset) - 1
        edits.add(end, end, f"{param}={text}", knob)
    else:
        end = edits.offset(last.end_lineno, last.end_col_offset)
        edits.add(end, end, f", {param}={text}", knob)


def _unknown(name: str, source: str) -> CandidateError:
    found = knobs(source)
    listed = "; ".join(f"{k.name} ({k.where})" for k in found.values()) or "none"
    return CandidateError(f"the template has no knob {name!r}. Knobs it has: {listed}. Add a module constant "
                          f"(e.g. `{name} = 256`) or pass it at the kernel launch to sweep it.")


def with_knobs(source: str, **values: Any) -> str:
    """`source` with each knob set to its value (see the module docstring for what a knob is)."""
    tree = _parse(source)
    constants = _constant_nodes(tree)
    calls = launches(tree)
    edits = _Edits(source)
    for knob, value in values.items():
        text = repr(value)
        kernel, _, name = knob.rpartition(".")
        if not kernel and name in constants:
            edits.replace(constants[name].value, text, knob)
            continue
        targets = [c for c in calls if (not kernel or c.kernel == kernel) and c.accepts(name)]
        if kernel and not any(c.kernel == kernel for c in calls):
            raise CandidateError(f"no launch of a kernel named {kernel!r}; launched kernels: "
                                 f"{', '.join(dict.fromkeys(c.kernel for c in calls)) or 'none'}")
        if targets:
            for launch in targets:
                _launch_edit(edits, launch, name, text, knob)
            continue
        assigns = [a for c in calls if c.function is not None and not kernel
                   for a in _local_assignments(c.function, name)]
        if not assigns:
            raise _unknown(knob, source)
        for node in {id(a): a for a in assigns}.values():
            if isinstance(node.targets[0], ast.Name):
                edits.replace(node.value, text, knob)
            else:  # a tuple unpacking: override the name on the next line, at the statement's indentation
                end = edits.starts[node.end_lineno]
                line = f"{' ' * node.col_offset}{name} = {text}\n"
                if not edits.data[:end].endswith(b"\n"):
                    line = "\n" + line
                edits.add(end, end, line, knob)
    return edits.apply()


def with_constants(source: str, **values: Any) -> str:
    """`source` with the given top-level constants re-assigned; names the template lacks raise CandidateError."""
    constants = _constant_nodes(_parse(source))
    missing = sorted(set(values) - set(constants))
    if missing:
        known = ", ".join(sorted(constants)) or "(none)"
        raise CandidateError(f"the template has no top-level constant {', '.join(missing)}; its constants: {known}")
    return with_knobs(source, **values)


# ---- suggestions ---------------------------------------------------------------------------------------------

def _ints(text: str) -> list[int]:
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        return []
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and type(n.value) is int and n.value > 1]


def _block_rank(name: str) -> int:
    """Which block-size knob to suggest first: the plain block size, then the row tile, then the rest."""
    lower = name.lower()
    if lower in ("block", "block_size"):
        return 0
    return 1 if lower.endswith("_m") else 2


def suggest_grid(source: str, device: str = "cpu", max_knobs: int = 2) -> dict[str, list[Any]]:
    """A starting grid: a block-size knob at half, same and double its value, and num_warps.

    Upper-case integer constants come first (they were written to be tuned). Otherwise a block size that
    sizes the launch grid is swept through its variable (so grid and kernel agree) and one that does not (a
    row kernel launched once per row) through the launch parameter. Without a literal to start from, block
    sizes start at 256 on the CPU (interpreter sizes are small) and 1024 on a GPU.
    """
    gpu = device.startswith("cuda")
    grid: dict[str, list[Any]] = {}
    found = knobs(source)
    for knob in found.values():
        if knob.kind == "constant" and knob.name.isupper() and _ints(knob.current[0]):
            value = _ints(knob.current[0])[0]
            grid[knob.name] = sorted({max(1, value // 2), value, value * 2})
    if not grid:
        def grid_var(text: str) -> bool:
            return text in found and found[text].sizes_grid

        blockish = [k for k in found.values() if "block" in k.name.lower() and k.kind != "constant"
                    and (k.kind == "variable" and k.sizes_grid or k.kind == "launch" and not any(
                        grid_var(v) for v in k.current))]
        blockish = [k for k in blockish if not any(v.startswith("from **") for v in k.current)]
        for knob in sorted(blockish, key=lambda k: _block_rank(k.name))[:1]:
            texts = [t for v in knob.current for t in (found[v].current if v in found else (v,))]
            ints = [v for text in texts for v in _ints(text) if v & (v - 1) == 0 and v >= 16]
            if ints:
                base = max(ints) if gpu else min(ints)
                grid[knob.name] = sorted({v for v in (base // 2, base, base * 2) if v >= 16})
            else:
                base = 1024 if gpu else 256
                grid[knob.name] = [base, base * 2, base * 4]
    if "num_warps" in found and len(grid) < max_knobs:
        grid["num_warps"] = [4, 8] if gpu else [2, 4]
    return dict(list(grid.items())[:max_knobs])


# ---- sweeps ---------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Sweep:
    """A grid over a template's knobs: `Sweep(src, {"BLOCK": [64, 128], "num_warps": [2, 4]})`."""

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
        return Candidate(source=with_knobs(self.template, **config), language=self.language,
                         name=f"{self.name}[{label}]", metadata={"config": dict(config)})

    def check(self) -> None:
        """Raise CandidateError now (naming the template's knobs) if a knob is unknown or the grid is empty."""
        configs = self.configs()
        if not configs:
            raise CandidateError("the grid has no configs: give every knob at least one value")
        self.candidate(configs[0])


def sweep_row(config: dict[str, Any], result: Any) -> dict[str, Any]:
    """One tidy row per config: its knobs, the verdict, and the median time with its 95% CI."""
    t = result.timing
    return {**config, "status": result.status, "flags": list(result.flags), "time_ms": result.time_ms,
            "ci95_low_ms": t.ci95_low_ms if t else None, "ci95_high_ms": t.ci95_high_ms if t else None,
            "clock": t.clock if t else None, "speedup": result.speedup, "sol_fraction": result.sol_fraction,
            "candidate": result.candidate_name}


def run_sweep(task: Any, sweep: Sweep, *, options: Any = None, device: str | None = None, size: Any = None,
              record: Callable[[Any], Any] | None = None, progress: bool = True, **evaluate_kw: Any):
    """Evaluate every config; one tidy row per config (its knobs as columns). `record(result)` stores each.
    `options`: an `EvalOptions` for every config; `device`, `size` and other keywords override it."""
    import pandas as pd
    from tqdm.auto import tqdm

    from workbench.eval.evaluate import evaluate_all
    from workbench.eval.options import EvalOptions

    sweep.check()
    given = {"device": device, "size": size}
    opts = (options or EvalOptions()).replace(**{k: v for k, v in given.items() if v is not None}, **evaluate_kw)
    configs = list(sweep.configs())
    with tqdm(total=len(configs), desc=sweep.name, disable=not progress, unit="config") as bar:
        def done(_: int, result: Any) -> None:
            if record is not None:
                record(result)
            bar.update(1)

        # Overlapped: one config compiles while another is timed (workbench.eval.evaluate.evaluate_all).
        results = evaluate_all(task, [sweep.candidate(c) for c in configs], opts, done)
    rows = [sweep_row(config, result) for config, result in zip(configs, results, strict=True)]
    return pd.DataFrame(rows, columns=[*sweep.grid, *RESULT_COLUMNS])


def _passed(row: Any) -> bool:
    t = row["time_ms"]
    return row["status"] == "ok" and t is not None and not (isinstance(t, float) and math.isnan(t))


def _passing(frame):
    """The rows of a run_sweep frame that passed with a time."""
    return frame[[_passed(row) for _, row in frame.iterrows()]] if len(frame) else frame


def best_config(frame, knobs: list[str] | None = None) -> dict[str, Any] | None:
    """The fastest correct config of a run_sweep frame, or None when nothing passed."""
    ok = _passing(frame)
    if ok.empty:
        return None
    row = ok.sort_values("time_ms").iloc[0]
    knobs = knobs or [c for c in frame.columns if c not in RESULT_COLUMNS]
    return {k: (row[k].item() if hasattr(row[k], "item") else row[k]) for k in knobs} | {"time_ms": float(row["time_ms"])}


def ties_with_best(frame) -> int:
    """How many other correct configs the best one cannot be told apart from: their 95% CI of the median overlaps
    the best's. A star on a config that is only faster by noise (on the interpreter num_warps changes nothing, yet
    five reps may differ 6x) would teach the wrong lesson; the card says how many configs share the lead."""
    ok = _passing(frame)
    if len(ok) < 2 or "ci95_low_ms" not in ok or "ci95_high_ms" not in ok:
        return 0
    ok = ok.sort_values("time_ms")
    best_high = ok["ci95_high_ms"].iloc[0]
    if best_high is None or best_high != best_high:
        return 0
    lows = ok["ci95_low_ms"].iloc[1:]
    return int(sum(1 for low in lows if low is not None and low == low and low <= best_high))
