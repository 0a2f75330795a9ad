"""Static (AST) checks on candidate source before any of it runs (docs/anti-cheating.md, cheats 4, 6, 8, 10, 15-17):
allocating, viewing and launching kernels in forward is allowed; fallbacks, caches, threads, the reference and the
harness are not; torch compute in forward is flagged under "strict" and decided by what ran (`what_ran.py`). The entry
is `ModelNew` (or an alias), else `Model`; beside a `ModelNew`, `Model` is the reference."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from workbench import languages
from workbench.candidate import BASELINE_POLICY
from workbench.errors import UnknownNameError
from workbench.eval.checks.flags import Finding, first_per_flag
from workbench.eval.checks.static_tamper import foreign_compute, harness_tamper, imported, timer_patch

#: torch / tensor calls that only allocate, reshape or describe: allowed in a kernel candidate's forward.
ALLOWED_TORCH = {
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
    "arange", "tensor", "as_strided", "device", "dtype", "Size", "get_default_dtype", "is_tensor", "numel",
    "cdiv", "next_power_of_2", "no_grad", "inference_mode", "manual_seed", "finfo", "iinfo", "is_floating_point",
    "is_grad_enabled", "set_grad_enabled", "broadcast_shapes", "result_type", "promote_types",
}
ALLOWED_METHODS = {
    "view", "reshape", "contiguous", "flatten", "unflatten", "squeeze", "unsqueeze", "transpose", "permute", "t",
    "expand", "expand_as", "view_as", "reshape_as", "stride", "size", "dim", "numel", "data_ptr", "element_size",
    "is_contiguous", "to", "cuda", "cpu", "type", "new_empty", "new_zeros", "new_ones", "new_full", "item", "tolist",
    "clone", "detach", "requires_grad_", "narrow", "select", "chunk", "split", "unbind", "movedim", "nelement",
    "get_device", "storage_offset", "untyped_storage", "fill_", "zero_", "copy_", "append", "extend", "items",
    "keys", "values", "get", "setdefault", "format", "join", "startswith", "endswith", "__getitem__", "float",
    "half", "bfloat16", "double", "int", "long", "bool", "is_floating_point", "dtype", "shape", "ndim",
}
#: Method names that are tensor compute when called on a tensor (x.sum(), x.exp(), x @ y ...).
COMPUTE_METHODS = {
    "sum", "mean", "max", "min", "amax", "amin", "exp", "log", "sqrt", "rsqrt", "pow", "softmax", "log_softmax",
    "matmul", "mm", "bmm", "mul", "add", "sub", "div", "relu", "sigmoid", "tanh", "var", "std", "norm", "cumsum",
    "prod", "abs", "clamp", "clamp_min", "clamp_max", "where", "masked_fill", "gather", "scatter", "index_select",
    "argmax", "argmin", "topk", "sort", "mul_", "add_", "div_", "sub_", "exp_", "relu_", "softmax_", "addmm",
    "baddbmm", "einsum", "conv2d", "linear", "layer_norm", "gelu", "silu", "erf", "reciprocal", "neg", "square",
    "logsumexp", "maximum", "minimum", "addcmul", "lerp", "cross_entropy", "nll_loss",
}
COMPUTE_NN = {"Linear", "Conv1d", "Conv2d", "Conv3d", "LayerNorm", "BatchNorm1d", "BatchNorm2d", "GroupNorm",
              "Softmax", "ReLU", "GELU", "MultiheadAttention", "Embedding", "RMSNorm", "Sequential", "LSTM", "GRU"}
THREAD_MODULES = {"threading", "concurrent", "multiprocessing", "asyncio", "_thread", "subprocess"}
STREAM_ATTRS = {"Stream", "stream", "ExternalStream", "set_stream", "cudaStreamCreate", "current_stream"}
REFERENCE_NAMES = {"Model"}
#: torch's handles on its dispatch and function modes (the runner's op record is made with them).
MODE_HANDLES = {
    "_DisableTorchDispatch", "DisableTorchFunction", "DisableTorchFunctionSubclass", "_disable_current_modes",
    "_pop_mode", "_pop_mode_temporarily", "_push_mode", "_pop_torch_function_stack", "_push_on_torch_function_stack",
    "_pop_torch_dispatch_stack", "_push_on_torch_dispatch_stack", "_set_dispatch_mode", "_unset_dispatch_mode",
    "_python_dispatch", "TorchDispatchMode", "TorchFunctionMode", "_ExcludeDispatchKeyGuard",
    "_IncludeDispatchKeyGuard", "_ForceDispatchKeyGuard", "_dispatch_tls_set_dispatch_key_excluded",
    "_dispatch_tls_set_dispatch_key_included", "_get_current_dispatch_mode_stack", "_get_current_function_mode_stack",
    "_RestorePythonTLSSnapshot", "_PreserveDispatchKeyGuard", "_len_torch_function_stack", "_len_torch_dispatch_stack",
}


@dataclass
class _Module:
    tree: ast.Module
    source: str
    language: str
    entry: str
    torch_aliases: set[str] = field(default_factory=set)
    functional_aliases: set[str] = field(default_factory=set)
    jit_names: set[str] = field(default_factory=set)
    functions: dict[str, ast.FunctionDef] = field(default_factory=dict)
    entry_class: ast.ClassDef | None = None
    globals: set[str] = field(default_factory=set)
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    #: Local name -> canonical dotted name of what was imported under it (`import sys as s` -> {"s": "sys"}).
    imports: dict[str, str] = field(default_factory=dict)


def scan(source: str, language: str, entry: str = "ModelNew", policy: str = "strict") -> list[Finding]:
    """Findings for `source` under the kernel `policy`; syntax errors are left to the loader."""
    from workbench.tasks.task import KERNEL_POLICIES

    if policy not in (*KERNEL_POLICIES, BASELINE_POLICY):
        raise UnknownNameError("kernel policy", policy, [*KERNEL_POLICIES, BASELINE_POLICY])
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    mod = _Module(tree, source, language, entry)
    _collect(mod)
    findings = [*_no_custom_kernel(mod, policy), *_reference_use(mod), *harness_tamper(mod.tree, mod.imports),
                *timer_patch(mod.tree, mod.imports), *_mode_tamper(mod), *_threads(mod), *_streams(mod),
                *_module_cache(mod)]
    if languages.get(language).compiled or policy != BASELINE_POLICY:
        if policy == "strict":
            findings += _torch_compute(mod)
        findings += _try_fallback(mod)
    findings += foreign_compute(mod.tree, _forward_functions(mod))
    return first_per_flag(findings)


def _collect(mod: _Module) -> None:
    for node in ast.walk(mod.tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                top = a.name.split(".")[0]
                mod.imports[a.asname or top] = a.name if a.asname else top
                if a.name == "torch.nn.functional":
                    mod.functional_aliases.add(a.asname or "torch")
                elif a.name == "torch" or a.name.startswith("torch."):
                    mod.torch_aliases.add(a.asname or top)
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                if not node.level:
                    mod.imports[a.asname or a.name] = f"{node.module}.{a.name}"
                if node.module == "torch.nn" and a.name == "functional":
                    mod.functional_aliases.add(a.asname or "functional")
                if node.module.startswith(("triton", "helion", "cutlass")) and a.name in KERNEL_DECORATORS:
                    mod.jit_names.add(a.asname or a.name)
                if node.module == "torch" and a.name in COMPUTE_METHODS:
                    mod.torch_aliases.add(a.asname or a.name)
    mod.torch_aliases.add("torch")
    mod.functional_aliases.add("F")
    for node in mod.tree.body:  # names bound at module level: modules, extensions, constants, functions
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            mod.globals.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            mod.globals.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.FunctionDef):
            mod.globals.add(node.name)
            mod.functions[node.name] = node
        elif isinstance(node, ast.ClassDef):
            mod.globals.add(node.name)
            mod.classes[node.name] = node
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    mod.functions[f"{node.name}.{item.name}"] = item
    _resolve_entry(mod)


def _resolve_entry(mod: _Module) -> None:
    """Set `mod.entry` to the class the loader will build."""
    if mod.entry in mod.classes:
        mod.entry_class = mod.classes[mod.entry]
        return
    for node in mod.tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id in mod.classes and \
                any(isinstance(t, ast.Name) and t.id == mod.entry for t in node.targets):
            mod.entry, mod.entry_class = node.value.id, mod.classes[node.value.id]
            return
    if "Model" in mod.classes:
        mod.entry, mod.entry_class = "Model", mod.classes["Model"]


def _base_names(cls: ast.ClassDef) -> list[str]:
    return [b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else "" for b in cls.bases]


def _lineage(mod: _Module, name: str) -> list[str]:
    """`name` and its base classes defined in this module, nearest first."""
    order: list[str] = []
    frontier = [name]
    while frontier:
        current = frontier.pop(0)
        if current in order or current not in mod.classes:
            continue
        order.append(current)
        frontier += _base_names(mod.classes[current])
    return order


def _method(mod: _Module, cls: str, name: str) -> ast.FunctionDef | None:
    """`cls.name` as Python would find it among locally defined classes."""
    return next(filter(None, (mod.functions.get(f"{owner}.{name}") for owner in _lineage(mod, cls))), None)


#: The last part of every language's kernel decorators (`triton.jit`, `helion.kernel`, `cute.kernel`, `cute.jit`):
#: a function so decorated is kernel code, whose operations are the kernel's, not torch compute in forward.
KERNEL_DECORATORS = frozenset({"jit", "autotune", "heuristics", "kernel"} | {
    d.rsplit(".", 1)[-1] for lang in languages.LANGUAGES.values() for d in lang.decorators})


def _decorator_is_jit(dec: ast.expr, mod: _Module) -> bool:
    target = dec.func if isinstance(dec, ast.Call) else dec
    if isinstance(target, ast.Attribute) and target.attr in KERNEL_DECORATORS:
        return True
    return isinstance(target, ast.Name) and target.id in (mod.jit_names | {"jit"})


def _no_custom_kernel(mod: _Module, policy: str) -> list[Finding]:
    if mod.language == "torch" and policy != BASELINE_POLICY:
        return [Finding("no-custom-kernel", "no @triton.jit or __global__ kernel in the source (its language was "
                                            "inferred as plain PyTorch); to time PyTorch code as a baseline, declare "
                                            "it: language='torch'")]
    language = languages.get(mod.language)
    if language.compiled and not language.has_kernel(mod.tree, mod.source):
        return [Finding("no-custom-kernel", language.missing_kernel())]
    return []


def _reference_use(mod: _Module) -> list[Finding]:
    """The entry subclassing, building or calling `Model` (the reference), or importing the reference module."""
    for node in ast.walk(mod.tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
            if any(n and ("kwb_ref_" in n or n.startswith("workbench.tasks")) for n in names):
                return [Finding("reference-subclass", f"imports the reference module at line {node.lineno}")]
    if mod.entry_class is None or mod.entry in REFERENCE_NAMES:
        return []
    for owner in _lineage(mod, mod.entry):
        for base in _base_names(mod.classes[owner]):
            if base in REFERENCE_NAMES:
                return [Finding("reference-subclass", f"class {owner}({base}) at line {mod.classes[owner].lineno}")]
    methods = [fn for c in _lineage(mod, mod.entry) for fn in mod.classes[c].body if isinstance(fn, ast.FunctionDef)]
    scopes: list[ast.AST] = [mod.classes[c] for c in _lineage(mod, mod.entry)] + _reachable(mod, methods)
    for scope in scopes:
        for node in ast.walk(scope):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in REFERENCE_NAMES:
                return [Finding("reference-subclass", f"{mod.entry} builds or calls the reference Model at line "
                                                      f"{node.lineno}")]
    return []


def _mode_tamper(mod: _Module) -> list[Finding]:
    """A name, attribute, import or dotted string naming one of torch's mode handles (MODE_HANDLES)."""
    for node in ast.walk(mod.tree):
        if found := next((n for n in _names_in(node) if n in MODE_HANDLES), None):
            return [Finding("harness-tamper", f"touches torch's dispatch or function modes ({found}) at line "
                                              f"{getattr(node, 'lineno', '?')}: the record of what ran in forward is "
                                              "made with them")]
    return []


