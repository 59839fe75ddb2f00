"""Window width and ICL-error metrics on cases with known answers."""

import numpy as np
import pytest
import torch

from softmax_icl import metrics
from softmax_icl.baselines import nadaraya_watson_oracle, scan_bandwidth
from softmax_icl.metrics import icl_error, icl_error_grid, icl_error_of_matrices, spectral_norm, window_halfwidth
from softmax_icl.tasks import InputSpec


@pytest.mark.parametrize("d", [2, 5])
@pytest.mark.parametrize("w", [1.0, 4.0, 50.0, 400.0])
def test_softmax_halfwidth_of_M_wI_is_arccos_1_minus_ln2_over_w(d, w):
    got = window_halfwidth("softmax", w * np.eye(d))
    assert got == pytest.approx(np.arccos(1 - np.log(2) / w), rel=2e-3)


def test_wide_window_never_halves_and_linear_halfwidth_is_60_degrees():
    assert window_halfwidth("softmax", 0.2 * np.eye(3)) == pytest.approx(np.pi)
    for w in (0.1, 3.0, 100.0):
        assert np.degrees(window_halfwidth("linear", w * np.eye(2))) == pytest.approx(60.0, abs=0.3)


def test_halfwidth_is_vectorised_over_stacks():
    M = np.stack([w * np.eye(2) for w in (2.0, 20.0, 200.0)])
    hw = window_halfwidth("softmax", M)
    assert hw.shape == (3,) and np.all(np.diff(hw) < 0)


def test_icl_error_of_the_true_function_is_zero_and_of_zero_predictor_is_the_label_variance():
    spec = InputSpec(d=3)
    rows = [dict(function_class="affine", L=2.0, sigma=0.5, n=8)]
    e0, _ = icl_error(lambda b: torch.zeros_like(b.f_q), rows, spec, n_tasks=20000, eval_seed=1)
    # E[f(x)^2] for f = l w^T x + b, l, b ~ U[-L, L], x uniform on S^2: L^2/3 * (1/3) + L^2/3
    assert e0[0] == pytest.approx(4 / 9 + 4 / 3, rel=0.03)
    e1, se = icl_error(lambda b: b.f_q, rows, spec, n_tasks=1000, eval_seed=1)
    assert e1[0] == 0 and se[0] == 0


def test_rows_share_the_evaluation_set():
    spec = InputSpec(d=2)
    M = np.stack([5 * np.eye(2)] * 2)
    rows = [dict(function_class="cosine", L=2.0, sigma=0.1, n=16)] * 2
    e, _ = icl_error_of_matrices("softmax", M, rows, spec, n_tasks=3000)
    assert e[0] == e[1]


def test_nadaraya_watson_oracle_picks_a_larger_bandwidth_scale_for_larger_L():
    spec = InputSpec(d=2)
    tests = [dict(function_class="cosine", L=L, sigma=0.1) for L in (0.5, 8.0)]
    w_best, err, _ = nadaraya_watson_oracle(tests, [32], spec, n_tune=2000, n_eval=2000)
    assert w_best.shape == err.shape == (2, 1)
    assert w_best[1, 0] > 4 * w_best[0, 0]
    scan = scan_bandwidth(tests, [32], spec, w_grid=[w_best[0, 0], w_best[1, 0]], n_tasks=2000, seed=3)[..., 0]
    assert scan[0, 0] < scan[1, 0] and scan[1, 1] < scan[0, 1]      # each setting prefers its own bandwidth
    # the oracle's reported error is the evaluation-set error of the bandwidth it picked
    again, _ = icl_error_of_matrices("softmax", w_best[:, 0, None, None] * np.eye(2), [dict(t, n=32) for t in tests],
                                     spec, n_tasks=2000, eval_seed=3)
    np.testing.assert_allclose(err[:, 0], again, rtol=1e-6)


def test_oracle_error_is_the_full_grid_evaluation_at_the_tuned_bandwidth_exactly():
    """The oracle evaluates only the tuned bandwidths: the same numbers as evaluating the whole grid and picking."""
    spec = InputSpec(d=3)
    tests = [dict(function_class=c, L=L, sigma=0.2) for c in ("cosine", "relu") for L in (0.5, 4.0)]
    grid, ns = np.geomspace(0.5, 200, 9), [8, 32]
    w_best, err, se = nadaraya_watson_oracle(tests, ns, spec, w_grid=grid, n_tune=512, n_eval=600)
    full, full_se = icl_error_grid("softmax", grid[:, None, None] * np.eye(3), tests, ns, spec, n_tasks=600)
    k = np.searchsorted(grid, w_best)
    assert len(np.unique(k)) < len(grid)                      # a strict subset of the grid was evaluated
    np.testing.assert_array_equal(err, np.take_along_axis(full, k[None], 0)[0])
    np.testing.assert_array_equal(se, np.take_along_axis(full_se, k[None], 0)[0])


def test_spectral_norm():
    assert spectral_norm(np.diag([3.0, -5.0, 1.0])) == pytest.approx(5.0)


@pytest.mark.parametrize("kind,dtype", [("softmax", torch.float64), ("softmax", torch.float32),
                                        ("linear", torch.float64)])
def test_prefix_predictions_are_each_prefixs_own_readout(kind, dtype):
    """The segmented one-pass readout equals the readout of every prefix computed on its own (softmax over the
    prefix, or s.y / n), also where later points score far above the first ones (w = 2000: the first segment's
    weights are exp(-thousands) relative to the whole context's largest). float64 runs the PyTorch weights, float32
    the engine's where it is built (to float32 rounding)."""
    g = torch.Generator().manual_seed(1)
    U, R, b, n = 4, 3, 5, 70
    s = torch.randn(U, b, n, generator=g, dtype=torch.float64) * torch.tensor([0.1, 1.0, 30.0, 2000.0],
                                                                              dtype=torch.float64)[:, None, None]
    s[..., 40:] += 3000.0 * (s[3:4, :, 40:] > 0)
    y = torch.randn(R, b, n, generator=g, dtype=torch.float64)
    ns = [1, 7, 40, 41, 70]
    s, y = s.to(dtype).double(), y.to(dtype).double()          # the reference reads the same rounded inputs
    got = metrics.prefix_predictions(kind, s.to(dtype), y.to(dtype), ns).double()
    tol = dict(rtol=1e-10, atol=1e-12) if dtype == torch.float64 else dict(rtol=1e-4, atol=1e-5)
    for j, m in enumerate(ns):
        a = torch.softmax(s[..., :m], -1) if kind == "softmax" else s[..., :m] / m
        np.testing.assert_allclose(got[..., j], torch.einsum("ubm,rbm->urb", a, y[..., :m]), **tol)
