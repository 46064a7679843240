"""Deletes its own working directory during training (a cleanup step gone wrong)."""

import os
import shutil

from _common import sgd_steps

for i in sgd_steps():
    if i == 1:
        shutil.rmtree(os.getcwd())
