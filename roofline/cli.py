"""`kwb ceilings`: measured ceilings beside the datasheet."""

from __future__ import annotations

import argparse


def add_cli(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("ceilings", help="measure (once, cached) and print the device's real ceilings")
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda if available)")
    p.add_argument("--refresh", action="store_true", help="measure again instead of using the cache")
    p.set_defaults(handler=ceilings_command)


def ceilings_command(args: argparse.Namespace) -> int:
    import torch

    from roofline.ceilings import get_ceilings
    from roofline.specs import match_device_name

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    c = get_ceilings(device, refresh=args.refresh)
    spec = match_device_name(c.device_name) if device.startswith("cuda") else None
    print(f"device: {c.device_name} (measured {c.measured_at})")
    print(f"{'ceiling':<22}{'measured':>16}{'datasheet':>16}{'ratio':>8}")
    ds = spec.memory_bandwidth if spec else None
    print(f"{'copy bandwidth':<22}{c.copy_bandwidth / 1e9:>13.0f} GB/s" + (
        f"{ds / 1e9:>13.0f} GB/s{c.copy_bandwidth / ds:>8.2f}" if ds else f"{'n/a':>16}"))
    for key, rate in c.matmul_flops.items():
        peak = spec.peaks.get(key) if spec else None
        print(f"{'matmul ' + key:<22}{rate / 1e12:>11.1f} TFLOP/s" + (
            f"{peak / 1e12:>11.1f} TFLOP/s{rate / peak:>8.2f}" if peak else f"{'n/a':>16}"))
    return 0


#: Name the `kwb` command looks for.
add_ceilings_commands = add_cli
