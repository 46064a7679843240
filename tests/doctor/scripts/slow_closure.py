"""LBFGS with step(closure), and a slow pause after each step (plotting, saving) that gives no
signal: the doctor must keep counting optimizer steps, not fall back to time windows."""

import time

import torch
from _common import steps_from_argv
from torch import nn

# Forward and backward outweigh LBFGS's own vector work many times over (a 16-64-1 net on 256
# rows did not: its optimizer arithmetic took as long as the model on a busy machine).
model = nn.Sequential(nn.Linear(16, 256), nn.Tanh(), nn.Linear(256, 1))
opt = torch.optim.LBFGS(model.parameters(), max_iter=5)
x, y = torch.randn(4096, 16), torch.randn(4096, 1)


def closure():
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    return loss


for _ in range(steps_from_argv(12)):
    opt.step(closure)
    time.sleep(0.4)  # plotting the prediction, as time_sequence_prediction does
