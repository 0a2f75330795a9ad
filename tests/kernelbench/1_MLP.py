# ruff: noqa: UP008  (super(Model, self) is KernelBench's own style, kept on purpose)
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, input_size, layer_sizes, output_size):
        """
        :param input_size: number of input features
        :param layer_sizes: widths of the hidden layers, in order
        :param output_size: number of output features
        """
        super(Model, self).__init__()

        layers = []
        current_input_size = input_size

        for layer_size in layer_sizes:
            layers.append(nn.Linear(current_input_size, layer_size))
            layers.append(nn.ReLU())
            current_input_size = layer_size

        layers.append(nn.Linear(current_input_size, output_size))

        self.network = nn.Sequential(*layers)

    def forward(self, x):
        """
        :param x: input tensor, shape (batch_size, input_size)
        :return: output tensor, shape (batch_size, output_size)
        """
        return self.network(x)


# Test code
batch_size = 1
input_size = 1000
layer_sizes = [400, 800]
output_size = 500


def get_inputs():
    return [torch.randn(batch_size, input_size)]


def get_init_inputs():
    return [input_size, layer_sizes, output_size]
