"""Confining an untrusted process on Linux, with no external tool: namespaces, a new root and rlimits
(`namespaces`, `new_root`), Landlock and a seccomp filter where namespaces cannot be made (`landlock`,
`syscall_filter`), and the tier that held (`confinement`). The runner applies it to itself right after its fork
(docs/trust-boundary.md); the judge plans it and `kwb doctor` reports what this machine allows."""
