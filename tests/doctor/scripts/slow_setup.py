"""Seconds of data preparation before the first step (tokenising, indexing), with no model call:
no time to cut into windows."""

import time

from _common import sgd_steps

deadline = time.monotonic() + 2.0
while time.monotonic() < deadline:  # "tokenising": busy Python, no torch module
    sum(range(10_000))
for _ in sgd_steps():
    pass
