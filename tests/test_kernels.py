"""The fused CPU kernel equals the PyTorch code it replaces: loss, gradient, trained units."""

import dataclasses
import shutil

import numpy as np
import pytest
import torch

from softmax_icl import kernels
from softmax_icl.models import predict
from softmax_icl.tasks import TaskBatch, sphere
from softmax_icl.training import Sweep, train_sweep

needs_kernel = pytest.mark.skipif(kernels.backend().startswith("torch"), reason=kernels.backend())


def _batch(R, G, B, n, d, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = sphere((R, B, n + 1), d, g, "cpu")
    y = torch.randn(R, G, B, n, generator=g)
    f = torch.randn(R, G, B, generator=g)
    return TaskBatch(x[:, :, :n], y, x[:, :, n], f)


def _torch_loss(kind, batch, M):
    return ((predict(kind, batch.x_ctx, batch.y_ctx, batch.x_q, M) - batch.f_q) ** 2).mean(-1)


def test_the_kernel_builds_where_there_is_a_c_compiler():
    if shutil.which("cc") or shutil.which("gcc"):
        assert kernels.backend().startswith("fused C kernel"), kernels.backend()


@needs_kernel
@pytest.mark.parametrize("kind", ["softmax", "linear"])
@pytest.mark.parametrize("R,G,B,n,d", [(1, 1, 1, 1, 1), (2, 3, 7, 5, 2), (1, 4, 37, 50, 5), (2, 2, 9, 20, 10),
                                       (1, 2, 5, 6, 13)])
def test_fused_loss_and_gradient_equal_the_pytorch_code(kind, R, G, B, n, d):
    batch = _batch(R, G, B, n, d)
    for scale in (0.3, 3.0, 100.0):                 # wide windows to nearly one-hot ones (large scores)
        M0 = torch.randn(R, G, d, d, generator=torch.Generator().manual_seed(1)) * scale
        M1, M2 = M0.clone().requires_grad_(), M0.clone().requires_grad_()
        l1 = kernels.readout_mse(kind, batch.x_ctx, batch.x_q, batch.y_ctx, batch.f_q, M1)
        l2 = _torch_loss(kind, batch, M2)
        w = torch.rand(R, G)                        # a non-trivial upstream gradient
        (l1 * w).sum().backward()
        (l2 * w).sum().backward()
        torch.testing.assert_close(l1, l2, rtol=2e-5, atol=1e-6)
        torch.testing.assert_close(M1.grad, M2.grad, rtol=2e-4, atol=1e-4 * float(M2.grad.abs().max()))


@needs_kernel
def test_fused_kernel_gives_the_same_numbers_on_any_number_of_threads():
    batch = _batch(2, 8, 512, 40, 3)                # enough work for the kernel to use several threads
    M = torch.randn(2, 8, 3, 3, generator=torch.Generator().manual_seed(2)) * 4
    old = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = kernels.readout_mse("softmax", batch.x_ctx, batch.x_q, batch.y_ctx, batch.f_q, M.clone())
        torch.set_num_threads(max(2, old))
        many = kernels.readout_mse("softmax", batch.x_ctx, batch.x_q, batch.y_ctx, batch.f_q, M.clone())
    finally:
        torch.set_num_threads(old)
    torch.testing.assert_close(one, many, rtol=0, atol=0)


@needs_kernel
def test_training_with_the_kernel_matches_training_with_pytorch(monkeypatch):
    sweep = Sweep(model="softmax", classes=("relu", "cosine"), L=(0.5, 3.0), sigma=(0.1,), n=(8, 16), seeds=2, d=3,
                  steps=30, batch_size=32, lr=0.05, log_every=10)
    for model in ("softmax", "linear"):
        sw = dataclasses.replace(sweep, model=model)
        fused = train_sweep(sw, "cpu", progress=False)
        monkeypatch.setattr(kernels, "usable", lambda *a: False)
        plain = train_sweep(sw, "cpu", progress=False)
        monkeypatch.undo()
        np.testing.assert_allclose(fused.M_history, plain.M_history, rtol=2e-3, atol=2e-4)
        np.testing.assert_allclose(fused.loss_history, plain.loss_history, rtol=2e-3, atol=1e-6)


def test_kernel_choice_is_validated_and_can_be_turned_off(monkeypatch):
    monkeypatch.setattr(kernels, "_status", None)
    monkeypatch.setattr(kernels, "_lib", None)
    monkeypatch.setenv(kernels.ENV, "fast")
    with pytest.raises(ValueError, match="SOFTMAX_ICL_KERNEL.*'auto', 'torch'"):
        kernels.backend()
    monkeypatch.setenv(kernels.ENV, "torch")
    assert kernels.backend().startswith("torch")
    M = torch.zeros(1, 1, 2, 2)
    assert not kernels.usable("softmax", M, torch.zeros(1, 1, 3, 4))
    with pytest.raises(RuntimeError, match="not available"):
        kernels.readout_mse("softmax", torch.zeros(1, 3, 4, 2), torch.zeros(1, 3, 2), torch.zeros(1, 1, 3, 4),
                            torch.zeros(1, 1, 3), M)


@needs_kernel
def test_fused_kernel_reads_the_samplers_views_in_place_and_copies_anything_else():
    """Inputs as the sampler lays them out (views of one tensor) and as separate tensors give the same loss."""
    batch = _batch(2, 3, 11, 7, 4)                                  # x_ctx, x_q views of one (R, B, n + 1, d) tensor
    assert kernels._inputs(batch.x_ctx, batch.x_q).data_ptr() == batch.x_ctx.data_ptr()
    f_full = torch.randn(2, 3, 11, 8)
    strided = f_full[..., 7]                                        # the sampler's targets: a column of the labels
    assert kernels._targets(strided)[1] == 8
    M = torch.randn(2, 3, 4, 4, generator=torch.Generator().manual_seed(3))
    a = kernels.readout_mse("softmax", batch.x_ctx, batch.x_q, batch.y_ctx, strided, M)
    b = kernels.readout_mse("softmax", batch.x_ctx.clone(), batch.x_q.clone(), batch.y_ctx, strided.clone(), M)
    torch.testing.assert_close(a, b, rtol=0, atol=0)
    torch.testing.assert_close(a, _torch_loss("softmax", TaskBatch(batch.x_ctx, batch.y_ctx, batch.x_q, strided), M),
                               rtol=2e-5, atol=1e-6)
