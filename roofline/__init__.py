"""Hardware limits for kernels: datasheet specs, measured ceilings, work counting, speed-of-light, roofline plots.

    import roofline
    spec = roofline.specs.detect()                 # this GPU's datasheet entry (the CPU: measured)
    c = roofline.ceilings.get_ceilings("cuda")     # measured once, cached: copy bandwidth, matmul per dtype
    roofline.counting.count(task, "gpu")           # FLOPs and minimal bytes (task formulas or counted)
    roofline.annotate_result(result, task)         # SOL fraction, bound, SOL score, faster-than-physics
    roofline.plot.roofline_figure(results, spec, c)    # plotly (imported lazily)
"""

from __future__ import annotations

from roofline import ceilings, counting, sol, specs
from roofline.ceilings import Ceilings, get_ceilings
from roofline.counting import Work, count
from roofline.sol import annotate_result
from roofline.specs import DeviceSpec, detect, get_spec

__all__ = ["annotate_result", "ceilings", "counting", "sol", "specs", "plot", "ncu", "Ceilings", "DeviceSpec", "Work",
           "count", "detect", "get_ceilings", "get_spec"]


def __getattr__(name: str):
    # plot needs plotly and ncu spawns processes: both load on first use.
    if name in ("plot", "ncu"):
        import importlib

        return importlib.import_module(f"roofline.{name}")
    raise AttributeError(f"module 'roofline' has no attribute {name!r}")
