"""What a kernel language is to the workbench: one `Language` per module of this package, registered in
`workbench/languages/__init__.py`. A language says how to tell it from source, whether a machine can run it, which
kernels in a source are the candidate's own (judge side, from the AST), and, in the runner, what the loader sets up
before the candidate's import and which objects' launches count as the candidate's (docs/languages.md).

Trust: the judge-side methods read only the source text. The runner-side methods are the runner's own loader code,
run before the candidate's import; what they report afterwards is runner data, which only ever counts against the
candidate (docs/trust-boundary.md).
"""

from __future__ import annotations

import ast
import importlib.util
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Availability:
    """Whether this machine can run a language's candidates and, when not, the compile error's message (what is
    missing and how to get it)."""

    runs: bool
    message: str = ""


class LaunchHook:
    """Replaces how one kernel object launches (for launch tracking and the record of what ran) and puts it back.
    The default swaps the object's instance attribute `attribute` (Triton's `run`)."""

    def __init__(self, obj: Any, attribute: str = "run"):
        self.obj, self.attribute = obj, attribute
        self.had = attribute in getattr(obj, "__dict__", {})
        self.previous = obj.__dict__.get(attribute) if self.had else None
        self.original: Callable[..., Any] = getattr(obj, attribute)

    def install(self, fn: Callable[..., Any]) -> None:
        setattr(self.obj, self.attribute, fn)

    def current(self) -> Any:
        return self.obj.__dict__.get(self.attribute)

    def restore(self) -> None:
        if self.had:
            setattr(self.obj, self.attribute, self.previous)
        else:
            self.obj.__dict__.pop(self.attribute, None)


class CallHook(LaunchHook):
    """For kernel objects launched by calling them (`kernel(x)`): Python looks `__call__` up on the type, so the
    object gets a subclass of its own class for the duration, whatever name the candidate calls it by."""

    def __init__(self, obj: Any):
        self.obj, self.attribute = obj, "__call__"
        self.cls = type(obj)
        self.original = obj.__call__
        self.tracked: type | None = None

    def install(self, fn: Callable[..., Any]) -> None:
        def __call__(_self: Any, *args: Any, **kwargs: Any) -> Any:
            return fn(*args, **kwargs)

        self.tracked = type(self.cls.__name__, (self.cls,), {"__call__": __call__, "__module__": self.cls.__module__})
        self.obj.__class__ = self.tracked

    def current(self) -> Any:
        return type(self.obj).__dict__.get("__call__") if type(self.obj) is self.tracked else None

    def restore(self) -> None:
        self.obj.__class__ = self.cls


def installed(module: str) -> bool:
    """Whether `module` can be imported here (found on the path; a top-level name is not imported, a dotted one
    imports its parents). A package that fails while its parents import counts as missing."""
    try:
        return importlib.util.find_spec(module) is not None
    except Exception:  # noqa: BLE001 - a broken install (e.g. a missing native library) is not a usable one
        return False


