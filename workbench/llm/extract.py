"""Pull the candidate module out of a model's reply.

Rules (in order): fenced blocks tagged python/py (or untagged) that define `class <entry>` -- the last one
wins, since models revise as they go; an unterminated final fence (a reply cut at max_tokens) counts as a
block; a reply that is bare Python defining the entry is accepted as is. Anything else is the
`no-code-found` outcome, which the agent records as a `compile_error` result flagged `no-code-found`.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

NO_CODE_FOUND = "no-code-found"

_FENCE = re.compile(r"^(?P<fence>`{3,}|~{3,})[ \t]*(?P<lang>[\w+.-]*)[^\n]*\n(?P<body>.*?)(?:^(?P=fence)[ \t]*$|\Z)",
                    re.MULTILINE | re.DOTALL)
_PYTHON_TAGS = {"", "python", "py", "python3", "py3"}


@dataclass(frozen=True)
class Extraction:
    """What was found in a reply: `code` (None when nothing usable) and the outcome name."""

    code: str | None
    outcome: str
    blocks: int = 0
    note: str = ""

    @property
    def ok(self) -> bool:
        return self.code is not None


def code_blocks(text: str) -> list[tuple[str, str]]:
    """(language tag, body) of every fenced block, in order."""
    return [(m.group("lang").lower(), m.group("body")) for m in _FENCE.finditer(text)]


def _defines(code: str, entry: str) -> bool:
    return re.search(rf"^\s*class\s+{re.escape(entry)}\b", code, re.MULTILINE) is not None


def extract_code(text: str, entry: str = "ModelNew") -> Extraction:
    """The module source that defines `entry`, or an Extraction with outcome `no-code-found`."""
    blocks = code_blocks(text)
    python = [body for lang, body in blocks if lang in _PYTHON_TAGS]
    defining = [body for body in python if _defines(body, entry)]
    if defining:
        note = f"{len(defining)} blocks define {entry}; used the last" if len(defining) > 1 else ""
        return Extraction(defining[-1].rstrip() + "\n", "ok", len(blocks), note)
    if not blocks and _defines(text, entry):
        try:
            ast.parse(text)
        except SyntaxError:
            pass
        else:
            return Extraction(text.strip() + "\n", "ok", 0, "reply was bare code without a fence")
    if blocks:
        tags = ", ".join(sorted({lang or "untagged" for lang, _ in blocks}))
        note = f"the reply has {len(blocks)} fenced block(s) ({tags}) but none is Python defining class {entry}"
    else:
        note = f"the reply has no fenced ```python block defining class {entry}"
    return Extraction(None, NO_CODE_FOUND, len(blocks), note)
