"""Theory formulas (Theorem 3.4, covariance lemma), fits, the Monte Carlo loss scan and weight measurements."""

import math

import numpy as np
import pytest
import torch

from softmax_icl import theory as th
from softmax_icl.models import attention_weights
from softmax_icl.tasks import InputSpec, draw_raw, evaluate_class, nonisotropic_covariance
from softmax_icl.base import derive_seed

# -- Theorem 3.4 ------------------------------------------------------------------------------------


def test_theorem34_exponents_known_values():
    assert th.theorem34_exponents(5, "slides") == pytest.approx((0.2, 0.4))
    assert th.theorem34_exponents(5, "sketch") == pytest.approx((1 / 7, 2 / 7))
    assert th.theorem34_exponents(2, "sketch") == pytest.approx((0.25, 0.5))
    with pytest.raises(ValueError, match="version"):
        th.theorem34_exponents(5, "paper")
    with pytest.raises(ValueError):
        th.theorem34_exponents(0, "slides")


def test_theorem34_slope_range_per_variable():
    assert th.theorem34_slope_range(5, "snr", "sketch") == pytest.approx((1 / 7, 2 / 7))
    assert th.theorem34_slope_range(5, "n", "slides") == pytest.approx((0.2, 0.4))
    assert th.theorem34_slope_range(5, "L", "sketch") == pytest.approx((2 / 7, 4 / 7))       # w ~ (L^2)^alpha
    assert th.theorem34_slope_range(5, "sigma", "slides") == pytest.approx((-0.8, -0.4))   # sorted, negative
    with pytest.raises(ValueError):
        th.theorem34_slope_range(5, "d", "slides")


@pytest.mark.parametrize("d", [2, 5, 10])
def test_sketch_bounds_scale_with_the_sketch_exponents(d):
    """Carrying out the proof sketch (noise w^{d/2}/n, bias between 1/w^2 and 1/w) gives 1/(d+2) and 2/(d+2)."""
    s = np.geomspace(1e2, 1e12, 30)
    lo, hi = th.sketch_window_bounds(d, s, c_noise=0.7, c_bias=2.0)
    assert np.allclose(th.local_slopes(s, lo), 1 / (d + 2), atol=1e-9)
    assert np.allclose(th.local_slopes(s, hi), 2 / (d + 2), atol=1e-9)
    assert np.all(lo < hi)
    # the minimiser of the upper bound lies between the two bounds
    a = d / 2
    w_min = (2.0 * s / (a * 0.7)) ** (1 / (a + 1))
    assert np.all((lo <= w_min * (1 + 1e-12)) & (w_min <= hi * (1 + 1e-12)))


def test_which_version_and_snr():
    # d = 5: slides [1/5, 2/5], sketch [1/7, 2/7], sphere [1/6, 1/3]: all three overlap on [0.2, 2/7]
    assert set(th.which_version(0.25, 5)) == {"slides", "sketch", "sphere"}
    assert th.which_version(0.35, 5) == ["slides"]
    assert th.which_version(0.15, 5) == ["sketch"]
    assert th.which_version(0.5, 5) == []
    assert th.which_version(0.5, 5, "L") != []        # 0.5 is inside both L ranges
    assert th.snr(50, 2.0, 0.1) == pytest.approx(50 * 4 / 0.01)
    assert np.isinf(th.snr(50, 1.0, 0.0))


# -- fits -------------------------------------------------------------------------------------------


def test_fit_loglog_exact_power_law():
    x = np.geomspace(0.1, 100, 9)
    fit = th.fit_loglog(x, 3.0 * x**0.37)
    assert fit.slope == pytest.approx(0.37, abs=1e-12)
    assert math.exp(fit.intercept) == pytest.approx(3.0)
    assert fit.stderr == pytest.approx(0.0, abs=1e-10)
    assert fit.r2 == pytest.approx(1.0)
    assert fit.predict([10.0])[0] == pytest.approx(3.0 * 10**0.37)


