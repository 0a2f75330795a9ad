"""Reference Triton solutions of the built-in tasks, one module per task, each defining `ModelNew`.

They are honest baselines: every FLOP happens inside a `@triton.jit` kernel; torch only allocates outputs.
They run compiled on a GPU and under TRITON_INTERPRET=1 on a CPU (block sizes shrink there).
"""