def decorated(tree: ast.Module, decorators: Iterable[str]) -> list[ast.FunctionDef]:
    """Functions (at any depth, methods included) decorated with one of the dotted `decorators`, written either in
    full (`@triton.jit`, `@triton.jit(...)`) or by a name imported from the decorator's module (`from triton import
    jit` then `@jit`)."""
    wanted = set(decorators)
    imported: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                imported[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:  # `import cutlass.cute as cute`: cute.kernel is cutlass.cute.kernel
                    imported[alias.asname] = alias.name
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for dec in node.decorator_list:
            target = dec.func if isinstance(dec, ast.Call) else dec
            text = ast.unparse(target)
            head, _, rest = text.partition(".")
            full = imported.get(head, head) + (f".{rest}" if rest else "")
            if text in wanted or full in wanted:
                found.append(node)
                break
    return found  # type: ignore[return-value]


def imports_module(source: str, module: str) -> bool:
    """Whether the source imports `module` (or a submodule, or names from it)."""
    pattern = rf"^\s*(?:import\s+{re.escape(module)}\b|from\s+{re.escape(module)}(?:\.\w+)*\s+import\b)"
    return re.search(pattern, source, re.MULTILINE) is not None


@dataclass(frozen=True)
class Language:
    """One kernel language. Subclasses override the methods their language needs; the defaults describe a
    language without kernels of its own (plain PyTorch)."""

    #: The name a Candidate, the CLI, the magic and the store use.
    name: str
    #: How prompts and widgets name it.
    title: str
    #: Dotted decorator names that mark the candidate's kernels (`triton.jit`, `helion.kernel`).
    decorators: tuple[str, ...] = ()
    #: Its prompt contract (`workbench/llm/templates/<contract>.txt`); "" when prompts cannot ask for it.
    contract: str = ""
    #: The module a candidate imports, the distribution that provides it, and the extra that pins it.
    module: str | None = None
    distribution: str | None = None
    extra: str | None = None
    #: Whether it compiles kernels whose launches the judge must corroborate under the strict policy.
    compiled: bool = False
    #: Whether the runner counts this language's launches itself (`kernel_objects`), so a call that launched none
    #: of them, or returned what no launch wrote, is a decoy.
    tracks_launches: bool = False
    #: Whether its kernels tune themselves on their first call (that call gets the compile budget).
    tunes_on_first_call: bool = False
    #: Where its JIT cache is bound in the runner: a directory the judge keeps per source (None: no such cache).
    cache_mount: str | None = None
    #: Whether on a CPU its kernels run in an interpreter (their times are labelled, never set beside compiled code),
    #: and the judge corroborates the reported launches by probe calls (`probe_target`, `judge/evidence/probe.py`).
    interpreted_on_cpu: bool = False
    #: What runs its kernels on a CPU, for messages ("Triton's CPU interpreter").
    cpu_runtime: str = ""

    def interpreted(self, device: str) -> bool:
        """Whether its kernels run in an interpreter on `device` (their time decides no speedup verdict)."""
        return self.interpreted_on_cpu and not device.startswith("cuda")

    # -- the caller and the judge: source text only --
    def detect(self, source: str) -> bool:
        """Whether `source` is written in this language (inference tries languages in the registry's order)."""
        return False

    def has_kernel(self, tree: ast.Module, source: str) -> bool:
        """Whether the source defines at least one kernel of this language (`no-custom-kernel` otherwise)."""
        return bool(decorated(tree, self.decorators)) if self.decorators else True

    def missing_kernel(self) -> str:
        """The `no-custom-kernel` detail when `has_kernel` is False."""
        return f"no function decorated with @{self.decorators[0]}" if self.decorators else "no kernel"

    def own_kernel_names(self, tree: ast.Module | None, source: str) -> set[str]:
        """Names of the kernels the source defines, as the judge matches them against profiled kernel names."""
        return {fn.name for fn in decorated(tree, self.decorators)} if tree is not None and self.decorators else set()

    def is_own_kernel(self, kernel: str, names: set[str]) -> bool:
        """Whether a profiled GPU kernel name is one of `names` (the function name inside 'void ns::f<..>(..)')."""
        return base_name(kernel) in names

    def availability(self, device: str) -> Availability:
        """Whether this machine can run the language's candidates on `device` (the judge refuses before loading)."""
        return Availability(True)

    # -- the runner: its own loader code, before the candidate's import --
    def prepare_runner(self, device: str, workdir: str) -> None:
        """Set up what the language needs in the runner (environment, caches, build hooks)."""

    def kernel_objects(self, module: Any) -> list[tuple[str, Any]]:
        """(name, object) of the module's kernels whose launches count as the candidate's own."""
        return []

    def launch_hook(self, obj: Any) -> LaunchHook:
        return LaunchHook(obj)

    def probe_target(self) -> tuple[type, str] | None:
        """On a CPU, (class, method) every interpreted launch goes through, wrapped to burn a probe call's budget."""
        return None

    def tuned_config(self, module: Any) -> str:
        """The configuration its autotuner chose, as text ("" when none): recorded in the Result's metadata."""
        return ""


def base_name(kernel: str) -> str:
    """The function name in a profiler's kernel name: 'void ns::name<...>(args)' -> 'name'."""
    text = kernel.strip()
    if text.startswith("void "):
        text = text[5:]
    text = re.split(r"[(<]", text, maxsplit=1)[0]
    return text.rsplit("::", 1)[-1].strip()


def module_spaces(module: Any) -> list[dict[str, Any]]:
    """The namespaces where a candidate keeps kernel objects: its globals and its classes' attributes."""
    return [vars(module)] + [vars(v) for v in list(vars(module).values()) if isinstance(v, type)]


def objects_of_type(module: Any, kind: type) -> list[tuple[str, Any]]:
    """(name, object) of every distinct instance of `kind` in the module's globals and classes."""
    found: list[tuple[str, Any]] = []
    seen: set[int] = set()
    for space in module_spaces(module):
        for name, obj in list(space.items()):
            if isinstance(obj, kind) and id(obj) not in seen:
                seen.add(id(obj))
                found.append((name, obj))
    return found
