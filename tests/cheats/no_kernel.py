# CHEAT (docs/anti-cheating.md, cheat 4): submitted as Triton, but there is no kernel at all; F.softmax does everything.
# Caught statically: no-custom-kernel (and torch-compute-in-forward).
import torch.nn as nn
import torch.nn.functional as F
import triton  # noqa: F401  (imported to look like a Triton candidate)


class ModelNew(nn.Module):
    def forward(self, x):
        return F.softmax(x, dim=-1)
