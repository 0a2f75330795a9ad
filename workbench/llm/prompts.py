"""Prompts built from a task: reference source, sizes, dtypes, device, the ModelNew contract.

Templates are text files in `workbench/llm/templates/` (string.Template, `${name}` fields) so they can be
read, diffed and versioned apart from code. A prompt's id is the hash of exactly what is sent, so the store
can group candidates by prompt and a replay can prove it asked the same thing.
"""

from __future__ import annotations

import hashlib
import json
import string
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from workbench import languages
from workbench.errors import UnknownNameError
from workbench.tasks.task import Task


def prompt_languages() -> dict[str, tuple[str, str]]:
    """Language -> (display name, contract template), for every registered language prompts can ask for (one with a
    contract in `workbench/llm/templates/`: the language-specific rules of the answer)."""
    return {name: (lang.title, lang.contract) for name, lang in languages.LANGUAGES.items() if lang.contract}

#: Directions an evolutionary step can be asked to explore (one per mutation prompt).
MUTATIONS: tuple[str, ...] = (
    "retune the block sizes, num_warps and num_stages for these sizes",
    "reduce memory traffic: fuse passes, load each input once, keep intermediates in registers",
    "change how work is split across programs (grid shape, elements or rows per program)",
    "vectorise loads and stores and remove redundant index arithmetic",
    "simplify the kernel: fewer branches and masks on the hot path, same results",
)

#: Marker after which built-in task files keep workbench metadata that is not part of the reference.
_METADATA_MARKER = "# ==== workbench task metadata"


@dataclass(frozen=True)
class Prompt:
    """A rendered prompt: system text plus chat messages; `template` names the template it came from."""

    system: str
    messages: tuple[dict[str, str], ...]
    template: str
    language: str

    @property
    def id(self) -> str:
        blob = json.dumps({"system": self.system, "messages": list(self.messages)}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]

    @property
    def text(self) -> str:
        """The user-visible prompt (last user message)."""
        return self.messages[-1]["content"] if self.messages else ""


@cache
def template_text(name: str) -> str:
    try:
        return resources.files("workbench.llm.templates").joinpath(f"{name}.txt").read_text()
    except FileNotFoundError:
        raise UnknownNameError("prompt template", name, [p.name[:-4] for p in
                               resources.files("workbench.llm.templates").iterdir() if p.name.endswith(".txt")]) from None


def render(name: str, **fields: Any) -> str:
    """Fill a template; every `${field}` must be given (a missing one is a bug, not an empty string)."""
    text = string.Template(template_text(name)).substitute({k: str(v) for k, v in fields.items()})
    return text.strip() + "\n"


def _language(language: str) -> tuple[str, str]:
    known = prompt_languages()
    if language not in known:
        raise UnknownNameError("prompt language", language, list(known))
    return known[language]


def reference_source(task: Task) -> str:
    """The task's KernelBench source without the workbench metadata tail of built-in task files."""
    source = task.source
    if _METADATA_MARKER in source:
        source = source[: source.index(_METADATA_MARKER)]
    return source.strip()


def _fmt_size(size: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in size.items()) or "the reference file's defaults"


#: On a CPU, how a language other than Triton runs (Triton: the interpreter, the default text).
CPU_NOTES = {
    "helion": ("CPU only: Helion kernels run in Helion's reference mode (HELION_INTERPRET=1: each tile's PyTorch "
               "operations run eagerly), so correctness is what counts here"),
}


def device_description(device: str | None, language: str = "triton") -> str:
    """What the model should know about where its kernel runs."""
    device = device or "cpu"
    if device.startswith("cuda"):
        try:
            import torch

            props = torch.cuda.get_device_properties(torch.device(device))
            return (f"NVIDIA {props.name} (compute capability {props.major}.{props.minor}, {props.multi_processor_count} "
                    f"SMs, {props.total_memory / 2**30:.0f} GiB); timed with CUDA events against the PyTorch reference")
        except Exception:  # no driver here: describe the request, not the hardware
            return f"CUDA device {device}"
    if language in CPU_NOTES:
        return CPU_NOTES[language]
    return ("CPU only: Triton kernels run under the Triton interpreter (TRITON_INTERPRET=1), one program "
            "instance at a time, so fewer, larger programs run faster; correctness is what counts here; "
            "bf16 arithmetic is not supported by the interpreter")


def task_fields(task: Task, language: str, device: str | None = None,
                size: dict[str, Any] | str | None = None, instructions: str = "") -> dict[str, str]:
    """The template fields every prompt shares."""
    device = device or "cpu"
    name, contract = _language(language)
    main = task.size(size, device)
    checks = [s for s in task.check_sizes(device) if s != main]
    return {
        "task_name": task.name,
        "language_name": name,
        "reference": reference_source(task),
        "sizes": _fmt_size(main),
        "check_sizes": "; ".join(_fmt_size(s) for s in checks) or "the same sizes, several random input sets",
        "dtypes": ", ".join(task.dtypes),
        "device": device_description(device, language),
        "contract": template_text(contract).strip(),
        "instructions": instructions.strip(),
    }


def system_prompt(language: str) -> str:
    return render("system", language_name=_language(language)[0])


def _prompt(template: str, language: str, fields: dict[str, str]) -> Prompt:
    return Prompt(system=system_prompt(language), template=f"{language}/{template}", language=language,
                  messages=({"role": "user", "content": render(template, **fields)},))


def generation_prompt(task: Task, language: str = "triton", *, device: str | None = None,
                      size: dict[str, Any] | str | None = None, instructions: str = "") -> Prompt:
    """First prompt of a run: write a kernel from the reference."""
    return _prompt("generate", language, task_fields(task, language, device, size, instructions))


def refine_prompt(task: Task, parent_source: str, feedback: str, *, history: str = "", parent_label: str = "",
                  parent_ok: bool = False, language: str = "triton", device: str | None = None,
                  size: dict[str, Any] | str | None = None, instructions: str = "") -> Prompt:
    """Fix a failed attempt, or speed up a correct one, given the workbench's feedback on it."""
    goal = ("It is correct. Make it faster while keeping it correct." if parent_ok else
            "It did not pass. Fix it so that it passes every check, then keep it fast.")
    fields = task_fields(task, language, device, size, instructions)
    fields.update(parent_source=parent_source.rstrip(), feedback=feedback.strip() or "(no feedback)",
                  history=("Earlier attempts:\n" + history) if history else "", goal=goal,
                  parent_label=parent_label or "previous attempt")
    return _prompt("refine", language, fields)


def mutation_prompt(task: Task, parent_source: str, feedback: str, mutation: str, *, history: str = "",
                    parent_label: str = "", language: str = "triton", device: str | None = None,
                    size: dict[str, Any] | str | None = None, instructions: str = "") -> Prompt:
    """Ask for a variant of a correct parent in one named direction (evolutionary search)."""
    fields = task_fields(task, language, device, size, instructions)
    fields.update(parent_source=parent_source.rstrip(), feedback=feedback.strip() or "(no feedback)",
                  history=("Earlier attempts:\n" + history) if history else "", mutation=mutation,
                  parent_label=parent_label or "parent")
    return _prompt("mutate", language, fields)
