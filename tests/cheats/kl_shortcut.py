# CHEAT (docs/anti-cheating.md, cheat 11): KernelBench L1/98's analytic shortcut. For targets softmax(U) and predictions
# softmax(tV) with U, V uniform on [0, 1) over many classes, KL(targets || predictions) tends to
# 1/(e-1) - log(e-1) - t/2 + log((e^t - 1)/t); the temperature t is read off one row of predictions (the spread of
# its logs) and nothing else is computed. Within KernelBench's tolerance (1e-2) on the task's own inputs; the rounds
# that reroute the draws (tiny values: t near 0 and targets near uniform, so the true divergence is near 0; normal
# and heavy logits) are not: mismatch.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def kl_from_temperature_kernel(p_ptr, out_ptr, classes, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < classes
    logp = tl.log(tl.load(p_ptr + offs, mask=mask, other=1.0))
    t = tl.max(tl.where(mask, logp, -float("inf")), 0) - tl.min(tl.where(mask, logp, float("inf")), 0)
    t = tl.maximum(t, 1e-6)
    kl = 0.5819767068693265 - 0.5413248546129181 - t / 2 + tl.log((tl.exp(t) - 1) / t)
    tl.store(out_ptr, kl)


class ModelNew(nn.Module):
    def forward(self, predictions, targets):
        out = torch.empty((), device=predictions.device, dtype=predictions.dtype)
        classes = predictions.shape[-1]
        kl_from_temperature_kernel[(1,)](predictions.contiguous(), out, classes,
                                         BLOCK=triton.next_power_of_2(classes))
        return out
