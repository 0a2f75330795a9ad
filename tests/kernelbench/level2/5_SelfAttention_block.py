import math

import torch
import torch.nn as nn


class Model(nn.Module):
    """Multi-head self-attention over a sequence: one projection to queries, keys and values, softmax attention
    per head, then an output projection. embed_dim must be a multiple of num_heads."""

    def __init__(self, embed_dim: int, num_heads: int):
        super().__init__()
        self.num_heads = num_heads
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim)
        self.out = nn.Linear(embed_dim, embed_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, e = x.shape
        h = self.num_heads
        q, k, v = self.qkv(x).view(b, s, 3, h, e // h).permute(2, 0, 3, 1, 4)
        weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(e // h), dim=-1)
        y = (weights @ v).transpose(1, 2).reshape(b, s, e)
        return self.out(y)


batch_size = 32
sequence = 512
embed_dim = 768
num_heads = 12


def get_inputs():
    return [torch.randn(batch_size, sequence, embed_dim)]


def get_init_inputs():
    return [embed_dim, num_heads]
