"""Test-wide setup: the interpreter on CPU machines, GPU tests skipped cleanly without a GPU."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import torch

HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:
    # Must be set before triton is imported anywhere in this process (the interpreter is chosen when a kernel is decorated).
    os.environ.setdefault("TRITON_INTERPRET", "1")


#: Fixtures that give a test judges of its own and end them afterwards (`one_judge` below; `fresh_pool`, `no_sandbox`
#: and `no_namespaces` in tests/test_judge_pool.py and tests/redteam/).
OWN_JUDGES = {"one_judge", "fresh_pool", "no_sandbox", "no_namespaces"}


def pytest_collection_modifyitems(config, items):
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords and not HAS_CUDA:
            item.add_marker(skip_gpu)
    # Tests with judges of their own run after the others (in their files' order): each ends the pooled judge, and a
    # test after it would start a new one (seconds of imports) where the rest of the suite shares one.
    items.sort(key=lambda item: bool(OWN_JUDGES & set(getattr(item, "fixturenames", ()))))


@pytest.fixture
def device() -> str:
    return "cuda" if HAS_CUDA else "cpu"


@pytest.fixture
def one_judge(monkeypatch):
    """A single CPU judge, started inside the test (it sees the test's environment), so back-to-back evaluations
    meet the same judge and what it keeps between them; the pool is reset again afterwards."""
    from workbench.dispatch.pool import shutdown_workers

    monkeypatch.setenv("KWB_JUDGES", "1")
    shutdown_workers()
    yield
    shutdown_workers()


@pytest.fixture
def kwb_here(monkeypatch, capsys):
    """`kwb ARGS` in this process: `main()` with the working directory `cwd`, its exit status and what it printed,
    as a CompletedProcess. For refusals, where the message and the status are the point, not a new interpreter
    (the entry point's own exit statuses are covered in subprocesses by tests/test_cli.py)."""
    from workbench.cli.main import main

    def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
        with monkeypatch.context() as m:
            m.chdir(cwd)
            m.setenv("COLUMNS", "80")  # argparse wraps its usage line as it would on a pipe
            capsys.readouterr()
            try:
                code = main(list(args))
            except SystemExit as exc:  # argparse's own errors
                code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
            out = capsys.readouterr()
        return subprocess.CompletedProcess(["kwb", *args], code, out.out, out.err)

    return run