def test_fit_loglog_confidence_interval_covers_truth_and_rejects_bad_input():
    rng = np.random.default_rng(0)
    covered = 0
    for _ in range(200):
        x = np.geomspace(1, 1000, 12)
        y = 2 * x**0.3 * np.exp(0.1 * rng.standard_normal(x.size))
        lo, hi = th.fit_loglog(x, y).ci()
        covered += lo <= 0.3 <= hi
    assert 0.88 <= covered / 200 <= 0.99           # ~95% nominal (normal approximation, 10 dof)
    with pytest.raises(ValueError):
        th.fit_loglog([1, 1, 1], [1, 2, 3])
    with pytest.raises(ValueError):
        th.fit_loglog([1, 2], [1, -2])
    assert math.isnan(th.fit_loglog([1, 2], [1, 2]).stderr)


def test_local_slopes_of_a_power_law():
    x = np.geomspace(1, 1e4, 50)
    assert np.allclose(th.local_slopes(x, 5 * x**-0.6), -0.6)


# -- covariance lemma and measurements -------------------------------------------------------------


def test_covariance_prediction_and_window_base():
    cov = np.array([0.5, 1.0, 2.0])
    assert np.allclose(th.covariance_prediction(cov), np.diag([2.0, 1.0, 0.5]))
    full = np.array([[2.0, 0.5], [0.5, 1.0]])
    assert np.allclose(th.covariance_prediction(full) @ full, np.eye(2))
    assert np.allclose(th.window_base(4, "isotropic"), np.eye(4))
    assert np.allclose(th.window_base(4, "nonisotropic") @ np.diag(nonisotropic_covariance(4).numpy()), np.eye(4))
    with pytest.raises(ValueError):
        th.window_base(4, "sphere")


def test_normalized_distance_known_values():
    I2 = np.eye(2)
    assert th.normalized_distance(3 * I2, I2) == pytest.approx(0.0, abs=1e-12)       # scale does not matter
    assert th.normalized_distance(-I2, I2) == pytest.approx(2.0)
    assert th.normalized_distance(np.diag([1.0, 0.0]), I2) == pytest.approx(math.sqrt(2 - math.sqrt(2)))
    stack = np.stack([I2, np.diag([1.0, 0.0])])
    assert th.normalized_distance(stack, I2).shape == (2,)


def test_best_multiple_recovers_scale_and_residual():
    base = np.diag([1.0, 2.0, 3.0])
    E = np.zeros((3, 3))
    E[0, 1] = 0.5                                           # orthogonal to base in the Frobenius inner product
    M = 4.0 * base + E
    c, resid = th.best_multiple(M, base)
    assert c == pytest.approx(4.0)
    assert resid == pytest.approx(0.5 / np.linalg.norm(M))


@pytest.mark.parametrize("p", [0.0, 0.5, 1.0, 1.3])
def test_covariance_exponent_recovers_p(p):
    lam = np.array([0.3, 0.8, 1.5, 2.4])
    assert th.covariance_exponent(2.5 * np.diag(lam**-p), lam) == pytest.approx(p, abs=1e-12)
    # also in a rotated eigenbasis
    q, _ = np.linalg.qr(np.random.default_rng(1).standard_normal((4, 4)))
    cov = q @ np.diag(lam) @ q.T
    M = q @ np.diag(lam**-p) @ q.T
    assert th.covariance_exponent(M, cov) == pytest.approx(p, abs=1e-10)
    assert np.isnan(th.covariance_exponent(-np.eye(4), lam))


def test_block_form_of_the_ideal_weights_and_of_a_perturbation():
    d, w = 3, 5.0
    WK = np.zeros((d + 1, d + 1))
    WK[:d, :d] = np.sqrt(w) * np.eye(d)
    WQ = WK.copy()
    WV = np.zeros((d + 1, d + 1))
    WV[d, d] = 1.0
    b = th.block_form(WK, WQ, WV)
    assert b.w == pytest.approx(w)
    for k in ("xblock_identity_distance", "label_row_ratio", "label_col_ratio", "offblock_ratio", "value_x_ratio"):
        assert getattr(b, k) == pytest.approx(0.0, abs=1e-12), k
    assert b.value_label == pytest.approx(1.0)
    # a label row r in A = W_K^T W_Q: put it in W_K's label column against W_Q's x-block
    r = np.array([0.3, 0.0, -0.4])
    WK2 = WK.copy()
    WK2[:d, d] = r / np.sqrt(w)
    b2 = th.block_form(WK2, WQ, WV)
    assert b2.A[d, :d] == pytest.approx(r)
    assert b2.label_row_ratio == pytest.approx(0.5 / (w * math.sqrt(d)))
    assert b2.label_col_ratio == pytest.approx(0.0, abs=1e-12)


