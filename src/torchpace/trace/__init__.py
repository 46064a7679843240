"""Load and normalise torch.profiler traces into one typed model; no judgements here."""
