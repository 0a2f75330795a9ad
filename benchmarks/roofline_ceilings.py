"""Workbench ceilings vs triton.testing.do_bench, measured in one run on this GPU.

For the copy (bytes read + written) and for torch.matmul per dtype (cuBLAS: fp32, tf32, fp16, bf16) it prints
the rate roofline.ceilings measures, the rate do_bench measures for the very same operation and buffers, their
ratio (target >= 0.97: the workbench must not understate the machine), and the datasheet figure beside them.
Needs torch + triton only; about 30 s on an H100.

    PYTHONPATH=. python benchmarks/roofline_ceilings.py [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

TARGET = 0.97


def _do_bench_rate(fn, work: float) -> float:
    """work / median seconds of fn under triton.testing.do_bench (its own warm-up and L2 clearing)."""
    import triton.testing as tt

    ms = tt.do_bench(fn, warmup=100, rep=400, return_mode="median")
    return work / (ms / 1e3)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", default=None, help="also write the rows as JSON here")
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("roofline_ceilings: no CUDA GPU here. The comparison is against triton.testing.do_bench, which needs "
              "a GPU; on the CPU `kwb ceilings --device cpu` prints the measured CPU ceilings.")
        return 0
    from roofline import ceilings as C
    from roofline.specs import match_device_name

    started = time.perf_counter()
    device = args.device
    name = torch.cuda.get_device_name(torch.device(device))
    spec = match_device_name(name)
    rows = []

    # Copy: the same buffers for both measurements.
    nbytes = C.default_copy_bytes(device)
    ours, details = C.measure_copy(device, nbytes)
    src = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    theirs = _do_bench_rate(lambda dst=dst, src=src: dst.copy_(src), 2 * nbytes)
    del src, dst
    rows.append({"ceiling": "copy (read+write)", "unit": "TB/s", "workbench": ours, "do_bench": theirs,
                 "datasheet": spec.memory_bandwidth if spec else None, "size": f"2 x {nbytes / 2**30:.2f} GiB"})

    for key in C.GPU_MATMUL_DTYPES:
        ours, details = C.measure_matmul(device, key)
        n = details["n"]
        dtype = C.matmul_dtype(key)
        a = torch.randn(n, n, device=device, dtype=dtype)
        b = torch.randn(n, n, device=device, dtype=dtype)
        previous = torch.get_float32_matmul_precision()
        torch.set_float32_matmul_precision("high" if key == "tf32" else "highest")
        try:
            theirs = _do_bench_rate(lambda a=a, b=b: torch.matmul(a, b), 2 * n**3)
        finally:
            torch.set_float32_matmul_precision(previous)
        del a, b
        rows.append({"ceiling": f"matmul {key}", "unit": "TFLOP/s", "workbench": ours, "do_bench": theirs,
                     "datasheet": spec.peak(key) if spec else None, "size": f"{n}^3"})
    torch.cuda.empty_cache()

    print(f"\n## Ceilings on {name} (torch {torch.__version__}), {time.perf_counter() - started:.0f} s\n")
    print("| ceiling | size | workbench | do_bench | workbench / do_bench | datasheet | workbench / datasheet |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        r["ratio"] = r["workbench"] / r["do_bench"]
        r["of_datasheet"] = r["workbench"] / r["datasheet"] if r["datasheet"] else None
        sheet = f"{r['datasheet'] / 1e12:.3f}" if r["datasheet"] else "-"
        share = f"{r['of_datasheet']:.3f}" if r["of_datasheet"] else "-"
        print(f"| {r['ceiling']} | {r['size']} | {r['workbench'] / 1e12:.3f} {r['unit']} | {r['do_bench'] / 1e12:.3f} "
              f"| {r['ratio']:.3f} | {sheet} | {share} |")
    worst = min(rows, key=lambda r: r["ratio"])
    ok = worst["ratio"] >= TARGET
    print(f"\nworst workbench/do_bench: {worst['ratio']:.3f} ({worst['ceiling']}); target >= {TARGET}: "
          f"{'PASS' if ok else 'FAIL'}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"device": name, "rows": rows, "pass": ok}, fh, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
