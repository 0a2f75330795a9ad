"""KernelBench-style candidates on a real GPU: a CUDA `load_inline` kernel doing the whole op, a CUDA epilogue after
cuDNN's convolution under the "partial" kernel policy (judged by coverage there), and the reference of each problem
in tests/kernelbench as its own candidate at its full size (the A/A check that needs a GPU's memory)."""

from __future__ import annotations

from pathlib import Path

import pytest

import workbench as wb
from workbench.tasks.kernelbench import reference_as_candidate

pytestmark = pytest.mark.gpu
KB = Path(__file__).resolve().parents[1] / "kernelbench"

MISH_CUDA = r'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = """
__global__ void mish_kernel(const float* x, float* y, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        float sp = v > 20.f ? v : log1pf(expf(v));
        y[i] = v * tanhf(sp);
    }
}

torch::Tensor mish(torch::Tensor x) {
    auto y = torch::empty_like(x);
    long n = x.numel();
    mish_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

ext = load_inline(name="kb_mish", cpp_sources="torch::Tensor mish(torch::Tensor x);", cuda_sources=CUDA,
                  functions=["mish"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.mish(x.contiguous())
'''

CONV_EPILOGUE_CUDA = r'''
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

CUDA = """
__global__ void bias_relu_kernel(const float* y, const float* bias, float* out, long n, long hw, long channels) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = y[i] + bias[(i / hw) % channels];
        out[i] = v > 0.f ? v : 0.f;
    }
}

torch::Tensor bias_relu(torch::Tensor y, torch::Tensor bias) {
    auto out = torch::empty_like(y);
    long n = y.numel();
    bias_relu_kernel<<<(n + 255) / 256, 256>>>(y.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(),
                                               n, y.size(2) * y.size(3), y.size(1));
    return out;
}
"""

ext = load_inline(name="kb_bias_relu", cpp_sources="torch::Tensor bias_relu(torch::Tensor y, torch::Tensor bias);",
                  cuda_sources=CUDA, functions=["bias_relu"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape) * 0.1)

    def forward(self, x):
        y = F.conv2d(x, self.conv.weight, padding=self.conv.padding).contiguous()
        return ext.bias_relu(y, self.bias.contiguous())
'''


@pytest.mark.slow  # nvcc or the whole gallery: outside the 5-minute fast GPU subset
def test_cuda_load_inline_kernel_is_ok_and_compiled_once(tmp_path, monkeypatch):
    from workbench.dispatch.pool import shutdown_workers

    monkeypatch.setenv("KWB_CACHE_DIR", str(tmp_path))  # an empty compile cache...
    shutdown_workers()  # ...seen by a judge started now
    task = wb.load_kernelbench(KB / "level1" / "17_Mish.py", sizes={"batch_size": 256})
    cand = wb.Candidate(source=MISH_CUDA, language="cuda")
    first = wb.evaluate(task, cand, device="cuda", timeout=600)
    assert first.status == "ok", first.message
    assert first.speedup is not None and first.speedup > 0
    assert first.protocol["compile_cache"] == "stored", first.protocol
    again = wb.evaluate(task, cand, device="cuda", timeout=600)
    assert again.status == "ok" and again.protocol["compile_cache"] == "hit", again.protocol
    # The cached build loads without compiling: a fraction of the first load (45-70 s with nvcc).
    assert again.protocol["compile_seconds"] < 0.5 * first.protocol["compile_seconds"], (first.protocol,
                                                                                          again.protocol)


@pytest.mark.slow  # nvcc or the whole gallery: outside the 5-minute fast GPU subset
def test_cuda_epilogue_after_cudnn_conv_is_ok_under_partial():
    task = wb.load_kernelbench(KB / "level2" / "1_Conv2d_BiasAdd_ReLU.py")
    assert task.kernel_policy == "partial"
    res = wb.evaluate(task, wb.Candidate(source=CONV_EPILOGUE_CUDA, language="cuda"), device="cuda", timeout=600)
    assert res.status == "ok", res.message


@pytest.mark.parametrize("path", sorted(KB.glob("level*/*.py")), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_reference_as_its_own_candidate_at_full_size(path):
    """Identical code on both sides: the reference in a runner of its own, both pinned to one core, the rounds
    paired. It must never be called faster or slower."""
    task = wb.load_kernelbench(path)
    res = wb.evaluate(task, reference_as_candidate(task), device="cuda", timeout=600)
    assert res.status == "ok", res.message
    assert res.protocol["reference_timed_in"].startswith("runner"), res.protocol.get("reference_timed_in")
    assert 0.95 < res.speedup < 1.05, (res.speedup, res.speedup_ci)
    assert res.speedup_verdict in ("same", "inconclusive"), (res.speedup, res.speedup_ci, res.speedup_verdict)
