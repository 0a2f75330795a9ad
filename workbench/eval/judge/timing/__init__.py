"""How fast a candidate is, by the judge's clock: the input pool, the harness calibration, paired rounds with the
reference, stopping rules and statistics, the clock check, placement on the CPU and GPU telemetry."""
