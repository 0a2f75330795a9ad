"""The `kwb` command line. The one place allowed to import widgets (lazily, for reports)."""

from __future__ import annotations

from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `kwb` (`workbench.cli:main`). Imports the command modules on call, so that
    `python -m workbench.cli.main` does not find its own module already imported by the package."""
    from workbench.cli.main import main as run

    return run(argv)


__all__ = ["main"]
