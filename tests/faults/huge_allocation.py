# Asks for ~40 TB.
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x):
        return torch.empty(10**13, device=x.device)
