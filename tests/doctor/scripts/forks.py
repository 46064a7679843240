"""Forks during training: the child trains a few steps on its own, then ends; the parent waits."""

import os

import torch
from _common import sgd_steps

torch.set_num_threads(1)  # OpenMP thread pools do not survive a fork
child = False
for i in sgd_steps():
    if i == 2:
        pid = os.fork()
        if pid == 0:
            child = True
        else:
            os.waitpid(pid, 0)
    if child and i == 12:
        break
print("child done" if child else "parent done")
