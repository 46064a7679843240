"""A small regression trained by an optimizer that steps with a closure (LBFGS), or by SGD.

    python closure_step.py [--sgd] [--steps N]

A GradScaler cannot drive `step(closure)`: --verify's fp16 arm must call itself not applicable.
"""

import argparse

import torch
from torch import nn


def main() -> None:
    torch.set_num_threads(1)  # steady timings on a shared machine
    parser = argparse.ArgumentParser()
    parser.add_argument("--sgd", action="store_true")
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 1))
    x, y = torch.randn(64, 16), torch.randn(64, 1)
    if args.sgd:
        opt: torch.optim.Optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    else:
        opt = torch.optim.LBFGS(model.parameters(), lr=0.1, max_iter=2)

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        return loss

    for _ in range(args.steps):
        if args.sgd:
            closure()
            opt.step()
        else:
            opt.step(closure)


if __name__ == "__main__":
    main()
