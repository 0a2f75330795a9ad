import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """A linear layer, group normalization of its features, then the exact (erf) GELU."""

    def __init__(self, in_features: int, out_features: int, num_groups: int):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.gn = nn.GroupNorm(num_groups, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.gn(self.fc(x)))


batch_size = 1024
in_features = 4096
out_features = 1024 * 4
num_groups = 32


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, num_groups]
