"""LBFGS with step(closure), and a slow pause after each step (plotting, saving) that gives no
signal: the doctor must keep counting optimizer steps, not fall back to time windows."""

import time

import torch
from _common import steps_from_argv
from torch import nn

model = nn.Sequential(nn.Linear(16, 64), nn.Tanh(), nn.Linear(64, 1))
opt = torch.optim.LBFGS(model.parameters(), max_iter=5)
x, y = torch.randn(256, 16), torch.randn(256, 1)


def closure():
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    return loss


for _ in range(steps_from_argv(12)):
    opt.step(closure)
    time.sleep(0.4)  # plotting the prediction, as time_sequence_prediction does