def _names_in(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Attribute):
        return [node.attr]
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.split(".")
    if isinstance(node, ast.Import):
        return [part for a in node.names for part in a.name.split(".")]
    return (node.module or "").split(".") + [a.name for a in node.names] if isinstance(node, ast.ImportFrom) else []


def _threads(mod: _Module) -> list[Finding]:
    for node in ast.walk(mod.tree):
        if what := imported(node, THREAD_MODULES):
            return [Finding("thread-use", f"{what} at line {node.lineno}")]
        if isinstance(node, ast.Attribute) and node.attr == "fork" and isinstance(node.value, ast.Name) and node.value.id == "os":
            return [Finding("thread-use", f"os.fork at line {node.lineno}")]
    return []


def _streams(mod: _Module) -> list[Finding]:
    for node in ast.walk(mod.tree):
        if isinstance(node, ast.Attribute) and node.attr in STREAM_ATTRS and node.attr != "current_stream":
            return [Finding("stream-use", f"uses {ast.unparse(node)} at line {node.lineno}")]
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "cudaStreamCreate" in node.value:
            return [Finding("stream-use", "creates a CUDA stream in its C++ source")]
    return []


def _forward_functions(mod: _Module) -> list[ast.FunctionDef]:
    """The entry's forward plus the functions, methods and local classes' forwards it reaches within three calls."""
    if mod.entry_class is None:
        return []
    start = _method(mod, mod.entry, "forward")
    return _reachable(mod, [start]) if start is not None else []


