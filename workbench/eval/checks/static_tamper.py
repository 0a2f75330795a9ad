"""Static checks for reaching into the harness (`harness-tamper`: trace hooks, frames, the collector's graph,
code-object swaps, workbench's modules; none has a use in a kernel) or computing elsewhere (`foreign-compute`, a
warning: coverage decides). docs/anti-cheating.md, cheats 9, 15, 16, 17."""

from __future__ import annotations

import ast
from collections.abc import Collection

from workbench.eval.checks.flags import Finding

#: Calls that reach into the interpreter or the harness (canonical dotted names, import aliases resolved).
TAMPER_CALLS = {
    "sys.setprofile", "sys.settrace", "threading.setprofile", "threading.settrace", "threading.setprofile_all_threads",
    "threading.settrace_all_threads", "sys._getframe", "sys._current_frames", "sys.monitoring.register_callback",
    "sys.monitoring.use_tool_id", "sys.monitoring.set_events", "inspect.stack", "inspect.currentframe",
    "inspect.getouterframes", "inspect.getinnerframes", "inspect.trace", "gc.get_objects", "gc.get_referrers",
    "gc.get_referents", "traceback.extract_stack", "traceback.walk_stack",
}
#: Frame and code attributes: walking to a caller's frame (`f_back`), reading its variables, swapping code objects.
TAMPER_ATTRS = {"f_back", "f_globals", "f_locals", "tb_frame", "gi_frame", "cr_frame", "ag_frame"}
#: Packages that make up the harness.
HARNESS_PACKAGES = ("workbench",)
#: Libraries that compute outside the candidate's kernels (docs/anti-cheating.md, cheat 17).
FOREIGN_MODULES = {"numpy", "ctypes", "cffi", "subprocess", "scipy", "numba", "jax", "cupy", "tensorflow"}


def imported(node: ast.AST, packages: Collection[str]) -> str:
    """'imports x' or 'imports from x' when `node` imports one of `packages` (top-level names), else ''."""
    if isinstance(node, ast.Import):
        return next((f"imports {a.name}" for a in node.names if a.name.split(".")[0] in packages), "")
    if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in packages:
        return f"imports from {node.module}"
    return ""


def dotted(node: ast.expr, imports: dict[str, str]) -> str:
    """`a.b.c` with the import alias of `a` resolved (`s._getframe` -> `sys._getframe` after `import sys as s`)."""
    if isinstance(node, ast.Name):
        return imports.get(node.id, node.id)
    return f"{dotted(node.value, imports)}.{node.attr}" if isinstance(node, ast.Attribute) else ""


def harness_tamper(tree: ast.Module, imports: dict[str, str]) -> list[Finding]:
    parents = {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    for node in ast.walk(tree):
        line = getattr(node, "lineno", "?")
        if what := imported(node, HARNESS_PACKAGES):
            return [Finding("harness-tamper", f"{what} at line {line}")]
        if isinstance(node, ast.Call):
            name = dotted(node.func, imports)
            if name in TAMPER_CALLS:
                return [Finding("harness-tamper", f"calls {name} at line {line}")]
            text = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            if name in ("importlib.import_module", "__import__", "importlib.__import__") and \
                    any(t.split(".")[0] in HARNESS_PACKAGES for t in text):
                return [Finding("harness-tamper", f"imports {text[0]} dynamically at line {line}")]
            if name == "setattr" and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and \
                    node.args[1].value in ("__code__", "__globals__", "__defaults__", "__kwdefaults__"):
                return [Finding("harness-tamper", f"setattr(..., {node.args[1].value!r}, ...) at line {line}")]
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for sub in ast.walk(t):
                    if isinstance(sub, ast.Attribute) and sub.attr in ("__code__", "__defaults__", "__kwdefaults__"):
                        return [Finding("harness-tamper", f"replaces a function's {sub.attr} at line {line}")]
        elif isinstance(node, ast.Attribute):
            if node.attr in TAMPER_ATTRS:
                return [Finding("harness-tamper", f"reads frame attribute .{node.attr} at line {line}")]
            if dotted(node, imports) == "sys.modules":
                if problem := _sys_modules_use(node, parents):
                    return [Finding("harness-tamper", f"{problem} at line {line}")]
    return []


def _sys_modules_use(node: ast.Attribute, parents: dict[int, ast.AST]) -> str:
    """Why a `sys.modules` use reaches for the harness: a key naming it, or a scan of every module."""
    parent = parents.get(id(node))
    key: ast.expr | None = None
    if isinstance(parent, ast.Subscript) and parent.value is node:
        key = parent.slice
    elif isinstance(parent, ast.Attribute) and parent.attr in ("get", "pop", "setdefault", "__getitem__"):
        call = parents.get(id(parent))
        key = call.args[0] if isinstance(call, ast.Call) and call.args else None
    else:
        return "scans sys.modules"  # iteration, .values(), .items(), vars(): looking for something unnamed
    if isinstance(key, ast.Constant) and isinstance(key.value, str):
        if key.value.split(".")[0] in HARNESS_PACKAGES or key.value.startswith("kwb_"):
            return f"looks up sys.modules[{key.value!r}]"
        return ""
    if isinstance(key, ast.Name) and key.id == "__name__":
        return ""  # its own module
    return "looks up sys.modules with a computed key"


def foreign_compute(tree: ast.Module, forward: list[ast.FunctionDef]) -> list[Finding]:
    """Imports of libraries that compute off the candidate's kernels, and `.numpy()` in forward."""
    for node in ast.walk(tree):
        if what := imported(node, FOREIGN_MODULES):
            return [Finding("foreign-compute", f"{what} at line {node.lineno}")]
    for fn in forward:
        for node in ast.walk(fn):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "numpy":
                return [Finding("foreign-compute", f".numpy() in forward at line {node.lineno}")]
    return []


#: Clocks a harness times with: replacing one is a timing cheat even where it cannot work.
TIMER_PREFIXES = ("time.", "torch.cuda.Event", "torch.cuda.synchronize", "torch.cuda.Stream.synchronize",
                  "torch.cuda.current_stream", "torch.cuda.default_stream", "torch.cuda._sleep", "triton.testing.",
                  "timeit.")


def _timer(name: str) -> bool:
    return any(name == p.rstrip(".") or name.startswith(p) for p in TIMER_PREFIXES)


def timer_patch(tree: ast.Module, imports: dict[str, str]) -> list[Finding]:
    """Assignments to a timer (`time.perf_counter = ...`), directly or through setattr (cheat 9)."""
    for node in ast.walk(tree):
        line = getattr(node, "lineno", "?")
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                name = dotted(t, imports) if isinstance(t, ast.Attribute) else ""
                if name and _timer(name):
                    return [Finding("timer-patch", f"replaces {name} at line {line}")]
        elif isinstance(node, ast.Call) and dotted(node.func, imports) == "setattr" and len(node.args) >= 2:
            owner = dotted(node.args[0], imports)
            attr = node.args[1].value if isinstance(node.args[1], ast.Constant) else None
            if owner and isinstance(attr, str) and _timer(f"{owner}.{attr}"):
                return [Finding("timer-patch", f"setattr({owner}, {attr!r}, ...) at line {line}")]
    return []
