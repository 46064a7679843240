"""The input pipeline: fast loaders, device prefetching, sharded iterables, bucketing samplers."""
