"""The caller's side: handles on judge processes (trusted, light; runs in the notebook, CLI or study)."""
