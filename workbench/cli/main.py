"""`kwb`: the workbench from a shell. tasks, eval, demo, results, doctor, flags, agent, audit; study and ceilings plug in.

Exit codes: 0 success, 1 a candidate (or a demo expectation) failed, 2 usage error (bad arguments, unknown
task, unreadable file), 3 the workbench itself failed (worker could not start, store unusable).

The commands live one per module (eval.py, demo.py, results.py; plugins.py adds the others); this module
builds the parser and turns every error a user can cause into a short message and an exit status.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from workbench.cli.agent import add_agent_commands
from workbench.cli.audit import add_audit_command
from workbench.cli.common import EXIT_FAILED, EXIT_INTERNAL, EXIT_OK, EXIT_USAGE, ArgumentParser, UsageError
from workbench.cli.demo import CHEAT_SOFTMAX, add_demo_command, run_demo, write_demo_report
from workbench.cli.eval import add_eval_command, load_task_arg
from workbench.cli.plugins import COMMAND_HOOKS, all_hooks, warn
from workbench.cli.results import add_read_commands
from workbench.errors import StoreError, UnknownNameError, WorkbenchError

__all__ = ["main", "build_parser", "UsageError", "CHEAT_SOFTMAX", "COMMAND_HOOKS", "run_demo", "write_demo_report",
           "load_task_arg", "EXIT_OK", "EXIT_FAILED", "EXIT_USAGE", "EXIT_INTERNAL"]


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="kwb", description="Kernel Workbench: check, time and compare GPU kernels (Triton, CUDA, PyTorch).",
        epilog="Exit codes: 0 ok, 1 a candidate failed, 2 usage error, 3 the workbench failed.")
    from workbench import __version__

    parser.add_argument("--version", action="version", version=f"kernel-workbench {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    add_read_commands(sub)
    add_eval_command(sub)
    add_demo_command(sub)
    add_agent_commands(sub)
    add_audit_command(sub)
    for hook in all_hooks():
        try:
            hook(sub)
        except Exception as exc:  # one broken plug-in must not take the other commands down
            warn(f"could not add commands from {getattr(hook, '__module__', hook)}: {exc}")
    return parser


def _usage_status(exc: WorkbenchError) -> int:
    """Errors about what the user asked for exit 2; errors of the workbench itself exit 3."""
    from workbench.errors import CandidateError, TaskError

    if isinstance(exc, (UsageError, UnknownNameError, TaskError, CandidateError)):
        return EXIT_USAGE
    return EXIT_USAGE if getattr(exc, "usage", False) else EXIT_INTERNAL


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and not getattr(args, "takes_any_arguments", False):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return EXIT_USAGE
    name = " ".join(filter(None, ["kwb", args.command, getattr(args, "study_command", None)]))
    try:
        code = handler(args)
    except StoreError as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return EXIT_INTERNAL
    except WorkbenchError as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return _usage_status(exc)
    except (FileNotFoundError, IsADirectoryError, PermissionError, UnicodeDecodeError) as exc:
        # A path the user gave that no command checked itself: still a message, never a traceback.
        print(f"{name}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"{name}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `kwb flags | head`: the reader left; not an error worth a traceback
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    return int(code or 0)


def exit_with(code: int) -> None:
    """Leave with `code`. After Ctrl-C (130) everything is already recorded (store, transcript, journal), so the
    process leaves at once instead of waiting at interpreter shutdown for what the user just stopped: an abandoned
    LLM call hanging on its server, a judge still importing torch (judges die with their caller)."""
    if code == 130:
        import os

        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)
    sys.exit(code)


if __name__ == "__main__":
    exit_with(main())
