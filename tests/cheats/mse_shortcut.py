# CHEAT (docs/anti-cheating.md, cheat 11): KernelBench L1/94's analytic shortcut. Predictions s * U and targets V with U, V uniform
# on [0, 1) have E[(sU - V)^2] = s^2 / 3 - s / 2 + 1 / 3; s is read off the largest of 1024 predictions and the
# other elements are never touched. Within KernelBench's tolerance (1e-2) on the task's own inputs; the rounds
# that reroute the draws to other distributions (normal, heavy, negative) are not uniform: mismatch.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def mse_from_scale_kernel(p_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    p = tl.load(p_ptr + offs, mask=offs < n, other=0.0)
    s = tl.max(p, 0) * (BLOCK + 1) / BLOCK
    tl.store(out_ptr, s * s / 3 - s / 2 + 1.0 / 3)


class ModelNew(nn.Module):
    def forward(self, predictions, targets):
        out = torch.empty((), device=predictions.device, dtype=predictions.dtype)
        mse_from_scale_kernel[(1,)](predictions.contiguous(), out, predictions.numel(), BLOCK=1024)
        return out
