# CHEAT (docs/anti-cheating.md, cheat 5): a decoy kernel is defined but never launched; the work is done by torch.softmax,
# fetched through strings (importlib + getattr) so that no torch call appears in the source. The AST checks
# see a kernel and no torch compute; only the runtime launch tracking sees that no kernel ran: decoy-kernel.
import importlib

import torch.nn as nn
import triton
import triton.language as tl

_lib = importlib.import_module("to" + "rch")
_op = getattr(_lib, "soft" + "max")


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=-float("inf"))
    e = tl.exp(x - tl.max(x, 0))
    tl.store(y_ptr + row * n_cols + cols, e / tl.sum(e, 0), mask=cols < n_cols)


class ModelNew(nn.Module):
    def forward(self, x):
        return _op(x, -1)
