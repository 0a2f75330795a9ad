"""The README is a five-minute read: short, free of engine internals, with every command in its table, and every
link in it and in the user docs it points to leads somewhere."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: CI runs the second command of this block: these lines stay exactly as they are.
HEAD = ["# Kernel Workbench", "", "```bash", "./scripts/setup && .venv/bin/kwb demo",
        "./scripts/setup && .venv/bin/python -m mypy && .venv/bin/python -m pytest -q -n auto --dist worksteal", "```"]
#: How the engine works inside belongs in docs/evaluation.md and docs/trust-boundary.md, not in the README.
INTERNALS = re.compile(r"\b(judges?|locks?|fork ?servers?|page-locked|runners?)\b|protocol\[", re.I)
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_readme_is_short_starts_with_the_ci_block_and_names_no_engine_internals():
    lines = README.read_text().splitlines()
    assert lines[:6] == HEAD
    assert len(lines) <= 150, f"README has {len(lines)} lines"
    internal = [(n, line) for n, line in enumerate(lines, 1) if INTERNALS.search(line)]
    assert not internal, internal


def test_readme_command_table_lists_every_kwb_command():
    from workbench.cli.main import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    table = [line for line in README.read_text().splitlines() if line.startswith("| `kwb ")]
    listed = {line.split("`")[1].split()[1] for line in table}
    assert "results" in listed and set(commands) <= listed, set(commands) - listed


def _slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_links_in_the_readme_and_user_docs_resolve():
    for page in (README, ROOT / "docs" / "guide.md", ROOT / "docs" / "evaluation.md"):
        for target in LINK.findall(page.read_text()):
            if target.startswith(("http://", "https://")):
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            assert file.exists(), f"{page.name} links to a missing {target}"
            if anchor:
                headings = [line.lstrip("#") for line in file.read_text().splitlines() if line.startswith("#")]
                assert anchor in {_slug(h) for h in headings}, f"{page.name}: no heading for #{anchor} in {file.name}"
