"""The runner's last sandbox step, just before it serves (single-threaded, no candidate code yet). What held is its
tier, named in every Result: "namespaces+seccomp", "namespaces", "landlock+seccomp" (no namespaces: writes confined,
no TCP, AF_UNIX sockets only), "landlock", "seccomp" or "none". A step not taken is named in the note.
"""

from __future__ import annotations

from workbench.sandbox import landlock, syscall_filter
from workbench.sandbox import namespaces as sandbox


def in_namespaces() -> tuple[str, str]:
    """(tier, note) of a runner inside its namespaces, privileges already dropped (no_new_privs set)."""
    refused = syscall_filter.install()
    if refused is None:
        return "namespaces+seccomp", ""
    return "namespaces", f"no syscall filter: {refused}"


def without_namespaces(writable_dirs: list[str], device: str) -> tuple[str, str]:
    """(tier, note) without namespaces: no capabilities, writes confined to `writable_dirs`, the syscall filter."""
    notes = []
    try:
        sandbox.drop_privileges(keep=sandbox.FILE_CAPABILITIES)
    except sandbox.SandboxError as exc:
        notes.append(f"capabilities not dropped: {exc}")
    cuda = device.startswith("cuda")
    if cuda:
        # The CUDA driver fails to start (error 304) under Landlock and the AF_UNIX-only socket filter.
        outcome = landlock.Outcome(0, "Landlock and the socket filter are not applied on a CUDA device (the driver "
                                      "does not start under them)")
    else:
        outcome = landlock.restrict(writable_dirs, device)
    if outcome.note:
        notes.append(outcome.note)
    refused = syscall_filter.install(deny_sockets=not cuda)
    if refused is not None:
        notes.append(f"no syscall filter: {refused}")
    tier = "+".join(name for name, held in (("landlock", outcome.abi > 0), ("seccomp", refused is None)) if held)
    return tier or "none", "; ".join(notes)

