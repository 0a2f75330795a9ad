"""The `kwb` command line. The one place allowed to import widgets (lazily, for reports)."""

from workbench.cli.main import main

__all__ = ["main"]
