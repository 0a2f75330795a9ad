"""Task: a PyTorch reference in KernelBench format plus what the workbench needs to judge candidates.

A task's reference is *source text* in KernelBench format (`Model`, `get_inputs`, `get_init_inputs`,
module-level size constants). Shipping text rather than objects lets the isolated worker rebuild the
exact same task in a fresh process, and makes every KernelBench file a task without edits.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import importlib.util
import sys
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from workbench.errors import TaskError, UnknownNameError
from workbench.tasks.assignments import module_constants
from workbench.tasks.distributions import DISTRIBUTIONS, check_names
from workbench.tasks.precision import IEEE, PrecisionPolicy
from workbench.tasks.sizes import complete_size

if TYPE_CHECKING:
    from workbench.candidate import Candidate


@dataclass(frozen=True)
class Tolerance:
    """Elementwise bound |out - ref| <= atol + rtol * |ref|, with ref computed in float64."""

    atol: float
    rtol: float


#: Per-dtype defaults. fp32 is tight enough that fp16 arithmetic (~5e-4 relative) fails (docs/anti-cheating.md, cheat 12).
DEFAULT_TOLERANCES: dict[str, Tolerance] = {
    "float64": Tolerance(1e-9, 1e-9),
    "float32": Tolerance(1e-5, 1e-5),
    "float16": Tolerance(1e-2, 1e-2),
    "bfloat16": Tolerance(2e-2, 2e-2),
}

#: Kernel policies (docs/verdicts.md). "strict": every FLOP in the candidate's own kernels, torch compute in
#: forward is rejected statically. "partial": library calls (cuDNN conv, cuBLAS GEMM) may do part of the work; the
#: runtime coverage check judges how much. A candidate with no kernel of its own is rejected under both.
KERNEL_POLICIES = ("strict", "partial")


@dataclass
class Task:
    """A problem to solve: the reference, its sizes, dtypes, tolerances and (optionally) its work counts.

    `sizes` holds named presets ("cpu", "gpu") of module-constant overrides; `sweep` holds, per device kind,
    a list of size dicts used for size sweeps and for multi-size correctness checks. A size dict may carry a
    `dtype` key (a dtype name) when the reference source defines a module-level `dtype` constant.
    """

    name: str
    source: str
    sizes: dict[str, dict[str, Any]] = field(default_factory=dict)
    sweep: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    dtypes: tuple[str, ...] = ("float32",)
    tolerances: dict[str, Tolerance] = field(default_factory=dict)
    distributions: tuple[str, ...] = DISTRIBUTIONS
    flops: Callable[[dict[str, Any]], float] | None = None
    bytes: Callable[[dict[str, Any]], float] | None = None
    solution: str | None = None
    description: str = ""
    path: str | None = None
    #: Candidate language of `solution`.
    solution_language: str = "triton"
    #: Free-form notes shown with results (e.g. why a distribution is excluded, what `fit` shrank).
    notes: tuple[str, ...] = ()
    #: Precision policy applied to reference and candidate alike (a PrecisionPolicy, or a registered name such as
    #: "ieee" or "tf32"; stored as the policy). Default: IEEE fp32, no TF32, no reduced-precision reductions.
    precision: PrecisionPolicy = IEEE
    #: "strict" or "partial" (see KERNEL_POLICIES).
    kernel_policy: str = "strict"
    #: A true lower bound on the FLOPs any correct implementation needs at a size (faster-than-physics uses it);
    #: None when the task declares none. The reference's own FLOP count is not a lower bound.
    min_flops: Callable[[dict[str, Any]], float] | None = None

    def __post_init__(self) -> None:
        self.precision = PrecisionPolicy.from_spec(self.precision)
        check_names(self.distributions)  # input distributions (workbench.tasks.distributions)
        if self.kernel_policy not in KERNEL_POLICIES:
            raise UnknownNameError("kernel policy", self.kernel_policy, list(KERNEL_POLICIES))

    # ---- sizes -------------------------------------------------------------------------------------
    def size(self, preset: str | dict[str, Any] | None = None, device: str = "cpu") -> dict[str, Any]:
        """Resolve a preset name or a dict to the size an evaluation runs; None picks the device's preset.

        A dict may be partial (`{"dim": 64}`): it is checked (workbench.tasks.sizes.SizeError for an unknown name,
        a wrong type or a dimension below 1) and the names it leaves out keep the device's preset."""
        if isinstance(preset, dict):
            return complete_size(self, preset, device)
        key = preset or ("gpu" if str(device).startswith("cuda") else "cpu")
        if key in self.sizes:
            return dict(self.sizes[key])
        if not self.sizes:
            return {}
        raise UnknownNameError("size preset", key, list(self.sizes))

    def check_sizes(self, device: str = "cpu", limit: int = 3) -> list[dict[str, Any]]:
        """Sizes used by the correctness protocol: the device preset plus up to `limit-1` sweep points."""
        main = self.size(None, device)
        kind = "gpu" if device.startswith("cuda") else "cpu"
        extra = [s for s in self.sweep.get(kind, []) if s != main]
        return [main] + extra[: max(limit - 1, 0)]

    def solution_candidate(self) -> Candidate:
        """The task's honest reference solution as a Candidate (`solution` may hold source text or a path)."""
        from workbench.candidate import Candidate

        if not self.solution:
            raise TaskError(f"task {self.name!r} ships no reference solution", self.name)
        text = self.solution
        if "\n" not in text and Path(text).exists():
            text = Path(text).read_text()
        return Candidate(source=text, language=self.solution_language, name=f"{self.name}-solution")

    def tolerance(self, dtype: str) -> Tolerance:
        return self.tolerances.get(dtype) or DEFAULT_TOLERANCES.get(dtype) or DEFAULT_TOLERANCES["float32"]

    # ---- identity and transport --------------------------------------------------------------------
    @property
    def source_hash(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()[:16]

    def to_spec(self) -> dict[str, Any]:
        """The JSON-able part a worker needs to rebuild the task (no callables)."""
        return {
            "name": self.name,
            "source": self.source,
            "sizes": self.sizes,
            "sweep": self.sweep,
            "dtypes": list(self.dtypes),
            "tolerances": {k: dataclasses.asdict(v) for k, v in self.tolerances.items()},
            "distributions": list(self.distributions),
            "path": self.path,
            "precision": self.precision.to_spec(),
            "kernel_policy": self.kernel_policy,
            "notes": list(self.notes),
        }

    @classmethod
    def from_spec(cls, spec: dict[str, Any]) -> Task:
        return cls(
            name=spec["name"],
            source=spec["source"],
            sizes=spec.get("sizes", {}),
            sweep=spec.get("sweep", {}),
            dtypes=tuple(spec.get("dtypes", ("float32",))),
            tolerances={k: Tolerance(**v) for k, v in spec.get("tolerances", {}).items()},
            distributions=tuple(spec.get("distributions", DISTRIBUTIONS)),
            path=spec.get("path"),
            precision=PrecisionPolicy.from_spec(spec.get("precision")),
            kernel_policy=spec.get("kernel_policy", "strict"),
            notes=tuple(spec.get("notes", ())),
        )

    @classmethod
    def from_source(cls, source: str, name: str = "custom", sizes: dict[str, Any] | None = None, **kw: Any) -> Task:
        """A task from KernelBench-format source text; `sizes` overrides its module constants everywhere."""
        task = cls(name=name, source=source, **kw)
        if sizes:
            task.sizes = {key: {**task.sizes.get(key, {}), **sizes} for key in ("cpu", "gpu")}
        validate_reference_source(source, name, sizes or {})
        return task

    def load(self) -> LoadedReference:
        """Import the reference source as a module (used inside workers and by tests)."""
        return LoadedReference(self)

    def __repr__(self) -> str:
        return (f"Task({self.name!r}, sizes={list(self.sizes)}, dtypes={self.dtypes}, precision="
                f"{self.precision.name!r}, kernel_policy={self.kernel_policy!r})")


# ---- loading reference source as a module ---------------------------------------------------------

_REQUIRED = ("Model", "get_inputs", "get_init_inputs")


def import_source(source: str, module_name: str, directory: str | None = None) -> ModuleType:
    """Write source to a real .py file and import it (compiled Triton rejects exec'd code)."""
    directory = directory or tempfile.mkdtemp(prefix="kwb_src_")
    path = Path(directory) / f"{module_name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    return module


def validate_reference_source(source: str, name: str, sizes: dict[str, Any]) -> None:
    """Cheap static validation so a bad file fails at load time with a clear message."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise TaskError(f"task {name!r}: reference source has a syntax error at line {exc.lineno}: {exc.msg}", name) from exc
    defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    missing = [r for r in _REQUIRED if r not in defined]
    if missing:
        raise TaskError(
            f"task {name!r}: not KernelBench format, missing {', '.join(missing)}. A task file defines "
            "`class Model(nn.Module)`, `get_inputs()` and `get_init_inputs()`.",
            name,
        )
    constants = module_constants(tree)
    unknown = [k for k in sizes if k != "dtype" and k not in constants]
    if unknown:
        raise TaskError(
            f"task {name!r}: cannot override {', '.join(unknown)}; the file's module-level constants are "
            f"{', '.join(sorted(constants)) or '(none)'}.",
            name,
        )


class LoadedReference:
    """A task's reference imported as a module, with size overrides applied per call."""

    _counter = 0

    def __init__(self, task: Task, directory: str | None = None):
        LoadedReference._counter += 1
        self.task = task
        self.module = import_source(task.source, f"kwb_ref_{task.source_hash}_{LoadedReference._counter}", directory)
        self.defaults = {k: getattr(self.module, k) for k in module_constants(ast.parse(task.source))}
        #: Sizes at which get_inputs failed on the GPU (-> why): drawn on the CPU and moved from then on.
        self._drawn_on_host: dict[str, str] = {}

    def apply_size(self, size: dict[str, Any]) -> None:
        import torch

        for key, default in self.defaults.items():
            setattr(self.module, key, default)
        for key, value in size.items():
            if key == "dtype":
                if not hasattr(self.module, "dtype"):
                    raise TaskError(f"task {self.task.name!r} has no module-level `dtype` to override", self.task.name)
                value = getattr(torch, value) if isinstance(value, str) else value
            elif key not in self.defaults:
                raise TaskError(
                    f"task {self.task.name!r}: unknown size constant {key!r}; known: {', '.join(sorted(self.defaults))}",
                    self.task.name,
                )
            setattr(self.module, key, value)

    def init_inputs(self, size: dict[str, Any], seed: int = 0) -> list:
        import torch

        from workbench.seeding import seed_all  # torch's import waits for a task's inputs, not for the registry

        self.apply_size(size)
        with torch.random.fork_rng(devices=[]):
            seed_all(seed)
            return list(self.module.get_init_inputs())

    def make_inputs(self, size: dict[str, Any], seed: int, device: str = "cpu", dist: str = "default", *,
                    note: Callable[[str], None] | None = None, record: Any = None) -> list:
        """Fresh inputs: the file's own `get_inputs` under `seed`, its random draws rerouted to `dist` (one of
        DISTRIBUTIONS; "default" runs it untouched), drawn on `device` (workbench.tasks.inputs). Where the task's
        code fails on a GPU they are drawn on the CPU and moved, and `note` is told. `record` (a
        workbench.tasks.reroute.DrawRecord) collects what was drawn."""
        from workbench.tasks.inputs import draw_inputs

        self.apply_size(size)
        return self._on_device(size, device, note, lambda where: draw_inputs(
            self.module.get_inputs, dist, seed, where, move_to=device, record=record))

    def refill(self, targets: list, size: dict[str, Any], seed: int, device: str = "cpu", *,
               note: Callable[[str], None] | None = None) -> None:
        """Overwrite the tensors of `targets` (an input set from `make_inputs(size, ..., device)`) in place with
        the default-distribution inputs of `seed`: the values `make_inputs(size, seed, device)` returns, drawn
        straight into the existing tensors where get_inputs returns a draw as is (no second input set on the GPU),
        computed and copied in where it builds on them. For timing loops that must change the inputs' values
        between calls without moving them."""
        from workbench.tasks.inputs import refill_inputs

        self.apply_size(size)
        self._on_device(size, device, note, lambda where: refill_inputs(self.module.get_inputs, targets, seed, where))

    def _on_device(self, size: dict[str, Any], device: str, note: Callable[[str], None] | None,
                   draw: Callable[[str], Any]) -> Any:
        """`draw(device)`; on a GPU where the task's code failed there (at this size), `draw("cpu")` instead."""
        key = repr(sorted(size.items()))
        if str(device).startswith("cuda") and key not in self._drawn_on_host:
            try:
                return draw(device)
            except Exception as exc:  # noqa: BLE001 - retried on the CPU, which raises the task's own error
                failure = f"{type(exc).__name__}: {str(exc)[:160]}"
            out = draw("cpu")
            self._drawn_on_host[key] = failure
        else:
            out = draw("cpu" if key in self._drawn_on_host else device)
        if key in self._drawn_on_host and note is not None:
            note(f"inputs were drawn on the CPU and copied to {device}: the task's get_inputs failed on the device "
                 f"({self._drawn_on_host[key]})")
        return out


# ---- registry of built-in tasks ----------------------------------------------------------------------

_REGISTRY: dict[str, Task | Callable[[], Task]] = {}


def register_task(task: Task | Callable[[], Task], name: str | None = None) -> None:
    """Register a task (or a zero-argument factory, built on first use) under its name."""
    key = name or (task.name if isinstance(task, Task) else None)
    if not key:
        raise TaskError("register_task needs a name for a task factory")
    _REGISTRY[key] = task


def _ensure_builtins() -> None:
    # `from workbench import tasks` would return the function `workbench.tasks`, not the package.
    # `from workbench import tasks` would return the function `workbench.tasks`, not the package; the package
    # itself is callable (see workbench/tasks/__init__.py), so `wb.tasks()` works after it is imported.
    importlib.import_module("workbench.tasks")  # registers on import


def tasks() -> list[str]:
    """Names of all registered tasks, built-in ones included."""
    _ensure_builtins()
    return sorted(_REGISTRY)


def get_task(name: str) -> Task:
    _ensure_builtins()
    if name not in _REGISTRY:
        raise UnknownNameError("task", name, list(_REGISTRY))
    entry = _REGISTRY[name]
    if not isinstance(entry, Task):
        entry = entry()
        _REGISTRY[name] = entry
    return entry


def all_tasks() -> Iterable[Task]:
    return [get_task(n) for n in tasks()]
