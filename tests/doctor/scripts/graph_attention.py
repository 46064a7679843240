"""Graph attention over a dense adjacency (as pytorch/examples' GAT): each score is a
LeakyReLU of a sum of two thin products, masked to the edges, softmax, then weights @ features.
Not scaled_dot_product_attention's Q @ K^T: no SDPA call computes it."""

import torch
from _common import steps_from_argv
from torch import nn

N, FEATURES, HEADS, HIDDEN = 1200, 64, 4, 16
torch.manual_seed(0)
x = torch.randn(N, FEATURES)
adj = (torch.rand(N, N) < 0.005) | torch.eye(N, dtype=torch.bool)
w = nn.Parameter(torch.randn(FEATURES, HEADS * HIDDEN) * 0.1)
a = nn.Parameter(torch.randn(HEADS, 2 * HIDDEN, 1) * 0.1)
opt = torch.optim.Adam([w, a])

for _ in range(steps_from_argv()):
    h = (x @ w).view(N, HEADS, HIDDEN).permute(1, 0, 2)  # heads, nodes, hidden
    source = torch.matmul(h, a[:, :HIDDEN, :])  # heads, nodes, 1
    target = torch.matmul(h, a[:, HIDDEN:, :])
    scores = nn.functional.leaky_relu(source + target.mT, 0.2)  # heads, nodes, nodes
    scores = torch.where(adj, scores, torch.full_like(scores, -9e15))
    out = torch.matmul(torch.softmax(scores, dim=-1), h)
    loss = out.pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
