# CHEAT (docs/anti-cheating.md, cheat 11): KernelBench L1/100's analytic shortcut. With predictions uniform on [0, 1) and labels
# +-1, every term 1 - p * y is positive and averages 1 - y / 2, so the loss is 1 - mean(y) / 2: only the labels are
# read, never the predictions. Within KernelBench's tolerance (1e-2) on the task's own inputs; the rounds that
# reroute the predictions to other distributions (normal: terms below zero are clamped; large values) are not:
# mismatch. The labels keep their +-1 values in every round (integer draws are never rerouted).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def hinge_from_labels_kernel(labels_ptr, out_ptr, rows, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    y = tl.load(labels_ptr + offs, mask=offs < rows, other=0.0)
    tl.store(out_ptr, 1.0 - tl.sum(y, 0) / (2 * rows))


class ModelNew(nn.Module):
    def forward(self, predictions, labels):
        out = torch.empty((), device=predictions.device, dtype=predictions.dtype)
        rows = labels.numel()
        hinge_from_labels_kernel[(1,)](labels.contiguous(), out, rows, BLOCK=triton.next_power_of_2(rows))
        return out
