"""Shrinking a KernelBench-format problem to a size a CPU evaluates in seconds (`load_kernelbench(..., fit="cpu")`).

KernelBench's sizes are GPU sizes (a 4096 x 393216 softmax, a 2048 x 8192 x 4096 matmul). The rules, in order:

1. Every module-level integer constant is a candidate, scalars and the elements of tuples/lists alike, and whether
   it is written as a literal (`dim = 16384`), as an expression of literals (`M = 1024 * 2`, `dim = 16384 * 4`) or
   computed from other constants (`N = 2 * M`).
2. Values at or below `keep_below` (16, or the cap when that is lower) are never touched: kernel sizes, strides,
   axes, small channel counts, head counts. Names that say they are not sizes (kernel, stride, pad, dilation,
   axis, ...) are never touched either.
3. A literal size above that is divided by the smallest power of two that brings it to `cap` or below (a power of
   two keeps divisibility by 2, 4, 8 and every odd factor: 393216 = 3 x 2^17 becomes 24 = 3 x 2^3); batch-like
   names (`batch`, `batch_size`, ...) go to `batch_cap`. When that does not run, sizes that were equal are kept
   equal (a model may rely on `batch_size == input_shape[0]`): a value shared by a batch-like and another
   constant then follows `cap`.
4. A constant computed from others is recomputed from their new values (`N = 2 * M` stays twice M), and only
   shrunk itself when it still exceeds `derived_slack` x cap (a size hidden behind an unshrunk factor).
5. Divisibility the model relies on is kept: a channel, feature or embedding size (not an input-side one) that was
   a multiple of a `*group*` / `*head*` constant stays a multiple of its new value, with at least 4 per group (GroupNorm channels, attention
   embed_dim / num_heads: one channel per group would make a normalization's output constant).
6. The result is checked by building the inputs and running the reference under FakeTensorMode (no data), for
   real at the shrunk size when an op has no fake kernel. A failure (a spatial size below a kernel or pooling
   window, a hard-coded reshape) retries with `cap` doubled; a problem above `element_budget` elements (inputs, or
   output) retries with `cap` halved, down to `min_cap`. A problem still over the budget then has its remaining
   constants shrunk one at a time (to their `min_cap` value), each kept if the reference still runs. What was shrunk is listed in `Fit.notes`.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

from workbench.errors import TaskError, UnknownNameError
from workbench.tasks.constants import NotConstant, assignments, references, value_of

#: Constant names that are never sizes, whatever their value.
KEEP_NAME = re.compile(r"kernel|stride|pad|dilation|axis|reduce_dim|seed|eps|momentum|^p$|dtype", re.IGNORECASE)
#: Without a fake/meta kernel for some op the check runs the reference for real, only up to this many input elements.
REAL_RUN_ELEMENTS = 1 << 21
#: Elements per group (or head) a fit keeps at least, where the file had that many.
MIN_PER_GROUP = 4
BATCH_NAME = re.compile(r"batch|^bs$|^n_?batch", re.IGNORECASE)
DIVISOR_NAME = re.compile(r"group|head", re.IGNORECASE)
#: Sizes that groups or heads split (channels, features, embeddings); an input-side size is not split by them.
GROUPED_NAME = re.compile(r"channel|feature|embed|emb$|n_embd|hidden|d_model|^dim$", re.IGNORECASE)
INPUT_NAME = re.compile(r"^in_|^input", re.IGNORECASE)


@dataclass(frozen=True)
class FitRules:
    """Targets for one fit. `element_budget` bounds the elements of one input set and of the output each."""

    name: str
    cap: int = 32
    batch_cap: int = 4
    keep_below: int = 16
    derived_slack: int = 8
    element_budget: int = 1 << 16
    min_cap: int = 8
    max_cap: int = 1024


#: Named presets: "cpu" for the interpreter and A/A tests.
FITS: dict[str, FitRules] = {"cpu": FitRules("cpu")}


def get_fit(fit: str | FitRules) -> FitRules:
    if isinstance(fit, FitRules):
        return fit
    if fit not in FITS:
        raise UnknownNameError("fit", str(fit), list(FITS))
    return FITS[fit]


@dataclass
class Fit:
    """Overrides that shrink a problem (module constants, derived ones included), the shapes they give, and notes
    for Task.notes."""

    sizes: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    cap: int = 0
    input_elements: int | None = None
    output_elements: int | None = None
    within_budget: bool = True


def _shrink(value: int, cap: int) -> int:
    if value <= cap:
        return value
    f = 1
    while value / f > cap:
        f *= 2
    return max(1, round(value / f))


def _fit_value(name: str, expr: ast.expr | None, value: Any, derived: bool, cap: int, rules: FitRules,
               shared: set[int]) -> Any:
    """The shrunk `value` of constant `name` (its expression `expr`, when known, says which parts are literal);
    `shared`: values that some non-batch constant also has (they follow `cap` even under a batch-like name)."""
    if isinstance(value, bool) or KEEP_NAME.search(name):
        return value
    if isinstance(value, int):
        limit = rules.batch_cap if BATCH_NAME.search(name) and value not in shared else cap
        if derived:
            return _shrink(value, limit) if value > cap * rules.derived_slack else value
        return _shrink(value, limit) if value > min(rules.keep_below, cap) else value
    if isinstance(value, (tuple, list)):
        parts = expr.elts if isinstance(expr, (ast.Tuple, ast.List)) and len(expr.elts) == len(value) and \
            not any(isinstance(e, ast.Starred) for e in expr.elts) else [None] * len(value)
        out = [_fit_value(name, p, v, derived if p is None else _is_derived(p, derived), cap, rules, shared)
               for p, v in zip(parts, value, strict=True)]
        return type(value)(out)
    return value


def _ints(value: Any) -> list[int]:
    if isinstance(value, int) and not isinstance(value, bool):
        return [value]
    if isinstance(value, (tuple, list)):
        return [i for v in value for i in _ints(v)]
    return []


def _is_derived(expr: ast.expr, whole_derived: bool) -> bool:
    return whole_derived and any(isinstance(n, ast.Name) for n in ast.walk(expr))


def propose(source: str, cap: int, rules: FitRules, pinned: dict[str, Any] | None = None,
            batch_only: bool = False, tie_equal: bool = False) -> tuple[dict, dict]:
    """(overrides, original values) at `cap`: every constant the rules shrink or recompute, in file order; names in
    `pinned` keep the given value. `batch_only` shrinks batch-like constants alone (to `batch_cap`); `tie_equal`
    keeps a batch-like size equal to a non-batch constant of the same value (rule 3's last sentence)."""
    pinned = dict(pinned or {})
    tree = ast.parse(source)
    plain: dict[str, Any] = {}
    for a in assignments(tree):
        try:
            plain[a.name] = value_of(a, plain)
        except (NotConstant, ArithmeticError, TypeError, ValueError, IndexError, KeyError):
            plain.pop(a.name, None)
    shared = {v for k, val in plain.items() if not BATCH_NAME.search(k) and not KEEP_NAME.search(k)
              for v in _ints(val)} if tie_equal else set()
    original: dict[str, Any] = {}
    env: dict[str, Any] = {}
    overrides: dict[str, Any] = {}
    for a in assignments(tree):
        derived = references(a.whole if a.expr is None else a.expr, original)
        try:
            before = value_of(a, original)
        except (NotConstant, ArithmeticError, TypeError, ValueError, IndexError, KeyError):
            original.pop(a.name, None)
            env.pop(a.name, None)
            continue
        original[a.name] = before
        if a.name in pinned:
            env[a.name] = overrides[a.name] = pinned[a.name]
            continue
        try:
            now = value_of(a, env)
        except (NotConstant, ArithmeticError, TypeError, ValueError, IndexError, KeyError):
            now = before
        if batch_only:
            new = _shrink(now, rules.batch_cap) if BATCH_NAME.search(a.name) and isinstance(now, int) and \
                not isinstance(now, bool) and not derived else now
        else:
            new = _fit_value(a.name, a.expr if a.expr is not None else (a.whole if a.index is None else None), now,
                             derived, cap, rules, shared)
        env[a.name] = new
        if new != before:
            overrides[a.name] = new
    return overrides, original


def _keep_divisible(overrides: dict[str, Any], original: dict[str, Any]) -> dict[str, Any]:
    """Sizes that were multiples of a group/head count stay multiples of its new value (rule 5)."""
    fixed: dict[str, Any] = {}
    divisors = {k: v for k, v in original.items() if DIVISOR_NAME.search(k) and isinstance(v, int)
                and not isinstance(v, bool) and v >= 2}
    for name, new in overrides.items():
        old = original.get(name)
        if not isinstance(new, int) or isinstance(new, bool) or not isinstance(old, int) or name in divisors or \
                not GROUPED_NAME.search(name) or INPUT_NAME.search(name):
            continue
        for gname, g in divisors.items():
            g_new = overrides.get(gname, g)
            if old % g == 0 and g_new:
                # A multiple of the new count, with at least min(old per-group size, 4) per group: one channel per
                # group would make GroupNorm's output constant and the task unable to tell right from wrong.
                per_group = max(round(new / g_new), min(old // g, MIN_PER_GROUP))
                new = per_group * g_new
        if new != overrides[name]:
            fixed[name] = new
    return fixed


def _check(ref: Any, size: dict[str, Any]) -> tuple[int, int | None]:
    """(input elements, output elements) of the reference at `size`; raises when it cannot run there."""
    import torch

    from workbench.tasks.footprint import UNTRACEABLE, trace

    try:
        found = trace(ref, size, "fake")
    except Exception as exc:
        if type(exc).__name__ not in UNTRACEABLE:
            raise  # the inputs or the model cannot be built at this size
        found = None  # the model's constructor needs data (`.item()` on a tensor): decide by running it
    if found is not None and found.output_shapes is not None:
        return found.input_elements, found.output_elements
    if found is not None and not found.untraceable:
        raise TaskError(found.note)
    if _input_elements(ref, size) > REAL_RUN_ELEMENTS:
        raise TaskError(f"cannot check size {size} without data, and it is too large to run for real here")
    # No fake kernel for some op (or data-dependent shapes): run it for real at this (small) size.
    inputs = ref.make_inputs(size, 0, "cpu", "default")
    model = ref.module.Model(*ref.init_inputs(size, 0))
    if isinstance(model, torch.nn.Module):
        model.eval()
    with torch.no_grad():
        out = model(*inputs)
    outs = out if isinstance(out, (tuple, list)) else [out]
    count = sum(x.numel() for x in inputs if isinstance(x, torch.Tensor))
    return count, sum(o.numel() for o in outs if isinstance(o, torch.Tensor))


def _input_elements(ref: Any, size: dict[str, Any]) -> int:
    """Elements of one input set, from `get_inputs()` under FakeTensorMode (no data)."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    ref.apply_size(size)
    with FakeTensorMode(allow_non_fake_inputs=True), torch.random.fork_rng(devices=[]):
        inputs = ref.module.get_inputs()
    return sum(x.numel() for x in inputs if isinstance(x, torch.Tensor))


def fit_sizes(source: str, fit: str | FitRules = "cpu", pinned: dict[str, Any] | None = None,
              name: str = "task") -> Fit:
    """Overrides that shrink the KernelBench-format `source` by the rules of the module doc. `pinned` constants (the
    caller's explicit sizes) are kept as given. Raises TaskError when no proposal gives a size at which the
    reference runs."""
    from workbench.tasks.task import Task

    rules = get_fit(fit)
    try:
        ref = Task.from_source(source, name=name).load()
    except TaskError:
        raise
    except Exception as exc:  # noqa: BLE001 - the file itself does not import (a missing package, say)
        raise TaskError(f"task {name!r}: the reference could not be imported to fit its sizes ({type(exc).__name__}: "
                        f"{exc}); install what it needs, or pass explicit sizes= without fit", name) from exc
    found: list[tuple[int, dict, dict, int, int | None]] = []
    last_error: Exception | None = None

    def attempt(cap: int, batch_only: bool = False) -> bool:
        """Propose and check at `cap`: first with the batch shrunk on its own, then tied to equal sizes."""
        nonlocal last_error
        for tie in ((False,) if batch_only else (False, True)):
            sizes, original = propose(source, cap, rules, pinned, batch_only, tie)
            fixed = _keep_divisible(sizes, original)
            if fixed:
                sizes, original = propose(source, cap, rules, {**sizes, **fixed, **(pinned or {})}, batch_only, tie)
            try:
                n_in, n_out = _check(ref, sizes)
            except Exception as exc:  # noqa: BLE001 - this proposal does not run; another may
                last_error = exc
                continue
            found.append((0 if batch_only else cap, sizes, original, n_in, n_out))
            return True
        return False

    def over(n_in: int, n_out: int | None) -> bool:
        return n_in > rules.element_budget or (n_out or 0) > rules.element_budget

    # The target cap, then larger caps until one runs; then smaller ones while over the budget.
    cap = rules.cap
    while not attempt(cap) and cap < rules.max_cap:
        cap *= 2
    while found and over(*found[-1][3:]) and cap > rules.min_cap:
        cap //= 2
        if not attempt(cap):
            break
    # A model may tie sizes together in ways the rules cannot see (a LayerNorm over a width that must equal a
    # channel count): when only a large cap ran, shrinking the batch alone may still give a smaller problem.
    if not found or found[-1][0] > rules.cap:
        attempt(rules.cap, batch_only=True)
    if not found:
        raise TaskError(f"task {name!r}: fit={rules.name!r} found no size at which the reference runs (largest cap "
                        f"{cap}: {type(last_error).__name__}: {str(last_error)[:300]}); pass explicit sizes= instead",
                        name)
    within = [f for f in found if not over(*f[3:])]
    best = max(within, key=lambda f: f[0]) if within else min(found, key=lambda f: f[3] + (f[4] or 0))
    used, sizes, original, n_in, n_out = best
    if not within:
        sizes, n_in, n_out = _refine(source, rules, ref, pinned or {}, sizes, n_in, n_out)
    still_over = over(n_in, n_out)
    return Fit(sizes=sizes, notes=_notes(rules, sizes, original, pinned or {}, used, still_over), cap=used,
               input_elements=n_in, output_elements=n_out, within_budget=not still_over)


def _refine(source: str, rules: FitRules, ref: Any, pinned: dict[str, Any], sizes: dict[str, Any], n_in: int,
            n_out: int | None) -> tuple[dict[str, Any], int, int | None]:
    """Rule 6's last resort for a problem still over the budget: shrink the remaining constants one at a time to
    their target, keeping each change with which the reference still runs and the problem gets smaller (a model
    that ties two sizes together blocks only those two)."""
    target, _ = propose(source, rules.min_cap, rules, pinned)
    unbounded = 1 << 62  # a cap nothing exceeds: propose then only applies the pins and recomputes derived sizes
    for name, value in target.items():
        if name in pinned or sizes.get(name) == value:
            continue
        trial, _ = propose(source, unbounded, rules, {**sizes, name: value})
        try:
            t_in, t_out = _check(ref, trial)
        except Exception:  # noqa: BLE001 - this constant is tied to another: leave it
            continue
        if t_in + (t_out or 0) < n_in + (n_out or 0):
            sizes, n_in, n_out = trial, t_in, t_out
    return sizes, n_in, n_out


def _notes(rules: FitRules, sizes: dict, original: dict, pinned: dict, cap: int, over: bool) -> list[str]:
    changed = [f"{k} {original.get(k)!r}->{v!r}" for k, v in sizes.items() if k not in pinned]
    how = f"cap {cap} per dimension" if cap else "batch only: the model ties its other sizes together"
    text = f"fit={rules.name} ({how}): " + (", ".join(changed) if changed else "nothing to shrink")
    notes = [text]
    if over:
        notes.append(f"fit={rules.name}: still above the budget of {rules.element_budget} elements per input set or "
                     "output (sizes fixed inside the model's code cannot be shrunk)")
    return notes


