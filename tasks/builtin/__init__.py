"""The built-in task suite: each file is a KernelBench-format problem written by this project."""
