"""What went wrong, in words: a candidate's exception or a dead runner as a message that names the cause, the
candidate's line and what to do."""

from __future__ import annotations

import re

from workbench.eval.wire.runner_messages import COMPILE_ERRORS

_SIGNAL_CAUSES = {
    "SIGSEGV": "segmentation fault: the candidate touched memory it does not own",
    "SIGBUS": "bus error: a misaligned or unmapped memory access",
    "SIGABRT": "abort: a library (or the candidate) gave up, often after a failed assertion",
    "SIGFPE": "arithmetic fault (e.g. an integer division by zero in native code)",
    "SIGILL": "illegal instruction",
    "SIGKILL": "killed: a cancelled run, the out-of-memory killer, or the candidate killing itself",
    "SIGXCPU": "the runner's CPU-time limit was reached",
    "SIGXFSZ": "the runner's file-size limit was reached",
}
#: A frame inside a candidate file in a faulthandler dump (innermost first) or a traceback.
_CANDIDATE_FRAME = re.compile(r'File "[^"]*kwb_candidate_[^"]*\.py", line (\d+),? in (\S+)')


def cuda_fault(text: str) -> bool:
    text = text.lower()
    return any(s in text for s in ("illegal memory access", "misaligned address", "device-side assert",
                                   "unspecified launch failure", "an illegal instruction"))


def out_of_memory(type_name: str, text: str) -> bool:
    text = f"{type_name} {text}".lower()
    return type_name == "MemoryError" or "out of memory" in text or "can't allocate memory" in text or \
        "cannot allocate memory" in text


def failure_message(type_name: str, text: str, stage: str, where: str) -> tuple[bool, str]:
    """(whether the kernel failed to compile, the message) of a candidate's exception."""
    kind = f"{type_name}: {text}".strip()
    if type_name in COMPILE_ERRORS or stage == "compile":
        return True, f"Triton could not compile the kernel{where}: {kind[:800]}"
    if out_of_memory(type_name, text):
        return False, (f"out of memory during {stage}{where}: {kind[:400]}. Allocate less: check the output and "
                       "temporary buffer sizes, or run a smaller size.")
    if cuda_fault(text):
        return False, (f"CUDA fault during {stage}{where}: {kind[:400]}. This usually means an out-of-bounds "
                       "pointer: check masks on every tl.load/tl.store and the grid size.")
    return False, f"{stage} raised {kind[:600]}{where}"


def died_message(kind: str, detail: str, log: str, source: str, language: str, device: str, limit: float) -> str:
    """A dead runner's message: the signal's cause, the candidate line from the fault handler, the last output."""
    if kind == "timeout":
        message = (f"timeout: no result within {limit:g} s (the runner was killed). Fix: the candidate did not finish "
                   "in time: look for an infinite loop or a grid far larger than the problem, or raise the limit with "
                   "evaluate(..., timeout=seconds).")
    else:
        signame = next((name for name in _SIGNAL_CAUSES if name in detail), None)
        cause = f" ({_SIGNAL_CAUSES[signame]})" if signame else ""
        message = f"crashed: {detail}{cause}"
        frame = _CANDIDATE_FRAME.search(log)
        if frame:
            lines = source.splitlines()
            number = int(frame.group(1))
            code = lines[number - 1].strip() if 0 < number <= len(lines) else ""
            message += f", at candidate line {number} in {frame.group(2)}" + (f": {code}" if code else "")
        message += (". Fix: the runner process died (segfault, abort or out-of-memory kill): look for out-of-bounds "
                    "pointers, ctypes calls or huge allocations.")
        if signame == "SIGSEGV" and language == "triton" and device == "cpu":
            message += (" Under Triton's CPU interpreter an unmasked out-of-bounds tl.load/tl.store reads or writes "
                        "host memory directly: check the masks and offsets of every load and store.")
    if log:
        tail = "\n".join(ln for ln in log.splitlines() if not ln.startswith("Extension modules:"))
        message += "\nLast runner output:\n" + tail[-1500:]
    return message
