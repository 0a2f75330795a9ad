"""The judge process: reference, inputs, correctness, comparison, the judge's clock and timing statistics, verdict; never imports candidate code."""
