"""Live throughput, utilisation and progress."""
