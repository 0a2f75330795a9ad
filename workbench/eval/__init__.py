"""Evaluation: `evaluate()`, the trusted judge and the untrusted runner, the transport between them, the
correctness protocol, anti-cheating checks, timing and the sandbox (docs/trust-boundary.md)."""
