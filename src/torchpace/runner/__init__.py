"""The live runner: a training script becomes a trace and an Inspection.

`run.run_target` runs the script in this process as `python SCRIPT ARGS` would; `session` and its
`hooks` find the steps (`steps`), drive torch.profiler (`recorder`, `profiling`) and stop the script
(`watchdog`, `threads`); `sensors/` watch the live objects (DataLoaders, model, flags, host, child
processes) and each owns the typed record it fills; `launch` starts one doctored process per rank
under torchrun. The diagnosis engine (doctor/) reads what this produces and knows nothing of how.
"""
