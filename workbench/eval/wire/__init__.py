"""What crosses between processes: typed messages, transport, shared memory, tensor helpers and the timed loop both sides run."""
