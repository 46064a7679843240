"""Changes its working directory during training (to where it keeps checkpoints)."""

import os
import sys

from _common import sgd_steps

target = sys.argv[sys.argv.index("--chdir") + 1]
for i in sgd_steps():
    if i == 1:
        os.chdir(target)
