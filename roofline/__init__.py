"""Hardware limits for kernels: datasheet specs, measured ceilings, work counting, speed-of-light, roofline plots.

    import roofline
    spec = roofline.specs.detect()               # this device's datasheet entry (or measured ceilings)
    roofline.annotate_result(result, task)        # SOL fraction, bound, faster-than-physics flag
    roofline.plot.roofline_figure(results, spec)  # plotly figure (plotly imported lazily)
"""

from __future__ import annotations

from roofline import ceilings, counting, sol, specs
from roofline.sol import annotate_result

__all__ = ["annotate_result", "ceilings", "counting", "sol", "specs", "plot"]


def __getattr__(name: str):
    if name == "plot":
        import importlib

        return importlib.import_module("roofline.plot")
    raise AttributeError(name)
