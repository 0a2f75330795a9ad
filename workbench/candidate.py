"""Candidate: kernel source text + language + entry point. Identity is a hash of those three."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench import languages
from workbench.errors import CandidateError
from workbench.result import BASELINE_POLICY

__all__ = ["BASELINE_POLICY", "LANGUAGES", "Candidate", "infer_language"]

#: The language names, in the order inference tries them (`workbench/languages/`).
LANGUAGES = languages.names()


def infer_language(source: str) -> str:
    """Guess the language from the source (Helion, CuTe DSL, Triton, inline CUDA, else plain PyTorch). An inferred
    "torch" is still a kernel candidate (judged by the task's kernel policy); only `language="torch"` declares a
    baseline."""
    return languages.infer(source)


@dataclass
class Candidate:
    """A kernel submission. `entry` names the class (KernelBench's `ModelNew`) built like the reference."""

    source: str
    language: str | None = None
    entry: str = "ModelNew"
    name: str | None = None
    #: Who wrote it: "human" or an LLM model id.
    author: str = "human"
    parent_id: str | None = None
    prompt_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    #: A declared PyTorch baseline (default: whether `language="torch"` was given, never when it was inferred). It
    #: is timed like any candidate and the task's kernel policy is not applied; plain PyTorch whose language was
    #: inferred is judged by the policy, so a pasted reply without a kernel never reads "ok" on a kernel task.
    baseline: bool | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.source, str):
            raise CandidateError(f"Candidate.source must be text, got {type(self.source).__name__}")
        if self.baseline is None:
            self.baseline = self.language == "torch"
        if self.language is None:
            self.language = infer_language(self.source)
        if self.language not in languages.LANGUAGES:
            raise CandidateError(f"unknown language {self.language!r}; choose one of "
                                 f"{', '.join(languages.names())}")
        if self.baseline and self.language != "torch":
            raise CandidateError(f"baseline=True declares a PyTorch baseline, but the language is {self.language!r}; "
                                 "use language='torch' for a baseline, or drop baseline=True")
        if self.name is None:
            self.name = f"{self.language}-{self.id[:8]}"

    @property
    def id(self) -> str:
        """Content hash of source + language + entry: the same kernel always has the same id. Plain PyTorch judged as
        a kernel candidate and the same code declared a baseline get different verdicts, so different ids."""
        language = self.language if self.baseline or self.language != "torch" else "torch-inferred"
        blob = f"{language}\0{self.entry}\0{self.source}".encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    @classmethod
    def from_file(cls, path: str | Path, language: str | None = None, **kw: Any) -> Candidate:
        path = Path(path)
        try:
            source = path.read_text()
        except OSError as exc:
            raise CandidateError(f"cannot read candidate file {path}: {exc.strerror}") from exc
        kw.setdefault("name", path.stem)
        return cls(source=source, language=language, **kw)

    def to_spec(self) -> dict[str, Any]:
        return {"source": self.source, "language": self.language, "entry": self.entry, "name": self.name,
                "baseline": self.baseline}

    def __repr__(self) -> str:
        return f"Candidate({self.name!r}, language={self.language!r}, id={self.id[:8]})"
