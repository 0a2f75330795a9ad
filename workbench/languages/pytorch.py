"""Plain PyTorch: no kernels of its own. Declared (`language="torch"`) it is a baseline, timed without the kernel
policy; inferred, it is judged by the task's policy like any candidate (`no-custom-kernel` under strict)."""

from __future__ import annotations

from workbench.languages.base import Language

LANGUAGE = Language(name="torch", title="PyTorch", module="torch", distribution="torch")
