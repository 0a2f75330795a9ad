import torch
import torch.nn as nn


class Model(nn.Module):
    """Hinge loss mean(max(0, 1 - prediction * label)) with one label of +1 or -1 per row."""

    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return torch.clamp(1 - predictions * labels, min=0).mean()


batch_size = 8192
features = 8192


def get_inputs():
    labels = 2 * torch.randint(0, 2, (batch_size, 1)).float() - 1
    return [torch.rand(batch_size, features), labels]


def get_init_inputs():
    return []
