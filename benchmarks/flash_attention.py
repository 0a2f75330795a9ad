"""Tutorial 08's flash attention kernel against PyTorch's FlashAttention backend, on a GPU.

The kernel is `notebooks/kernels/flash_attention.py` (the tutorial's last step); the baseline is
`scaled_dot_product_attention` under `sdpa_kernel(SDPBackend.FLASH_ATTENTION)`. For causal and full attention
at (batch, heads, seq, head_dim) = (8, 16, 2048, 64) in fp16 by default, it first checks the kernel's output
against the baseline's, then times both with `triton.testing.do_bench` (warm-up, the median of its repetitions)
in interleaved rounds, and prints the median over rounds in ms, TFLOP/s and the kernel's share of
FlashAttention's speed (the tutorial aims at 60% or more). Run on a GPU:
    PYTHONPATH=. python benchmarks/flash_attention.py [--seq 4096] [--rounds 5] [--json out.json]
Without a GPU it says so and exits 0.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

KERNEL = Path(__file__).resolve().parents[1] / "notebooks" / "kernels" / "flash_attention.py"
#: The share of FlashAttention's speed the tutorial's kernel is meant to reach.
TARGET = 0.60
DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}


def attention_flops(batch: int, heads: int, seq: int, head_dim: int, causal: bool) -> int:
    """The two matmuls' FLOPs (2 per multiply-add, 2 * head_dim per query-key pair and matmul) over the pairs
    attention computes: all seq**2, or the seq * (seq + 1) / 2 on and below the diagonal when causal."""
    pairs = seq * (seq + 1) // 2 if causal else seq * seq
    return 4 * batch * heads * head_dim * pairs


def load_kernel() -> ModuleType:
    spec = importlib.util.spec_from_file_location("tutorial_flash_attention", KERNEL)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load the tutorial's kernel from {KERNEL}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def median_ms(fns: dict[str, Any], rounds: int) -> dict[str, float]:
    """Each callable's do_bench median, in `rounds` interleaved rounds (so clock drift hits both alike); the
    median over rounds."""
    import triton.testing

    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            samples[name].append(float(triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")))
    return {name: statistics.median(values) for name, values in samples.items()}


def run_case(kernel: ModuleType, args: argparse.Namespace, causal: bool) -> dict[str, Any]:
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention

    shape = (args.batch, args.heads, args.seq, args.head_dim)
    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(shape, device="cuda", dtype=DTYPES[args.dtype], generator=gen) for _ in range(3))

    def flash() -> torch.Tensor:
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return scaled_dot_product_attention(q, k, v, is_causal=causal)

    def ours() -> torch.Tensor:
        return kernel.flash_attention(q, k, v, causal=causal)

    expected, got = flash(), ours()  # the first call of ours also autotunes
    error = (got.float() - expected.float()).abs().max().item()
    if not torch.allclose(got, expected, atol=args.atol, rtol=args.atol):
        raise SystemExit(f"{'causal' if causal else 'full'}: the kernel disagrees with FlashAttention "
                         f"(max |diff| {error:.3g} > atol {args.atol}); no timing of a wrong kernel")
    times = median_ms({"flash": flash, "ours": ours}, args.rounds)
    flops = attention_flops(args.batch, args.heads, args.seq, args.head_dim, causal)
    best = getattr(kernel.flash_attention_autotuned, "best_config", None)
    return {"causal": causal, "max_abs_diff": error, "flash_ms": times["flash"], "ours_ms": times["ours"],
            "flash_tflops": flops / (times["flash"] * 1e-3) / 1e12, "ours_tflops": flops / (times["ours"] * 1e-3) / 1e12,
            "share_of_flash": times["flash"] / times["ours"], "config": str(best) if best is not None else "n/a"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="float16")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved do_bench rounds per kernel")
    parser.add_argument("--atol", type=float, default=2e-2, help="allowed |ours - FlashAttention| (and rtol)")
    parser.add_argument("--json", default=None, help="write the rows as JSON here")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("flash_attention benchmark: no CUDA GPU here, nothing to measure (run it on a GPU machine)")
        return 0
    kernel = load_kernel()
    import triton

    print(f"{torch.cuda.get_device_name()} | torch {torch.__version__} | triton {triton.__version__}")
    print(f"B={args.batch} H={args.heads} N={args.seq} D={args.head_dim} {args.dtype}, median of {args.rounds} "
          f"do_bench rounds\n")
    print("| attention | FlashAttention ms | TFLOP/s | tutorial kernel ms | TFLOP/s | share of FlashAttention | "
          "max abs diff | config |")
    print("|---|---|---|---|---|---|---|---|")
    rows = []
    for causal in (False, True):
        row = run_case(kernel, args, causal)
        rows.append(row)
        print(f"| {'causal' if causal else 'full'} | {row['flash_ms']:.3f} | {row['flash_tflops']:.0f} | "
              f"{row['ours_ms']:.3f} | {row['ours_tflops']:.0f} | {100 * row['share_of_flash']:.0f}% | "
              f"{row['max_abs_diff']:.2g} | {row['config']} |", flush=True)
    worst = min(row["share_of_flash"] for row in rows)
    print(f"\nlowest share {100 * worst:.0f}%: target of {100 * TARGET:.0f}% {'met' if worst >= TARGET else 'NOT met'}")
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
