"""Attention predictors: the Nadaraya-Watson identity, the fused backward, masking."""

import math

import pytest
import torch

from softmax_icl.models import AttentionUnit, attention_weights, predict, predict_full, predict_reference
from softmax_icl.tasks import sphere


def _context(C=3, B=5, n=9, d=4, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    x = sphere((C, B, n), d, g, "cpu").to(dtype)
    xq = sphere((C, B), d, g, "cpu").to(dtype)
    x, xq = x / x.norm(dim=-1, keepdim=True), xq / xq.norm(dim=-1, keepdim=True)   # exactly unit in float64
    y = torch.randn(C, B, n, generator=g, dtype=dtype)
    return x, y, xq


def test_softmax_attention_with_M_wI_is_the_gaussian_kernel_nadaraya_watson_estimator():
    x, y, xq = _context()
    for w in (0.1, 1.0, 7.5, 60.0):
        M = w * torch.eye(4, dtype=torch.float64).expand(3, 4, 4)
        attn = predict("softmax", x, y, xq, M)
        dist2 = ((x - xq.unsqueeze(2)) ** 2).sum(-1)
        kernel = torch.exp(-(w / 2) * dist2)                       # Gaussian kernel, bandwidth 1/sqrt(w)
        nw = (kernel * y).sum(-1) / kernel.sum(-1)
        torch.testing.assert_close(attn, nw, rtol=1e-12, atol=1e-12)


def test_linear_attention_is_the_normalised_bilinear_form():
    x, y, xq = _context()
    M = torch.randn(3, 4, 4, dtype=torch.float64)
    expected = torch.einsum("cbn,cbnd,cde,cbe->cb", y, x, M, xq) / x.shape[2]
    torch.testing.assert_close(predict("linear", x, y, xq, M), expected)


@pytest.mark.parametrize("kind", ["softmax", "linear"])
@pytest.mark.parametrize("masked", [False, True])
def test_fused_readout_matches_autograd(kind, masked):
    x, y, xq = _context(n=7, d=3)
    mask = (torch.arange(7).view(1, 1, -1) < torch.tensor([7, 4, 2]).view(-1, 1, 1)) if masked else None
    M = torch.randn(3, 3, 3, dtype=torch.float64, requires_grad=True)
    p1 = predict(kind, x, y, xq, M, mask)
    (g1,) = torch.autograd.grad((p1**2).sum(), M)
    p2 = predict_reference(kind, x, y, xq, M, mask)
    (g2,) = torch.autograd.grad((p2**2).sum(), M)
    torch.testing.assert_close(p1, p2, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(g1, g2, rtol=1e-10, atol=1e-12)
    assert torch.autograd.gradcheck(lambda m: predict(kind, x, y, xq, m, mask), (M,))


@pytest.mark.parametrize("kind", ["softmax", "linear"])
def test_mask_equals_truncated_context(kind):
    x, y, xq = _context(C=1, n=10)
    M = torch.randn(1, 4, 4, dtype=torch.float64)
    mask = torch.arange(10).view(1, 1, -1) < 6
    torch.testing.assert_close(predict(kind, x, y, xq, M, mask), predict(kind, x[:, :, :6], y[:, :, :6], xq, M))


def test_softmax_weights_sum_to_one_and_masked_slots_get_none():
    x, _, xq = _context()
    mask = torch.arange(9).view(1, 1, -1) < torch.tensor([9, 5, 1]).view(-1, 1, 1)
    a = attention_weights("softmax", x, xq, torch.randn(3, 4, 4, dtype=torch.float64), mask)
    torch.testing.assert_close(a.sum(-1), torch.ones(3, 5, dtype=torch.float64))
    assert (a[~mask.expand_as(a)] == 0).all()


def test_full_qkv_with_slide_block_form_equals_M_parameterisation():
    """W_V reads the label, W_K and W_Q read x: the full unit reduces to the M form with M = M_K^T M_Q."""
    x, y, xq = _context(d=3)
    C, d = 3, 3
    MK, MQ = torch.randn(C, d, d, dtype=torch.float64), torch.randn(C, d, d, dtype=torch.float64)
    WK = torch.zeros(C, d + 1, d + 1, dtype=torch.float64)
    WQ = torch.zeros_like(WK)
    WV = torch.zeros_like(WK)
    WK[:, :d, :d], WQ[:, :d, :d], WV[:, d, d] = MK, MQ, 1.0
    for kind in ("softmax", "linear"):
        full = predict_full(kind, x, y, xq, WK, WQ, WV)
        torch.testing.assert_close(full, predict(kind, x, y, xq, MK.transpose(1, 2) @ MQ))


def test_unit_parameterisations_give_their_matrix():
    seed_idx = torch.tensor([0, 1, 0])
    unit = AttentionUnit("softmax", "KQ", 3, seed_idx, [5, 6], 0.5, "cpu")
    torch.testing.assert_close(unit.matrix(), unit.MK.transpose(1, 2) @ unit.MQ)
    torch.testing.assert_close(unit.matrix()[0], unit.matrix()[2])       # same seed, same init
    assert not torch.allclose(unit.matrix()[0], unit.matrix()[1])
    with pytest.raises(ValueError, match="param"):
        AttentionUnit("softmax", "QK", 3, seed_idx, [5, 6], 0.5, "cpu")
    assert math.isfinite(float(unit.matrix().sum().detach()))
