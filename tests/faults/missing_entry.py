# Defines a kernel but no ModelNew class.
import torch
import torch.nn as nn

class Softmax(nn.Module):
    def forward(self, x):
        return x
