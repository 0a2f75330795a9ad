# FAULT: imports a package the environment does not have (an LLM's habit: a helper library it assumed).
import torch
import torch.nn as nn
import kwb_no_such_package_here


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)
