"""The last step of a runner's sandbox, taken by the runner itself just before it serves (still single-threaded,
no candidate code yet): the syscall filter, and without namespaces Landlock and the socket filter. What held is
the runner's sandbox *tier*, which its Ready message reports and every Result names:

* "namespaces+seccomp": own user, PID, mount, network and IPC namespaces, then the syscall filter;
* "namespaces": the same where the kernel refused the filter (the note says why);
* "landlock+seccomp": no namespaces here, but writes confined to the runner's directories, no TCP, signals kept
  inside, and the syscall filter with sockets limited to AF_UNIX;
* "landlock" or "seccomp": one of the two held (the note says why the other did not);
* "none": nothing beyond a separate process with an allow-listed environment and rlimits.

Nothing here raises: a step that cannot be taken is named in the note, never skipped silently.
"""

from __future__ import annotations

from workbench.eval.runner import landlock, sandbox, syscall_filter


def in_namespaces() -> tuple[str, str]:
    """(tier, note) of a runner inside its namespaces, privileges already dropped (no_new_privs set)."""
    refused = syscall_filter.install()
    if refused is None:
        return "namespaces+seccomp", ""
    return "namespaces", f"no syscall filter: {refused}"


def without_namespaces(writable_dirs: list[str], device: str) -> tuple[str, str]:
    """(tier, note) of a runner without namespaces: capabilities dropped (a root caller's runner keeps only file
    permissions), writes confined to `writable_dirs`, the syscall and socket filter."""
    notes = []
    try:
        sandbox.drop_privileges(keep=sandbox.FILE_CAPABILITIES)
    except sandbox.SandboxError as exc:
        notes.append(f"capabilities not dropped: {exc}")
    cuda = device.startswith("cuda")
    if cuda:
        # The CUDA driver fails to start (error 304, an OS call refused) under the Landlock ruleset and the
        # AF_UNIX-only socket filter: on a GPU this tier keeps the plain syscall filter, as the namespaces tier does.
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


def isolated(tier: str) -> bool:
    """Does the tier keep the runner out of the user's files and processes (its own namespaces)?"""
    return tier.startswith("namespaces")
