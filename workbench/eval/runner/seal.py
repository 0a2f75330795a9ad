"""What the runner's hook points held before the candidate was imported, and whether they still do
(docs/anti-cheating.md, cheats 9, 15, 26): the runner's modules, Triton's launch path, the extension loader, the
profiler. It lives in the candidate's process, so the judge corroborates it with its own measurements."""

from __future__ import annotations

import builtins
from types import ModuleType
from typing import Any

# Bound once, before any candidate: the check must not run through names the candidate can rebind.
_getattr, _isinstance, _type, _vars, _tuple, _sorted, _set = getattr, isinstance, type, vars, tuple, sorted, set
_BUILTIN_NAMES = frozenset(dir(builtins))
_MISSING = object()


def _code_of(value: Any) -> tuple[Any, Any, Any]:
    """(code, defaults, keyword defaults) of a function, of a property's getter, or (None, None, None)."""
    fn = _getattr(value, "fget", value)
    fn = _getattr(fn, "__func__", fn)
    return (_getattr(fn, "__code__", None), _getattr(fn, "__defaults__", None), _getattr(fn, "__kwdefaults__", None))


def _lookup(owner: Any, attr: str) -> Any:
    """What `owner` holds under `attr` (a class's own dictionary first, so a replaced inherited method shows)."""
    if _isinstance(owner, dict):
        return owner.get(attr, _MISSING)
    if _isinstance(owner, type):
        own = _vars(owner)
        return own[attr] if attr in own else _getattr(owner, attr, _MISSING)
    return _getattr(owner, attr, _MISSING)


class Seal:
    """(label, owner, attribute, value, code, defaults, keyword defaults) recorded at one moment, and the namespaces
    whose every global was recorded (a name added later that shadows a builtin is a patch too)."""

    __slots__ = ("_entries", "_spaces")

    def __init__(self) -> None:
        self._entries: list[tuple[str, Any, str, Any, Any, Any, Any]] = []
        self._spaces: list[tuple[str, dict[str, Any], frozenset[str]]] = []

    def add(self, label: str, owner: Any, attr: str) -> None:
        value = _lookup(owner, attr)
        if value is not _MISSING:
            self._entries.append((label, owner, attr, value, *_code_of(value)))

    def add_module(self, module: ModuleType) -> None:
        """Every global of `module` that is a function, class or module."""
        space = _vars(module)
        for name, value in _sorted(space.items()):
            if name.startswith("__"):
                continue
            if callable(value) or _isinstance(value, ModuleType):
                self.add(f"{module.__name__}.{name}", space, name)
        self._spaces.append((module.__name__, space, frozenset(space)))

    def add_class(self, cls: type, label: str, *attrs: str) -> None:
        for attr in attrs:
            self.add(f"{label}.{attr}", cls, attr)

    def broken(self) -> tuple[str, ...]:
        """Labels of the hook points that no longer hold what they held when sealed."""
        out = []
        for label, owner, attr, value, code, defaults, kwdefaults in self._entries:
            now = _lookup(owner, attr)
            if now is not value or not _same(_code_of(now), (code, defaults, kwdefaults)):
                out.append(label)
        for name, space, names in self._spaces:
            for added in _set(space) - names:
                if added in _BUILTIN_NAMES:
                    out.append(f"{name}.{added} (shadows the builtin)")
        return _tuple(out)


def _same(now: tuple[Any, Any, Any], then: tuple[Any, Any, Any]) -> bool:
    """Identity, not equality: a defaults tuple rebuilt with equal values is still a replacement."""
    return all(a is b for a, b in zip(now, then, strict=True))


def triton_entry_points(seal: Seal) -> None:
    """Triton's launch path, compiled and interpreted: what `kernel[grid](...)` runs."""
    try:
        from triton.runtime import autotuner, jit
    except Exception:  # pragma: no cover - triton missing
        return
    seal.add_class(jit.KernelInterface, "triton.runtime.jit.KernelInterface", "__getitem__", "run")
    seal.add_class(jit.JITFunction, "triton.runtime.jit.JITFunction", "run", "__call__", "_pack_args", "create_binder")
    seal.add_class(autotuner.Autotuner, "triton.runtime.autotuner.Autotuner", "run", "prune_configs")
    seal.add_class(autotuner.Heuristics, "triton.runtime.autotuner.Heuristics", "run")
    try:
        from triton.runtime import interpreter
    except Exception:  # pragma: no cover - an older triton without the interpreter module
        return
    seal.add_class(interpreter.InterpretedFunction, "triton.runtime.interpreter.InterpretedFunction", "run",
                   "__call__", "__getitem__")
    seal.add_class(interpreter.GridExecutor, "triton.runtime.interpreter.GridExecutor", "__call__", "__init__",
                   "_init_args_hst", "_restore_args_dev")


def torch_entry_points(seal: Seal) -> None:
    """What the launch tracker compares with, the profiler and the CUDA extension loader (the build cache's wrapper)."""
    import torch
    import torch.profiler
    import torch.utils.cpp_extension as ext

    seal.add("torch.equal", torch, "equal")
    seal.add("torch.profiler.profile", torch.profiler, "profile")
    seal.add_class(torch.profiler.profile, "torch.profiler.profile", "__enter__", "__exit__", "start", "stop",
                   "events")
    seal.add("torch.utils.cpp_extension.load_inline", ext, "load_inline")
    seal.add("torch.utils.cpp_extension._import_module_from_library", ext, "_import_module_from_library")
