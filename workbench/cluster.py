"""Dask clients for work that fans out beyond this process: study points (`study/run.py`) and evaluations
(`dispatch/cluster.py`). One spelling of a cluster everywhere: "local" (one worker per GPU, or per `parallel`),
"local:N", "dask://host:port" (a running scheduler), or "slurm"/"pbs"/"sge"/"lsf" through dask-jobqueue
(docs/clusters.md has a working configuration).
"""

from __future__ import annotations

from typing import Any

from workbench.errors import WorkbenchError, require

#: How long a client keeps trying to reach a running scheduler before the error says it could not.
CONNECT_TIMEOUT = "20s"


def gpu_count() -> int:
    """GPUs this process sees (0 without CUDA)."""
    from workbench.dispatch.gpus import visible_count

    return visible_count()


def make_client(cluster: str, parallel: int = 1, feature: str = "running on a Dask cluster") -> tuple[Any, Any]:
    """(client, cluster object this call started or None): see the module doc for the spellings of `cluster`."""
    if not isinstance(cluster, str) or not cluster:
        raise WorkbenchError(f"cluster must be 'local', 'local:N', 'dask://host:port', 'slurm' or 'pbs', not {cluster!r}")
    distributed = require("distributed", "dask", feature, package="dask[distributed]")
    if cluster.startswith(("dask://", "tcp://")):
        address = cluster.replace("dask://", "tcp://", 1)
        try:
            return distributed.Client(address, timeout=CONNECT_TIMEOUT), None
        except OSError as exc:
            raise WorkbenchError(f"could not reach the Dask scheduler at {address} ({exc}); start one with "
                                 "`dask scheduler` and workers with `dask worker ADDRESS`") from None
    if cluster.startswith("local"):
        count = cluster.split(":", 1)[1] if ":" in cluster else ""
        if count and not count.isdigit():
            raise WorkbenchError(f"cluster {cluster!r}: after 'local:' give a number of workers, e.g. 'local:2'")
        n = int(count) if count else (gpu_count() or max(1, parallel))
        local = distributed.LocalCluster(n_workers=max(1, n), threads_per_worker=1, processes=True,
                                         dashboard_address=None, host="127.0.0.1")
        return distributed.Client(local), local
    if cluster in ("slurm", "pbs", "sge", "lsf"):
        jobqueue = require("dask_jobqueue", "dask", f"{feature} on {cluster}", package="dask-jobqueue")
        klass = {"slurm": "SLURMCluster", "pbs": "PBSCluster", "sge": "SGECluster", "lsf": "LSFCluster"}[cluster]
        remote = getattr(jobqueue, klass)()  # configured by ~/.config/dask/jobqueue.yaml (docs/clusters.md)
        remote.scale(jobs=max(1, parallel))
        return distributed.Client(remote), remote
    raise WorkbenchError(f"unknown cluster {cluster!r}: use local, local:N, dask://host:port, slurm or pbs")
