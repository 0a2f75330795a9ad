# CHEAT (docs/anti-cheating.md, cheat 10): a Helion kernel whose module keeps the first output per input shape and
# returns it whenever the shape repeats, without launching the kernel again. Fresh inputs each correctness round
# make the stale answer wrong (mismatch); the cached calls launch none of its kernels either (decoy-kernel).
import helion
import helion.language as hl
import torch
import torch.nn as nn


@helion.kernel(config=helion.Config(block_sizes=[4]))
def softmax_rows(x: torch.Tensor) -> torch.Tensor:
    n, _m = x.size()
    out = torch.empty_like(x)
    for tile_n in hl.tile(n):
        values = x[tile_n, :]
        e = torch.exp(values - torch.amax(values, dim=1, keepdim=True))
        out[tile_n, :] = e / torch.sum(e, dim=1, keepdim=True)
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.outputs = {}

    def forward(self, x):
        if x.shape not in self.outputs:
            self.outputs[x.shape] = softmax_rows(x)
        return self.outputs[x.shape]
