"""`kwb ceilings`: this device's measured ceilings beside its datasheet.

    kwb ceilings                 # measure once (cached), print measured | datasheet | ratio
    kwb ceilings --refresh       # measure again
    kwb ceilings --json          # machine-readable
    kwb ceilings --spec "H100 SXM"   # compare with another table entry
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from roofline.ceilings import Ceilings
    from roofline.specs import DeviceSpec


def add_cli(subparsers: argparse._SubParsersAction) -> None:
    """Register `ceilings` on the `kwb` argument parser (the hook workbench.cli.main calls)."""
    p = subparsers.add_parser("ceilings", help="measure (once, cached) and print this device's real ceilings "
                                               "beside its datasheet")
    p.add_argument("--device", default=None, help="cpu, cuda or cuda:N (default: cuda if available, else cpu)")
    p.add_argument("--refresh", action="store_true", help="measure again instead of using the cache")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--spec", default=None, help="datasheet entry to compare with (default: the detected device)")
    p.set_defaults(handler=ceilings_command)


def _row(label: str, measured: float, sheet: float | None, unit: str, scale: float) -> str:
    m = f"{measured / scale:>10.4g} {unit}"
    if not sheet:
        return f"  {label:<18}{m:>18}{'-':>18}{'-':>8}"
    return f"  {label:<18}{m:>18}{f'{sheet / scale:>10.4g} {unit}':>18}{measured / sheet:>8.2f}"


def ceilings_table(ceilings: Ceilings, spec: DeviceSpec | None) -> str:
    """The measured-vs-datasheet table as text."""
    lines = [f"device: {ceilings.device_name}",
             f"measured {ceilings.measured_at} ({ceilings.details.get('method', '')}); cache key {ceilings.key}",
             f"datasheet: {spec.name} ({spec.source})" if spec else "datasheet: none (not in the table; "
             "these measured ceilings are the roofline)",
             f"  {'ceiling':<18}{'measured':>18}{'datasheet':>18}{'ratio':>8}",
             _row("copy (read+write)", ceilings.copy_bandwidth, spec.memory_bandwidth if spec else None, "GB/s", 1e9)]
    for key, rate in ceilings.matmul_flops.items():
        sheet = spec.peak(key) if spec and (key in spec.peaks or key == "fp64") else None
        lines.append(_row(f"matmul {key}", rate, sheet, "TFLOP/s", 1e12))
    if spec:
        lines.append("  datasheet rates are dense (no sparsity) boost-clock peaks")
    return "\n".join(lines)


def ceilings_command(args: argparse.Namespace) -> int:
    import torch

    from roofline.ceilings import get_ceilings
    from roofline.specs import get_spec, match_device_name

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        print("no CUDA device here: use --device cpu", file=sys.stderr)
        return 2
    c = get_ceilings(device, refresh=bool(getattr(args, "refresh", False)), progress=not getattr(args, "json", False))
    name = getattr(args, "spec", None)
    spec = get_spec(name) if name else (match_device_name(c.device_name) if device.startswith("cuda") else None)
    if getattr(args, "json", False):
        out = {"ceilings": c.to_dict(), "datasheet": None}
        if spec:
            out["datasheet"] = {"name": spec.name, "peaks": spec.peaks, "memory_bandwidth": spec.memory_bandwidth,
                                "source": spec.source}
        print(json.dumps(out, indent=1))
    else:
        print(ceilings_table(c, spec))
    return 0


#: The name workbench.cli.main looks for (COMMAND_HOOKS).
add_ceilings_commands = add_cli