def _reachable(mod: _Module, roots: list[ast.FunctionDef]) -> list[ast.FunctionDef]:
    """`roots` and the functions they reach within three calls."""
    held = _held_classes(mod)
    owner_of = {id(fn): name.split(".")[0] for name, fn in mod.functions.items() if "." in name}
    seen: dict[int, ast.FunctionDef] = {id(r): r for r in roots}
    frontier = list(roots)
    for _ in range(3):
        nxt = []
        for fn in frontier:
            cls = owner_of.get(id(fn), mod.entry)
            for node in ast.walk(fn):
                if not isinstance(node, ast.Call):
                    continue
                targets: list[ast.FunctionDef | None] = []
                func = node.func
                if isinstance(func, ast.Name):
                    targets.append(mod.functions.get(func.id))
                    if func.id in mod.classes:  # Helper(...) built inside forward: its constructor and forward run
                        targets += [_method(mod, func.id, "__init__"), _method(mod, func.id, "forward")]
                elif isinstance(func, ast.Call) and isinstance(func.func, ast.Name) and func.func.id in mod.classes:
                    targets.append(_method(mod, func.func.id, "forward"))  # Helper(...)(x)
                elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
                    targets.append(_method(mod, cls, func.attr))
                    if func.attr in held.get(cls, {}):
                        targets.append(_method(mod, held[cls][func.attr], "forward"))
                for target in targets:
                    if target is not None and id(target) not in seen and \
                            not any(_decorator_is_jit(d, mod) for d in target.decorator_list):
                        seen[id(target)] = target
                        nxt.append(target)
        frontier = nxt
    return list(seen.values())


