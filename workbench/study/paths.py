"""Where a study notebook lives, so its data paths ("candidates/softmax/online.py") resolve wherever it runs.

A kernel does not know which notebook it executes. papermill changes the working directory to the notebook's
only with `--cwd`, so `papermill studies/x.ipynb out.ipynb` from the repository root runs with the root as
working directory and every notebook-relative path breaks. `notebook_dir()` asks, in order:

1. an explicit directory (a `notebook_dir` parameter, when the caller sets one);
2. `KWB_NOTEBOOK_DIR`, which `kwb study run` sets for every point;
3. `PAPERMILL_INPUT_PATH`, which papermill injects with `--inject-input-path` / `--inject-paths`;
4. Jupyter's own record of the open notebook: `__session__` / `JPY_SESSION_NAME` (JupyterLab, Notebook 7),
   `__vsc_ipynb_file__` (VS Code);
5. the command line of the process that started the kernel, when it is papermill or nbconvert (Linux: the
   kernel is that process's child, and its first `.ipynb` argument is the input notebook);
6. the working directory.

With `expect="candidates"`, the first of those that actually contains `expect` wins: a wrong guess is never
taken silently.
"""

from __future__ import annotations

import os
from pathlib import Path

from workbench.errors import WorkbenchError

#: Set by `kwb study run` for every point: the notebook's folder, and the folder `kwb` was started from.
NOTEBOOK_DIR_ENV = "KWB_NOTEBOOK_DIR"
CALLER_DIR_ENV = "KWB_CALLER_DIR"


class StudyPathError(WorkbenchError):
    """A study's data path could not be found; the message lists where it was looked for."""


def _user_namespace() -> dict:
    try:
        from IPython import get_ipython
    except ImportError:
        return {}
    shell = get_ipython()
    return getattr(shell, "user_ns", {}) or {}


def _parent_notebook() -> Path | None:
    """The input notebook of a papermill / nbconvert process that is this kernel's parent (Linux /proc)."""
    parent = Path(f"/proc/{os.getppid()}")
    try:
        argv = (parent / "cmdline").read_bytes().split(b"\0")
        cwd = Path(os.readlink(parent / "cwd"))
    except OSError:
        return None
    args = [a.decode(errors="replace") for a in argv if a]
    if not any(Path(a).name.startswith(("papermill", "jupyter-nbconvert", "jupyter")) or a in ("papermill", "nbconvert")
               for a in args[:3]):
        return None
    for arg in args[1:]:
        if arg.endswith(".ipynb"):
            path = Path(arg) if Path(arg).is_absolute() else cwd / arg
            return path if path.is_file() else None
    return None


def candidate_dirs(explicit: str | os.PathLike | None = None) -> list[Path]:
    """Every guess at the notebook's folder, most trustworthy first (see the module docstring)."""
    guesses: list[Path] = []
    if explicit:
        guesses.append(Path(explicit))
    if os.environ.get(NOTEBOOK_DIR_ENV):
        guesses.append(Path(os.environ[NOTEBOOK_DIR_ENV]))
    namespace = _user_namespace()
    for key in ("PAPERMILL_INPUT_PATH", "__session__", "__vsc_ipynb_file__"):
        value = namespace.get(key)
        if isinstance(value, str) and value.endswith(".ipynb"):
            guesses.append(Path(value).parent)
    if os.environ.get("JPY_SESSION_NAME", "").endswith(".ipynb"):
        guesses.append(Path(os.environ["JPY_SESSION_NAME"]).parent)
    parent = _parent_notebook()
    if parent is not None:
        guesses.append(parent.parent)
    guesses.append(Path.cwd())
    out: list[Path] = []
    for guess in guesses:
        resolved = guess.expanduser().resolve()
        if resolved not in out:
            out.append(resolved)
    return out


def notebook_dir(explicit: str | os.PathLike | None = None, expect: str | None = None) -> Path:
    """The folder of the running notebook; with `expect`, the first guess that contains that path."""
    guesses = candidate_dirs(explicit)
    if expect is None:
        return guesses[0]
    for guess in guesses:
        if (guess / expect).exists():
            return guess
    raise StudyPathError(f"cannot find {expect!r} beside the notebook (looked in {', '.join(map(str, guesses))}); "
                         "pass the notebook's folder with -p notebook_dir PATH, or run with papermill --cwd")


def data_path(path: str | os.PathLike, base: str | os.PathLike | None = None) -> Path:
    """A study input: absolute paths as given; relative ones beside the notebook (`base`), else relative to
    where `kwb study run` or the kernel was started. Names every place tried when the file is nowhere."""
    path = Path(path).expanduser()
    if path.is_absolute():
        places = [path]
    else:
        roots = [Path(base)] if base is not None else []
        roots += [Path(os.environ[CALLER_DIR_ENV])] if os.environ.get(CALLER_DIR_ENV) else []
        roots.append(Path.cwd())
        places = list(dict.fromkeys((root / path).resolve() for root in roots))
    for place in places:
        if place.exists():
            return place
    raise StudyPathError(f"{path} not found; looked in {', '.join(map(str, places))}")
