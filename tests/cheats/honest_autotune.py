# HONEST: row softmax with @triton.autotune over launch configs (keyed on the row length). Under the CPU
# interpreter the workbench times the configs by wall clock, so the same source runs on a laptop and a GPU.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.autotune(
    configs=[triton.Config({"ROWS": 1}, num_warps=2), triton.Config({"ROWS": 2}, num_warps=4)],
    key=["n_cols"],
)
@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_rows, n_cols, stride, BLOCK: tl.constexpr, ROWS: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    for i in tl.static_range(ROWS):
        row = pid * ROWS + i
        mask = cols < tl.where(row < n_rows, n_cols, 0)  # rows past the end load and store nothing
        x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf"))
        e = tl.exp(x - tl.max(x, 0))
        tl.store(y_ptr + row * stride + cols, e / tl.sum(e, 0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        n_rows, n_cols = x.shape
        y = torch.empty_like(x)
        grid = lambda meta: (triton.cdiv(n_rows, meta["ROWS"]),)  # noqa: E731
        softmax_kernel[grid](x, y, n_rows, n_cols, x.stride(0), BLOCK=triton.next_power_of_2(n_cols))
        return y