def _held_classes(mod: _Module) -> dict[str, dict[str, str]]:
    """Per local class: self attributes assigned an instance of another local class (`self.inner = Helper(...)`)."""
    held: dict[str, dict[str, str]] = {}
    for name, cls in mod.classes.items():
        for node in ast.walk(cls):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and \
                    isinstance(node.value.func, ast.Name) and node.value.func.id in mod.classes:
                for t in node.targets:
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                        held.setdefault(name, {})[t.attr] = node.value.func.id
    for name in mod.classes:  # attributes set in a local base class are held by the subclass too
        for base in _lineage(mod, name)[1:]:
            for attr, target in held.get(base, {}).items():
                held.setdefault(name, {}).setdefault(attr, target)
    return held


def _nn_submodules(mod: _Module) -> set[str]:
    """self.<name> attributes assigned an nn compute layer in any local class."""
    names: set[str] = set()
    if mod.entry_class is None:
        return names
    for node in ast.walk(ast.Module(body=list(mod.classes.values()), type_ignores=[])):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            func = node.value.func
            layer = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if layer in COMPUTE_NN:
                for t in node.targets:
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                        names.add(t.attr)
    return names


def _torch_compute(mod: _Module) -> list[Finding]:
    layers = _nn_submodules(mod)
    for fn in _forward_functions(mod):
        for node in ast.walk(fn):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
                return [Finding("torch-compute-in-forward", f"`@` matmul at line {node.lineno}")]
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if isinstance(func, ast.Attribute):
                owner = root = func.value
                while isinstance(root, ast.Attribute):
                    root = root.value
                root_name = root.id if isinstance(root, ast.Name) else ""
                dotted = ast.unparse(func)
                if root_name in mod.torch_aliases | mod.functional_aliases and not root_name == "self":
                    if func.attr not in ALLOWED_TORCH and not dotted.startswith(("torch.cuda", "torch.backends", "torch.library")):
                        if root_name in mod.functional_aliases or func.attr in COMPUTE_METHODS or "functional" in dotted \
                                or dotted.startswith("torch.nn."):
                            return [Finding("torch-compute-in-forward", f"{dotted}(...) at line {node.lineno}")]
                elif root_name == "self" and isinstance(owner, ast.Name) and func.attr in layers:
                    return [Finding("torch-compute-in-forward", f"self.{func.attr}(...) is an nn layer, at line {node.lineno}")]
                elif func.attr in COMPUTE_METHODS and func.attr not in ALLOWED_METHODS and root_name \
                        and root_name not in mod.globals and root_name != "self":
                    # A method on a local (a tensor argument or intermediate), not on a module or an extension.
                    return [Finding("torch-compute-in-forward", f".{func.attr}(...) on a tensor at line {node.lineno}")]
            elif isinstance(func, ast.Name) and func.id in mod.torch_aliases - {"torch"}:
                return [Finding("torch-compute-in-forward", f"{func.id}(...) at line {node.lineno}")]
    return []


