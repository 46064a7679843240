"""warmup_memory: one forward+backward that leaves parameters, grads, buffers, RNG untouched."""

from __future__ import annotations

import pytest
import torch
from train_helpers import TinyNet, cross_entropy

from torchpace.train import TrainStep, warmup_memory


def _trained_step(dropout: float = 0.3) -> TrainStep:
    torch.manual_seed(0)
    model = TinyNet(dropout=dropout)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    step = TrainStep(model, opt, loss_fn=cross_entropy, accumulate=2)
    x, y = torch.randn(8, 8), torch.randint(0, 3, (8,))
    step(x, y), step(x, y), step(x, y)  # Adam state exists, and one micro-batch is pending
    return step


def _snapshot(step: TrainStep):
    model = step.model
    return (
        [p.detach().clone() for p in model.parameters()],
        [p.grad for p in model.parameters()],
        [b.clone() for b in model.buffers()],
        {
            k: {n: v.clone() for n, v in s.items()}
            for k, s in step.optimizer.state_dict()["state"].items()
        },
    )


def test_leaves_everything_bit_exact():
    step = _trained_step()
    params, grads, buffers, opt_state = _snapshot(step)
    grad_values = [g.clone() for g in grads]
    longest = (torch.randn(32, 8), torch.randint(0, 3, (32,)))
    warmup_memory(step, longest)
    model = step.model
    assert all(torch.equal(a, b) for a, b in zip(params, model.parameters(), strict=True))
    assert all(p.grad is g for p, g in zip(model.parameters(), grads, strict=True))
    assert all(torch.equal(p.grad, v) for p, v in zip(model.parameters(), grad_values, strict=True))
    assert all(torch.equal(a, b) for a, b in zip(buffers, model.buffers(), strict=True))
    after = step.optimizer.state_dict()["state"]
    for k, s in opt_state.items():
        assert all(torch.equal(v, after[k][n]) for n, v in s.items())
    assert step.pending == 1


def test_rng_stream_is_unchanged():
    step = _trained_step()
    longest = (torch.randn(32, 8), torch.randint(0, 3, (32,)))
    torch.manual_seed(7)
    expected = torch.rand(3)
    torch.manual_seed(7)
    warmup_memory(step, longest)  # dropout draws masks inside, from a forked RNG
    assert torch.equal(torch.rand(3), expected)


def test_it_really_runs_backward():
    step = _trained_step()
    seen = []
    step.model.fc1.weight.register_hook(lambda g: seen.append(g.shape))
    warmup_memory(step, (torch.randn(32, 8), torch.randint(0, 3, (32,))))
    assert seen == [torch.Size([16, 8])]


def test_plain_function_needs_the_model():
    model = TinyNet()
    with pytest.raises(
        TypeError, match="warmup_memory needs model= when step_fn is a plain function"
    ):
        warmup_memory(lambda b: model(b).sum(), torch.randn(4, 8))
    report = warmup_memory(lambda b: model(b).sum(), torch.randn(4, 8), model=model)
    assert report.device == "cpu" and report.reserved_bytes is None
    assert all(p.grad is None for p in model.parameters())


def test_plain_function_must_return_a_loss():
    model = TinyNet()
    with pytest.raises(
        TypeError, match="step_fn must return the loss tensor; it returned NoneType"
    ):
        warmup_memory(lambda b: None, torch.randn(4, 8), model=model)


def _large_pool_segments_during_variable_lengths(warm: bool) -> tuple[int, int]:
    """cudaMalloc calls (large pool) and alloc retries made while lengths vary, after set-up."""
    device = torch.device("cuda")
    torch.manual_seed(0)
    model = torch.nn.TransformerEncoder(
        torch.nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True), 2
    ).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    step = TrainStep(model, opt, loss_fn=lambda m, x: m(x).float().pow(2).mean())
    step(torch.randn(8, 16, 256, device=device))  # optimizer state exists before warming up
    if warm:
        warmup_memory(step, torch.randn(8, 512, 256, device=device))
    torch.cuda.synchronize()
    before = torch.cuda.memory_stats(device)
    for length in (64, 128, 200, 300, 400, 480, 512):  # growing: the worst case for the cache
        step(torch.randn(8, length, 256, device=device))
    torch.cuda.synchronize()
    after = torch.cuda.memory_stats(device)
    key = "segment.large_pool.allocated"  # counts the allocator's cudaMalloc calls (blocks > 1 MB)
    return after[key] - before[key], after["num_alloc_retries"] - before["num_alloc_retries"]


@pytest.mark.cuda
def test_no_cuda_malloc_after_warmup_on_variable_lengths():
    """After warming up on the longest batch, later batches reuse cached large blocks.

    Small tensors (< 1 MB) come from a separate pool of 2 MB segments: a tensor that was large at
    the longest length can be small at a short one, so only the large pool is asserted flat.
    """
    torch.cuda.empty_cache()
    cold_mallocs, _ = _large_pool_segments_during_variable_lengths(warm=False)
    torch.cuda.empty_cache()
    warm_mallocs, warm_retries = _large_pool_segments_during_variable_lengths(warm=True)
    assert cold_mallocs > 0  # the control: without warm-up, growing batches do call cudaMalloc
    assert (warm_mallocs, warm_retries) == (0, 0)
