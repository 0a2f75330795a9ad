"""Built-in tasks. Each module beside this file is a KernelBench-format reference plus a `TASK` definition;
importing this package registers them all."""
