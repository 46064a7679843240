"""Anomaly detection left on, and an evaluation forward under autograd every step.

    python debug_eval.py [--no-anomaly] [--no-grad-eval] [--backward-through-eval]

Many small layers: per-op costs (anomaly detection's stack capture, autograd's graph) dominate.
--backward-through-eval trains through the eval-mode forward (no_grad there must fail).
"""

import argparse

import torch
from torch import nn


def main() -> None:
    torch.set_num_threads(1)  # steady timings on a shared machine
    parser = argparse.ArgumentParser()
    parser.add_argument("--no-anomaly", action="store_true")
    parser.add_argument("--no-grad-eval", action="store_true")
    parser.add_argument("--backward-through-eval", action="store_true")
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    torch.autograd.set_detect_anomaly(not args.no_anomaly)
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Sequential(nn.Linear(16, 16), nn.Tanh()) for _ in range(24)])
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(args.steps):
        x = torch.randn(8, 16)
        loss = model(x).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        model.eval()
        for _ in range(4):  # evaluation: four forwards, no backward
            if args.no_grad_eval:
                with torch.no_grad():
                    out = model(torch.randn(8, 16))
            else:
                out = model(torch.randn(8, 16))
        if args.backward_through_eval:
            out.sum().backward()
        model.train()


if __name__ == "__main__":
    main()