# -- Monte Carlo loss terms --------------------------------------------------------------------------


def _direct_terms(spec, rows, Ms, n_tasks, seed, n_draw):
    """Bias and noise terms written plainly with the attention weights of models.py (single chunk)."""
    g = torch.Generator().manual_seed(derive_seed(seed, 7919))
    raw = draw_raw(spec, n_tasks, n_draw, g, "cpu")
    x = raw["x"]
    xt = raw.get("x_task", x)
    bias = np.zeros((len(rows), len(Ms)))
    noise = np.zeros_like(bias)
    for i, r in enumerate(rows):
        one = {k: v.unsqueeze(0) for k, v in raw.items()}
        f = evaluate_class(r["function_class"], xt.unsqueeze(0), one, torch.tensor([float(r["L"])]))[0]
        n = r["n"]
        for k, M in enumerate(Ms):
            Mt = torch.as_tensor(M, dtype=torch.float32)[None, None]
            a = attention_weights("softmax", x[None, :, :n], x[None, :, n_draw], Mt)[0, 0]
            pred = (a * f[:, :n]).sum(-1)
            bias[i, k] = ((pred - f[:, n_draw]).double() ** 2).mean().item()
            noise[i, k] = (a.double() ** 2).sum(-1).mean().item()
    return bias, noise


@pytest.mark.parametrize("input_dist", ["isotropic", "nonisotropic", "nonisotropic_whitened"])
def test_loss_terms_equal_a_direct_computation(input_dist):
    spec = InputSpec(d=3, input_dist=input_dist)
    rows = [dict(function_class="relu", L=1.5, n=12), dict(function_class="cosine", L=2.0, n=7)]
    Ms = np.stack([w * np.eye(3) for w in (0.5, 4.0)] + [np.diag([1.0, 3.0, 0.2])])
    lt = th.loss_terms(spec, rows, Ms, n_tasks=300, seed=5, chunk=300)
    bias, noise = _direct_terms(spec, rows, Ms, 300, 5, 12)
    np.testing.assert_allclose(lt.bias, bias, rtol=2e-5)
    np.testing.assert_allclose(lt.noise, noise, rtol=2e-5)
    assert lt.bias.shape == (2, 3) and lt.bias_se.shape == (2, 3)
    # paired evaluation is the diagonal of the grid, on the same draws
    pt = th.loss_terms(spec, rows, Ms[:2], n_tasks=300, seed=5, chunk=300, paired=True)
    np.testing.assert_allclose(pt.bias, np.diag(lt.bias[:, :2]), rtol=1e-5)
    np.testing.assert_allclose(pt.noise, np.diag(lt.noise[:, :2]), rtol=1e-5)


def test_loss_terms_draws_do_not_depend_on_the_matrices_and_chunks_agree():
    spec = InputSpec(d=3)
    rows = [dict(function_class="relu", L=1.0, n=10)]
    a = th.loss_terms(spec, rows, np.stack([np.eye(3), 2 * np.eye(3)]), n_tasks=256, chunk=64)
    b = th.loss_terms(spec, rows, 2 * np.eye(3)[None], n_tasks=256, chunk=64)
    np.testing.assert_allclose(a.bias[:, 1], b.bias[:, 0], rtol=1e-5)
    with pytest.raises(ValueError, match="paired"):
        th.loss_terms(spec, rows * 2, np.eye(3)[None], paired=True)
    with pytest.raises(ValueError, match="n_draw"):
        th.loss_terms(spec, rows, np.eye(3)[None], n_draw=5)


def test_relu_bias_scales_with_L_squared():
    """f scales linearly with L for ReLU tasks, so the bias term is L^2 times that at L = 1 (same draws)."""
    spec = InputSpec(d=4)
    rows = [dict(function_class="relu", L=1.0, n=20), dict(function_class="relu", L=3.0, n=20)]
    lt = th.loss_terms(spec, rows, np.stack([w * np.eye(4) for w in (0.3, 3.0, 30.0)]), n_tasks=256, chunk=128)
    np.testing.assert_allclose(lt.bias[1], 9.0 * lt.bias[0], rtol=1e-5)
    np.testing.assert_allclose(lt.noise[1], lt.noise[0], rtol=1e-6)


