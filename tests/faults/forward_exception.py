# Raises inside forward.
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x):
        scale = x.shape[1] / 0
        return x * scale
