"""Where evaluations run: the judge processes a caller keeps per GPU, which judge takes each job, and batches on a Dask
cluster (trusted, light; runs in the notebook, CLI or study). One evaluation itself is `workbench.eval`."""
