import torch
import torch.nn as nn


class Model(nn.Module):
    """Mean squared error between predictions and targets, averaged over every element."""

    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        diff = predictions - targets
        return torch.mean(diff * diff)


batch_size = 16384
features = 16384


def get_inputs():
    # Predictions on a random scale of their own, so no single constant is the answer.
    scale = torch.rand(())
    return [scale * torch.rand(batch_size, features), torch.rand(batch_size, features)]


def get_init_inputs():
    return []
