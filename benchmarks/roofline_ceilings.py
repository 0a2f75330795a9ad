"""Workbench ceilings vs triton.testing.do_bench in one run: copy bandwidth and cuBLAS matmul per dtype.

Target: the workbench's measured ceilings reach >= 97% of what do_bench measures for the same operation.
    PYTHONPATH=. python benchmarks/roofline_ceilings.py
"""

from __future__ import annotations

import sys


def main() -> int:
    import torch

    if not torch.cuda.is_available():
        print("needs a CUDA GPU: the CPU has no comparable do_bench reference")
        return 0
    import triton.testing as tt

    from roofline.ceilings import measure
    from roofline.specs import match_device_name

    c = measure("cuda")
    spec = match_device_name(c.device_name)
    n = c.details["copy_bytes_per_buffer"] // 4
    src = torch.empty(n, device="cuda").uniform_()
    dst = torch.empty_like(src)
    ms = tt.do_bench(lambda: dst.copy_(src), warmup=50, rep=500, return_mode="median")
    copy_ref = 2 * n * 4 / (ms / 1e3)
    del src, dst
    rows = [("copy (B/s, read+write)", c.copy_bandwidth, copy_ref, spec.memory_bandwidth if spec else None)]
    for key, dtype in {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}.items():
        size = c.details["matmul"][key]["n"]
        a = torch.randn(size, size, device="cuda", dtype=dtype)
        b = torch.randn(size, size, device="cuda", dtype=dtype)
        torch.backends.cuda.matmul.allow_tf32 = key == "tf32"
        ms = tt.do_bench(lambda a=a, b=b: torch.matmul(a, b), warmup=50, rep=500, return_mode="median")
        torch.backends.cuda.matmul.allow_tf32 = False
        rows.append((f"matmul {key} (FLOP/s)", c.matmul_flops[key], 2 * size**3 / (ms / 1e3), spec.peaks.get(key) if spec else None))
        del a, b
    print(f"device: {c.device_name}")
    print(f"| ceiling | workbench | do_bench | workbench/do_bench | datasheet | workbench/datasheet |")
    print("|---|---|---|---|---|---|")
    for name, ours, ref, sheet in rows:
        scale = 1e12
        print(f"| {name} | {ours / scale:.3f} T | {ref / scale:.3f} T | {ours / ref:.3f} | "
              f"{(sheet or 0) / scale:.3f} T | {(ours / sheet) if sheet else float('nan'):.3f} |")
    worst = min(ours / ref for _, ours, ref, _ in rows)
    print(f"\nworst workbench/do_bench ratio: {worst:.3f} (target >= 0.97)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
