# HONEST: a torch-language candidate (language="torch"): PyTorch ops are the point here, so no kernel is
# required and torch compute in forward is allowed. A numerically stable softmax written out by hand.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        e = torch.exp(x - x.amax(dim=-1, keepdim=True))
        return e / e.sum(dim=-1, keepdim=True)
