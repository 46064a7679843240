"""Built-in benchmark workloads."""
