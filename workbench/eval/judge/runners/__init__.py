"""The judge's handle on candidate runners: the fork server and runner processes, the session that shares memory with
a runner and calls its model, starting runners (spares and build caches included), and what a runner's faults mean."""
