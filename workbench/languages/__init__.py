"""The kernel languages, one module each, registered in one table (docs/languages.md says how to add one).

The order of `LANGUAGES` is the order inference tries them: Helion and CuTe DSL sources may also import Triton or
mention CUDA, and plain PyTorch is what is left. Importing this package imports no language's own package.
"""

from __future__ import annotations

from workbench.errors import UnknownNameError
from workbench.languages import cuda, cute, helion, pytorch, triton
from workbench.languages.base import Availability, Language, base_name

__all__ = ["LANGUAGES", "Availability", "Language", "base_name", "get", "infer", "names", "register"]

#: Name -> language, in inference order; the last one (plain PyTorch) matches any source.
LANGUAGES: dict[str, Language] = {}

#: The language a source that matches no other is inferred as.
FALLBACK = pytorch.LANGUAGE.name


def register(language: Language, *, before: str | None = None) -> Language:
    """Add a language to the table (inference tries it before `before`, else just before plain PyTorch)."""
    items = [(k, v) for k, v in LANGUAGES.items() if k != language.name]
    anchor = before if before is not None else (FALLBACK if language.name != FALLBACK else None)
    at = next((i for i, (k, _) in enumerate(items) if k == anchor), len(items))
    items.insert(at, (language.name, language))
    LANGUAGES.clear()
    LANGUAGES.update(items)
    return language


for _module in (helion, cute, triton, cuda, pytorch):
    register(_module.LANGUAGE)


def names() -> tuple[str, ...]:
    return tuple(LANGUAGES)


def get(name: str) -> Language:
    """The language called `name`; an unknown name lists the known ones."""
    try:
        return LANGUAGES[name]
    except KeyError:
        raise UnknownNameError("language", name, list(LANGUAGES)) from None


def infer(source: str) -> str:
    """The first language in the table whose `detect` matches the source; plain PyTorch when none does."""
    return next((lang.name for lang in LANGUAGES.values() if lang.name != FALLBACK and lang.detect(source)), FALLBACK)
