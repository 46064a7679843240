"""What to prescribe: one policy per decision, shared by rules, the library and the bench.

- `torchpace.fixes.workers`: DataLoader worker counts fitted to cores, ranks and the device, and
  whether workers are expected to pay (`default_workers`, `advise`, `oversubscribed`).
- `torchpace.fixes.policy`: fix code that fits the device (`Target`, `loader_code`,
  `autocast_code`, `channels_last_code`, `threads_code`, `cheaper_loading_code`).

Standard library only: trace rules import it, and `torchpace analyze` never imports torch.
"""
