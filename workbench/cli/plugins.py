"""Subcommands from other packages: `kwb study` (its module needs the study extras) and `kwb ceilings` (the roofline package's), third parties add
theirs through the `kwb.commands` entry-point group. A hook is a function `add(subparsers)` that calls
`subparsers.add_parser(...)` and sets `handler=` (a function `args -> int`) with `set_defaults`.

A hook whose module is not installed is skipped; one whose own dependency is missing leaves a stand-in command
that names it, so `kwb ceilings` says what to install instead of "invalid choice".
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from workbench.cli.common import EXIT_USAGE, device_arg

#: Subcommand hooks in optional modules, (command, "module:function"): study runs and roofline ceilings.
COMMAND_HOOKS: list[tuple[str, str]] = [
    ("study", "workbench.cli.study:add_study_commands"),
    ("ceilings", "roofline.cli:add_ceilings_commands"),
]


def warn(text: str) -> None:
    print(f"kwb: {text}", file=sys.stderr)


def load_hook(command: str, spec: str) -> Callable[[argparse._SubParsersAction], None] | None:
    """The hook function, a stand-in command explaining what is missing, or None if the module is absent."""
    import importlib

    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        if exc.name is None or module_name == exc.name or module_name.startswith(exc.name + "."):
            return None  # the plug-in itself is not installed: no command
        return unavailable(command, f"{module_name} needs {exc.name!r}, which is not installed ({exc})")
    hook = getattr(module, attr, None)
    if hook is None and module_name == "roofline.cli" and hasattr(module, "ceilings_command"):
        return _ceilings_fallback(module.ceilings_command)
    return hook


def unavailable(command: str, why: str):
    """A placeholder subcommand: `kwb COMMAND` says which dependency is missing instead of "invalid choice"."""
    def add(sub: argparse._SubParsersAction) -> None:
        p = sub.add_parser(command, help=f"(unavailable: {why})", add_help=False)

        def handler(args: argparse.Namespace) -> int:
            print(f"kwb {command} is unavailable: {why}. `kwb doctor` shows how to install what is missing.",
                  file=sys.stderr)
            return EXIT_USAGE

        p.set_defaults(handler=handler, takes_any_arguments=True)

    return add


def _ceilings_fallback(command: Callable[[argparse.Namespace], int | None]):
    """`kwb ceilings` for a roofline.cli that offers only `ceilings_command(args)`."""
    def add(sub: argparse._SubParsersAction) -> None:
        p = sub.add_parser("ceilings", help="measure or show this device's roofline ceilings")
        p.add_argument("--device", type=device_arg)
        p.add_argument("--refresh", action="store_true", help="measure again instead of using the cache")
        p.add_argument("--json", action="store_true")
        p.set_defaults(handler=lambda args: command(args) or 0)

    return add


def entry_point_hooks() -> list[Callable]:
    from importlib.metadata import entry_points

    try:
        eps = entry_points(group="kwb.commands")
    except Exception:  # pragma: no cover - broken metadata must not break the CLI
        return []
    hooks = []
    for ep in eps:
        try:
            hooks.append(ep.load())
        except Exception as exc:
            warn(f"commands from entry point {ep.name} unavailable: {exc}")
    return hooks


def all_hooks() -> list[Callable]:
    return [h for h in (load_hook(c, s) for c, s in COMMAND_HOOKS) if h] + entry_point_hooks()
