"""Attention predictors: the Nadaraya-Watson identity, the fused backward, the shared-input layout."""

import math

import pytest
import torch

from softmax_icl.models import AttentionUnit, attention_weights, predict, predict_full, predict_reference, scores


def _context(R=2, G=3, B=5, n=9, d=4, seed=0, dtype=torch.float64):
    """R rows of inputs shared by G configurations each, with their own labels."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(R, B, n, d, generator=g, dtype=dtype)
    xq = torch.randn(R, B, d, generator=g, dtype=dtype)
    x, xq = x / x.norm(dim=-1, keepdim=True), xq / xq.norm(dim=-1, keepdim=True)   # on the sphere
    y = torch.randn(R, G, B, n, generator=g, dtype=dtype)
    return x, y, xq


def test_softmax_attention_with_M_wI_is_the_gaussian_kernel_nadaraya_watson_estimator():
    x, y, xq = _context(G=4)
    ws = torch.tensor([0.1, 1.0, 7.5, 60.0], dtype=torch.float64)
    M = ws.view(1, 4, 1, 1) * torch.eye(4, dtype=torch.float64).expand(2, 4, 4, 4)
    attn = predict("softmax", x, y, xq, M)
    dist2 = ((x - xq.unsqueeze(2)) ** 2).sum(-1).unsqueeze(1)        # (R, 1, B, n)
    kernel = torch.exp(-(ws.view(1, 4, 1, 1) / 2) * dist2)            # Gaussian kernel, bandwidth 1/sqrt(w)
    nw = (kernel * y).sum(-1) / kernel.sum(-1)
    torch.testing.assert_close(attn, nw, rtol=1e-12, atol=1e-12)


def test_scores_are_the_bilinear_form_and_linear_attention_normalises_by_n():
    x, y, xq = _context()
    M = torch.randn(2, 3, 4, 4, dtype=torch.float64)
    s = torch.einsum("rbnd,rgde,rbe->rgbn", x, M, xq)
    torch.testing.assert_close(scores(x, xq, M), s)
    torch.testing.assert_close(predict("linear", x, y, xq, M), (s * y).sum(-1) / x.shape[2])


@pytest.mark.parametrize("kind", ["softmax", "linear"])
def test_fused_readout_matches_autograd(kind):
    x, y, xq = _context(n=7, d=3)
    M = torch.randn(2, 3, 3, 3, dtype=torch.float64, requires_grad=True)
    p1 = predict(kind, x, y, xq, M)
    (g1,) = torch.autograd.grad((p1**2).sum(), M)
    p2 = predict_reference(kind, x, y, xq, M)
    (g2,) = torch.autograd.grad((p2**2).sum(), M)
    torch.testing.assert_close(p1, p2, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(g1, g2, rtol=1e-10, atol=1e-12)
    assert torch.autograd.gradcheck(lambda m: predict(kind, x, y, xq, m), (M,))


@pytest.mark.parametrize("kind", ["softmax", "linear"])
def test_a_slot_depends_only_on_its_own_weights_and_labels(kind):
    """Sharing a row's inputs across G configurations changes nothing: each slot equals a layout of one."""
    x, y, xq = _context(G=3)
    M = torch.randn(2, 3, 4, 4, dtype=torch.float64, requires_grad=True)
    shared = predict(kind, x, y, xq, M)
    (g_shared,) = torch.autograd.grad(shared.sum(), M)
    for r in range(2):
        for g in range(3):
            Mi = M[r:r + 1, g:g + 1].detach().requires_grad_()
            alone = predict(kind, x[r:r + 1], y[r:r + 1, g:g + 1], xq[r:r + 1], Mi)
            (g_alone,) = torch.autograd.grad(alone.sum(), Mi)
            torch.testing.assert_close(alone[0, 0], shared[r, g], rtol=1e-12, atol=1e-12)
            torch.testing.assert_close(g_alone[0, 0], g_shared[r, g], rtol=1e-10, atol=1e-12)


def test_softmax_weights_sum_to_one():
    x, _, xq = _context()
    a = attention_weights("softmax", x, xq, torch.randn(2, 3, 4, 4, dtype=torch.float64))
    assert a.shape == (2, 3, 5, 9)
    torch.testing.assert_close(a.sum(-1), torch.ones(2, 3, 5, dtype=torch.float64))


def test_full_qkv_with_slide_block_form_equals_M_parameterisation():
    """W_V reads the label, W_K and W_Q read x: the full unit reduces to the M form with M = M_K^T M_Q."""
    x, y, xq = _context(d=3)
    R, G, d = 2, 3, 3
    MK, MQ = torch.randn(R, G, d, d, dtype=torch.float64), torch.randn(R, G, d, d, dtype=torch.float64)
    WK = torch.zeros(R, G, d + 1, d + 1, dtype=torch.float64)
    WQ = torch.zeros_like(WK)
    WV = torch.zeros_like(WK)
    WK[..., :d, :d], WQ[..., :d, :d], WV[..., d, d] = MK, MQ, 1.0
    for kind in ("softmax", "linear"):
        full = predict_full(kind, x, y, xq, WK, WQ, WV)
        torch.testing.assert_close(full, predict(kind, x, y, xq, MK.transpose(-1, -2) @ MQ))


def test_unit_parameterisations_give_their_matrix():
    seed_idx = torch.tensor([0, 1, 0])
    unit = AttentionUnit("softmax", "KQ", 3, seed_idx, [5, 6], 0.5, "cpu")
    torch.testing.assert_close(unit.matrix(), unit.MK.transpose(1, 2) @ unit.MQ)
    torch.testing.assert_close(unit.matrix()[0], unit.matrix()[2])       # same seed, same init
    assert not torch.allclose(unit.matrix()[0], unit.matrix()[1])
    with pytest.raises(ValueError, match="param"):
        AttentionUnit("softmax", "QK", 3, seed_idx, [5, 6], 0.5, "cpu")
    assert math.isfinite(float(unit.matrix().sum().detach()))


def test_inner_dimension_gives_a_d_by_d_M_with_the_same_initial_scale():
    """M_K, M_Q in R^(r x d): M = M_K^T M_Q stays d x d, r = d is the default bit for bit, and the initial M's entries
    have the same scale for every r (entries of M_K, M_Q drawn with scale init_scale / (r d)^(1/4))."""
    d, seeds = 3, list(range(200))
    seed_idx = torch.arange(len(seeds))
    base = AttentionUnit("softmax", "KQ", d, seed_idx, seeds, 0.5, "cpu")
    same = AttentionUnit("softmax", "KQ", d, seed_idx, seeds, 0.5, "cpu", inner_dim=d)
    assert torch.equal(base.matrix(), same.matrix())
    wide = AttentionUnit("softmax", "KQ", d, seed_idx, seeds, 0.5, "cpu", inner_dim=4 * d)
    assert wide.MK.shape == (len(seeds), 4 * d, d) and wide.matrix().shape == (len(seeds), d, d)
    torch.testing.assert_close(wide.matrix(), wide.MK.transpose(1, 2) @ wide.MQ)
    ratio = float(wide.matrix().detach().std() / base.matrix().detach().std())
    assert 0.85 < ratio < 1.15, ratio
    with pytest.raises(ValueError, match="inner_dim"):
        AttentionUnit("softmax", "KQ", d, seed_idx, seeds, 0.5, "cpu", inner_dim=d - 1)
    with pytest.raises(ValueError, match="inner_dim"):
        AttentionUnit("softmax", "M", d, seed_idx, seeds, 0.5, "cpu", inner_dim=4 * d)
