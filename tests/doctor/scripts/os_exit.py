"""Ends with os._exit(3) in the middle of training (no cleanup, no atexit)."""

import os

from _common import sgd_steps

for i in sgd_steps():
    if i == 6:
        os._exit(3)