def _try_fallback(mod: _Module) -> list[Finding]:
    for fn in _forward_functions(mod):
        for node in ast.walk(fn):
            if isinstance(node, ast.Try) and node.handlers:
                for handler in node.handlers:
                    body = ast.Module(body=handler.body, type_ignores=[])
                    if any(isinstance(n, (ast.Return, ast.Call)) for n in ast.walk(body)) and \
                            not all(isinstance(n, ast.Raise) for n in handler.body):
                        return [Finding("try-fallback", f"try/except at line {node.lineno} whose handler computes "
                                                        "something instead of re-raising")]
    return []


def _module_cache(mod: _Module) -> list[Finding]:
    """A module-level container (or an attribute of self) indexed in forward by the inputs' identity or content."""
    containers = set()
    for node in mod.tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, (ast.Dict, ast.List, ast.Set, ast.Call)):
            value = node.value
            if isinstance(value, ast.Call):
                name = value.func.attr if isinstance(value.func, ast.Attribute) else getattr(value.func, "id", "")
                if name not in ("dict", "list", "set", "OrderedDict", "defaultdict", "WeakValueDictionary"):
                    continue
            for t in node.targets:
                if isinstance(t, ast.Name):
                    containers.add(t.id)
    identity_markers = ("data_ptr", "id(", "hash(", "tobytes", "sum()", ".sum(", "tolist", "__array_interface__",
                        "storage", ".item(")
    cached_fns = {f.name for f in mod.tree.body if isinstance(f, ast.FunctionDef) and any(
        ast.unparse(d).split("(")[0].endswith(("lru_cache", "cache")) for d in f.decorator_list)}

    def container(node: ast.expr) -> str | None:
        """A module-level container, or any attribute of self (an instance cache works the same way)."""
        if isinstance(node, ast.Name) and node.id in containers:
            return node.id
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            return f"self.{node.attr}"
        return None

    for fn in _forward_functions(mod):
        for node in ast.walk(fn):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in cached_fns:
                return [Finding("module-cache", f"forward calls the cached function {node.func.id} at line {node.lineno}")]
            if isinstance(node, ast.Subscript) and container(node.value):
                key = ast.unparse(node.slice)
                if any(m in key for m in identity_markers):
                    return [Finding("module-cache", f"{container(node.value)}[{key}] at line {node.lineno} keys results "
                                                    "on the inputs")]
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and container(node.func.value) \
                    and node.func.attr in ("get", "setdefault", "__setitem__"):
                key = ast.unparse(node.args[0]) if node.args else ""
                if any(m in key for m in identity_markers):
                    return [Finding("module-cache", f"{container(node.func.value)}.{node.func.attr}({key}) at line "
                                                    f"{node.lineno}")]
    # A key computed into a variable first: flag a container indexed by a name assigned from an identity marker.
    for fn in _forward_functions(mod):
        tainted = set()
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign) and any(m in ast.unparse(node.value) for m in identity_markers):
                tainted |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        for node in ast.walk(fn):
            if isinstance(node, ast.Subscript) and container(node.value):
                if any(isinstance(n, ast.Name) and n.id in tainted for n in ast.walk(node.slice)):
                    return [Finding("module-cache", f"{container(node.value)}[...] at line {node.lineno} keys results "
                                                    "on the inputs")]
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and container(node.func.value) \
                    and node.func.attr in ("get", "setdefault") and node.args \
                    and any(isinstance(n, ast.Name) and n.id in tainted for n in ast.walk(node.args[0])):
                return [Finding("module-cache", f"{container(node.func.value)}.{node.func.attr}(...) at line "
                                                f"{node.lineno} keys results on the inputs")]
    return []