def test_whitened_tasks_with_sigma_inverse_equal_isotropic_tasks_with_identity():
    """x = Sigma^{1/2} u and f evaluated at u: with M = w Sigma^{-1} the scores are w u_i^T u_q, so every term
    equals the isotropic one with M = w I on the same draws (the covariance lemma's symmetry, exactly)."""
    d = 4
    sinv = th.window_base(d, "nonisotropic")
    rows = [dict(function_class="relu", L=1.0, n=15), dict(function_class="cosine", L=2.0, n=15)]
    ws = np.array([0.5, 3.0, 12.0])
    iso = th.loss_terms(InputSpec(d=d), rows, ws[:, None, None] * np.eye(d), n_tasks=256, chunk=256)
    wh = th.loss_terms(InputSpec(d=d, input_dist="nonisotropic_whitened"), rows, ws[:, None, None] * sinv,
                       n_tasks=256, chunk=256)
    np.testing.assert_allclose(wh.bias, iso.bias, rtol=1e-4)
    np.testing.assert_allclose(wh.noise, iso.noise, rtol=1e-4)


def test_noise_term_matches_explicit_label_noise():
    """bias + sigma^2 * noise agrees with averaging over explicit Gaussian label noise (Rao-Blackwell)."""
    spec = InputSpec(d=3)
    rows = [dict(function_class="relu", L=1.0, n=10)]
    M = 2.0 * np.eye(3)[None]
    sigma = 0.7
    lt = th.loss_terms(spec, rows, M, n_tasks=2000, seed=9, chunk=2000)
    g = torch.Generator().manual_seed(derive_seed(9, 7919))
    raw = draw_raw(spec, 2000, 10, g, "cpu")
    one = {k: v.unsqueeze(0) for k, v in raw.items()}
    f = evaluate_class("relu", raw["x"].unsqueeze(0), one, torch.tensor([1.0]))[0]
    a = attention_weights("softmax", raw["x"][None, :, :10], raw["x"][None, :, 10],
                          torch.as_tensor(M, dtype=torch.float32)[None])[0, 0]
    gn = torch.Generator().manual_seed(1)
    errs = []
    for _ in range(200):
        eps = torch.randn(2000, 10, generator=gn)
        errs.append((((a * (f[:, :10] + sigma * eps)).sum(-1) - f[:, 10]) ** 2).mean().item())
    mc = np.mean(errs)
    assert lt.loss(sigma)[0, 0] == pytest.approx(mc, rel=0.01)


# -- minimisation helpers ----------------------------------------------------------------------------


def test_refine_minimum_recovers_an_off_grid_minimum():
    w = np.geomspace(0.1, 100, 31)
    loss = (np.log(w) - math.log(3.3)) ** 2 + 1.0
    wb, lb = th.refine_minimum(w, loss)
    assert wb == pytest.approx(3.3, rel=1e-9)
    assert lb == pytest.approx(1.0)
    p = np.linspace(0, 1.5, 13)
    pb, _ = th.refine_minimum(p, (p - 0.81) ** 2, log=False)
    assert pb == pytest.approx(0.81)
    # minimum at the end of the grid: the grid end is returned
    wb, _ = th.refine_minimum(w, 1 / w)
    assert wb == pytest.approx(100.0)
    # stacked rows
    wb, _ = th.refine_minimum(w, np.stack([loss, (np.log(w) - math.log(20.0)) ** 2]))
    assert wb == pytest.approx([3.3, 20.0])


def test_near_optimal_interval_and_saturation():
    w = np.array([1.0, 2.0, 4.0, 8.0, 16.0])
    loss = np.array([3.0, 1.05, 1.0, 1.08, 2.0])
    lo, hi = th.near_optimal_interval(w, loss, 0.06)
    assert (lo, hi) == (2.0, 4.0)
    lo, hi = th.near_optimal_interval(w, loss, 0.1)
    assert (lo, hi) == (2.0, 8.0)
    assert th.saturation_w(w, loss) == pytest.approx(4.0, rel=0.2)


