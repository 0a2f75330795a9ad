# Returns float64 for a float32 task.
import torch
import torch.nn as nn
import triton
import triton.language as tl

class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x.double(), dim=-1)
