# Returns float64 for a float32 task.
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x.double(), dim=-1)
