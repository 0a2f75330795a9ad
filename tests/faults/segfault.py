# Dereferences a null pointer through ctypes: the worker process dies with SIGSEGV.
import torch
import torch.nn as nn

import ctypes

class ModelNew(nn.Module):
    def forward(self, x):
        ctypes.string_at(0)
        return x