@pytest.mark.parametrize("d", [3, 5])
def test_optimal_w_curve_of_the_sketch_model(d):
    """With bias_1 = 1/w and noise = w^{d/2} / n the optimum is w* = (2 s / d)^{2/(d+2)}."""
    n = 50
    w = np.geomspace(0.01, 1e4, 400)
    s = np.geomspace(10, 1e8, 9)
    w_star = th.optimal_w_curve(w, 1 / w, w ** (d / 2) / n, s, n)
    np.testing.assert_allclose(w_star, (2 * s / d) ** (2 / (d + 2)), rtol=2e-3)


def test_half_width_of_the_softmax_window():
    assert th.half_width_deg(math.log(2)) == pytest.approx(90.0)
    assert th.half_width_deg(2 * math.log(2)) == pytest.approx(60.0)
    assert th.half_width_deg(1e-3) == pytest.approx(180.0)


def test_three_versions_of_theorem_34_and_the_sketch_with_any_noise_exponent():
    for d in (3, 5, 8):
        assert th.theorem34_exponents(d, "slides") == pytest.approx((1 / d, 2 / d))
        assert th.theorem34_exponents(d, "sketch") == pytest.approx(th.sketch_exponents(d / 2))
        assert th.theorem34_exponents(d, "sphere") == pytest.approx(th.sketch_exponents((d - 1) / 2))
        assert th.theorem34_exponents(d, "sphere") == pytest.approx((1 / (d + 1), 2 / (d + 1)))
        # the explicit-constant bounds scale with the same exponents
        s = np.array([1e6, 1e8])
        lo, hi = th.sketch_window_bounds(d, s, noise_exponent=(d - 1) / 2)
        assert np.diff(np.log(lo)) / np.diff(np.log(s)) == pytest.approx(1 / (d + 1))
        assert np.diff(np.log(hi)) / np.diff(np.log(s)) == pytest.approx(2 / (d + 1))


def test_sphere_noise_limit_matches_the_closed_form_for_d3_and_grows_like_w_to_the_d_minus_1_over_2():
    w = np.array([0.5, 2.0, 10.0, 50.0])
    exact = (np.sinh(2 * w) / (2 * w)) / (np.sinh(w) / w) ** 2          # d = 3: E[e^{wc}] = sinh(w) / w
    assert th.sphere_noise_limit(3, w) == pytest.approx(exact, rel=1e-4)
    ww = np.array([2000.0, 4000.0])
    for d in (3, 5, 8):
        k = np.diff(np.log(th.sphere_noise_limit(d, ww))) / np.diff(np.log(ww))
        assert k[0] == pytest.approx((d - 1) / 2, abs=0.02)


def test_relu_window_scan_noise_term_matches_its_large_n_limit_and_the_general_scan():
    w = np.array([0.5, 2.0, 8.0])
    sc = th.relu_window_scan(5, [50, 3000], w, n_tasks=64, seed=3)
    # many points in the window: n E[sum a^2] is the n -> inf limit
    assert 3000 * sc.noise[1] == pytest.approx(th.sphere_noise_limit(5, w), rel=0.03)
    # float64 gives the same numbers
    sc64 = th.relu_window_scan(5, [50, 3000], w, n_tasks=64, seed=3, dtype=torch.float64)
    assert sc.bias == pytest.approx(sc64.bias, rel=1e-4) and sc.noise == pytest.approx(sc64.noise, rel=1e-4)
    # the general (independent) Monte Carlo of loss_terms agrees within a few standard errors at n = 50
    lt = th.loss_terms(InputSpec(d=5), [dict(function_class="relu", L=1.0, n=50)], w[:, None, None] * np.eye(5),
                       n_tasks=4096, seed=5)
    big = th.relu_window_scan(5, [50], w, n_tasks=4096, seed=7)
    se_b = np.sqrt(lt.bias_se[0] ** 2 + big.bias_se[0] ** 2)
    assert np.all(np.abs(lt.bias[0] - big.bias[0]) < 4 * se_b)
    se_v = np.sqrt(lt.noise_se[0] ** 2 + big.noise_se[0] ** 2)
    assert np.all(np.abs(lt.noise[0] - big.noise[0]) < 4 * se_v)
