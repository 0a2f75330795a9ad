"""Studies: papermill runs of study notebooks over a parameter grid, locally or on a Dask cluster, and sweeps of a
kernel's launch parameters."""
