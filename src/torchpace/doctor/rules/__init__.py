"""One module per rule; each registers itself with `@rule("<name>")`."""
