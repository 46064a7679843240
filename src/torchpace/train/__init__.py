"""Step-level fixes: precision, compile, accumulation, checkpointing, memory warm-up, batch size."""
