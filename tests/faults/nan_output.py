# Right everywhere except one NaN.
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.softmax(x, dim=-1)
        y[0, 0] = float("nan")
        return y
