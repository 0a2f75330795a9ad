import torch
import torch.nn as nn
from einops import rearrange


class Model(nn.Module):
    """A projection split into heads with einops (as level 3's Mamba2 problems use it), a softmax over each head's
    features, and the heads merged back: a problem that needs a package beside torch."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        h = rearrange(self.proj(x), "b t (h d) -> b h t d", h=self.heads)
        return rearrange(torch.softmax(h, dim=-1), "b h t d -> b t (h d)")


batch_size = 4
seq_len = 32
dim = 256
heads = 8


def get_inputs():
    return [torch.randn(batch_size, seq_len, dim)]


def get_init_inputs():
    return [dim, heads]
