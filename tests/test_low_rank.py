"""Low-rank chapter: rho_1, rho_2 and the alignment with B B^T on matrices with known answers; the even links."""

import math

import numpy as np
import pytest
import torch

from softmax_icl.figures.low_rank.analysis import distance_to_cBB, subspace_alignment
from softmax_icl.figures.low_rank.sweeps import sweep_for
from softmax_icl.metrics import icl_error_of_matrices, rho1, rho2
from softmax_icl.profiles import ParameterError
from softmax_icl.figures import FIGURES
from softmax_icl.tasks import InputSpec, draw_raw, evaluate_class, low_rank_basis

D, K = 7, 2


def _bases(seed=0):
    B = low_rank_basis(D, K, seed).numpy()
    q, _ = np.linalg.qr(np.concatenate([B, np.random.default_rng(seed).standard_normal((D, D))], axis=1))
    return B, q[:, K:D]                                   # B and an orthonormal basis of its complement


@pytest.mark.parametrize("c", [0.3, 5.0, -2.0])
def test_rho_vanishes_exactly_on_multiples_of_BBT(c):
    B, _ = _bases()
    M = c * B @ B.T
    assert rho1(M, B) == pytest.approx(0.0, abs=1e-12)
    assert rho2(M, B) == pytest.approx(0.0, abs=1e-12)
    assert distance_to_cBB(M, B) == pytest.approx(0.0, abs=1e-6)
    assert subspace_alignment(M, B) == pytest.approx(math.copysign(1.0, c))


@pytest.mark.parametrize("eps", [0.01, 0.2, 1.0, 3.0])
def test_rho_of_a_leaky_projection(eps):
    """M = B B^T + eps B_perp B_perp^T: rho_1 = eps, rho_2 = eps sqrt(d-k) / sqrt(k + eps^2 (d-k))."""
    B, Bp = _bases(1)
    M = B @ B.T + eps * Bp @ Bp.T
    assert rho1(M, B) == pytest.approx(eps, rel=1e-10)
    assert rho2(M, B) == pytest.approx(eps * math.sqrt(D - K) / math.sqrt(K + eps**2 * (D - K)), rel=1e-10)
    # the identity (eps = 1) is the isotropic Nadaraya-Watson window: no subspace learned at all
    if eps == 1.0:
        np.testing.assert_allclose(M, np.eye(D), atol=1e-12)
        assert distance_to_cBB(M, B) == pytest.approx(math.sqrt(1 - K / D), rel=1e-10)


def test_rho2_sees_cross_terms_that_rho1_ignores():
    """A rank-one coupling u v^T with u in col(B)^perp, v in col(B): B_perp^T M B_perp = 0 but M != P M P."""
    B, Bp = _bases(2)
    for t in (0.1, 1.0, 4.0):
        M = B @ B.T + t * np.outer(Bp[:, 0], B[:, 1])
        assert rho1(M, B) == pytest.approx(0.0, abs=1e-12)
        assert rho2(M, B) == pytest.approx(t / math.sqrt(K + t**2), rel=1e-10)


def test_rho_is_invariant_to_scale_and_to_the_basis_of_colB_and_batches():
    B, Bp = _bases(3)
    rng = np.random.default_rng(0)
    M = rng.standard_normal((5, 3, D, D))
    Q, _ = np.linalg.qr(rng.standard_normal((K, K)))
    for f in (rho1, rho2, distance_to_cBB):
        v = f(M, B)
        assert v.shape == (5, 3)
        np.testing.assert_allclose(f(M, B @ Q), v, rtol=1e-10)
        np.testing.assert_allclose(f(-3.7 * M, B), v, rtol=1e-10)
        np.testing.assert_allclose(v[2, 1], f(M[2, 1], B), rtol=1e-12)


def test_distance_to_cBB_is_the_minimum_over_c():
    B, _ = _bases(4)
    M = np.random.default_rng(1).standard_normal((D, D)) + 3 * B @ B.T
    cs = np.linspace(-10, 10, 20001)
    brute = min(np.linalg.norm(M - c * B @ B.T) for c in cs) / np.linalg.norm(M)
    assert distance_to_cBB(M, B) == pytest.approx(brute, abs=1e-6)


def test_random_matrices_have_alignment_of_order_one_over_d():
    """The threshold of the 'linear-M-unaligned' claim: cos(M, B B^T) of a Gaussian M has std about 1/d."""
    d, k = 10, 2
    B = low_rank_basis(d, k, 0).numpy()
    M = np.random.default_rng(2).standard_normal((4000, d, d))
    assert np.std(subspace_alignment(M, B)) == pytest.approx(1 / d, rel=0.1)


@pytest.mark.parametrize("cls,parity", [("lowrank_linear", -1), ("lowrank_quadratic", 1), ("lowrank_cosine", 1)])
def test_link_parity_even_links_give_linear_attention_no_first_order_signal(cls, parity):
    """f(-x) = parity f(x); for even links E[f(x) x] = 0, so linear attention's expected update vanishes."""
    spec = InputSpec(d=D, k=K, task_seed=5)
    raw = draw_raw(spec, 64, 9, torch.Generator().manual_seed(0), "cpu")
    raw = {k: v.unsqueeze(0) for k, v in raw.items()}
    L = torch.tensor([1.0])
    f = evaluate_class(cls, raw["x"], raw, L, spec.basis("cpu"))
    f_neg = evaluate_class(cls, -raw["x"], raw, L, spec.basis("cpu"))
    torch.testing.assert_close(f_neg, parity * f)


def test_theorem_4_4_components_outside_colB_hurt_softmax_on_the_linear_class():
    """sigma = 0, F_B^lin: adding c B_perp B_perp^T to M = c B B^T raises the ICL error (on one fixed set)."""
    d, k, n = 6, 2, 10
    spec = InputSpec(d=d, k=k, task_seed=7)
    B = low_rank_basis(d, k, 7).numpy()
    P = B @ B.T
    cs = (8.0, 20.0)
    Ms = np.stack([c * P for c in cs] + [c * P + 0.5 * c * (np.eye(d) - P) for c in cs])
    rows = [dict(function_class="lowrank_linear", L=1.0, sigma=0.0, n=n)] * len(Ms)
    err, _ = icl_error_of_matrices("softmax", Ms, rows, spec, n_tasks=3000, eval_seed=0)
    assert np.all(err[:2] < 0.9 * err[2:])           # same tasks for every row: no sampling noise between them


def test_sweeps_use_the_basis_seed_and_validation_names_the_parameter():
    cfg = FIGURES.resolve("low_rank", "smoke")
    for m in ("softmax", "linear"):
        sw = sweep_for(cfg, m)
        assert sw.task_seed == cfg["basis_seed"] and sw.k == cfg["k"] and sw.model == m
        assert {c["function_class"] for c in sw.configs()} == set(cfg["classes"])
    with pytest.raises(ParameterError, match="'k'"):
        FIGURES.resolve("low_rank", "smoke", {"k": 10})
    with pytest.raises(ParameterError, match="'classes'"):
        FIGURES.resolve("low_rank", "smoke", {"classes": ["relu"]})


def test_softmax_prediction_on_the_affine_link_is_the_linear_class_plus_two():
    """Softmax weights sum to one: the affine link's prediction is the linear class's + 2, so the errors (and every
    gradient) are the same -- the affine link is not independent evidence for Theorem 4.4."""
    spec = InputSpec(d=D, k=K, task_seed=0)
    M = np.random.default_rng(3).standard_normal((1, D, D))
    rows = [dict(function_class=c, L=1.0, sigma=0.2, n=12) for c in ("lowrank_linear", "lowrank_affine")]
    err, _ = icl_error_of_matrices("softmax", np.repeat(M, 2, 0), rows, spec, n_tasks=2000, eval_seed=4)
    assert err[0] == pytest.approx(err[1], rel=1e-5)
    lin, _ = icl_error_of_matrices("linear", np.repeat(M, 2, 0), rows, spec, n_tasks=2000, eval_seed=4)
    assert lin[1] > lin[0] + 3.0                                   # linear attention cannot output the +2


def test_theory_and_floor_sweeps():
    from softmax_icl.figures.low_rank.sweeps import FLOOR_SCHEDULES, floor_sweep, theory_sweep
    cfg = FIGURES.resolve("low_rank", "smoke")
    th = theory_sweep(cfg)
    assert {(c["n"], c["sigma"]) for c in th.configs()} == {(n, s) for n in (cfg["theory_n"], cfg["n"])
                                                             for s in (0.0, cfg["theory_sigma"])}
    assert th.classes == ("lowrank_linear",)
    fl = [floor_sweep(cfg, T, s) for s in FLOOR_SCHEDULES for T in cfg["floor_steps"]]
    assert [f.steps for f in fl] == list(cfg["floor_steps"]) * 2
    assert {f.lr_schedule for f in fl} == set(FLOOR_SCHEDULES)
    with pytest.raises(ParameterError, match="floor_steps"):
        FIGURES.resolve("low_rank", "smoke", {"floor_steps": [300]})


# -- the isotropic-window rival (rivals.py) and the per-seed statistics (claims.py) ---------------------------------

def test_parabolic_refinement_finds_the_minimum_of_a_parabola_in_log_scale():
    from softmax_icl.figures.low_rank.rivals import refine_log_argmin
    grid = np.geomspace(0.3, 300.0, 24)
    for w_star in (0.7, 5.3, 41.0):
        err = 0.2 + (np.log(grid) - np.log(w_star)) ** 2                     # exact parabola in log w
        assert refine_log_argmin(grid, err) == pytest.approx(w_star, rel=1e-9)
    # batched over leading axes; a minimum at an end of the grid stays there
    err = np.stack([(np.log(grid) - np.log(5.3)) ** 2, np.log(grid), -np.log(grid)])
    np.testing.assert_allclose(refine_log_argmin(grid, err), [5.3, grid[0], grid[-1]], rtol=1e-9)


def test_isotropic_window_tuned_per_seed_on_sets_apart_from_the_evaluation_set():
    """Each seed's tuning set is its own (different errors per seed), none is the evaluation set, and the window
    tuned on it is within 2 % of the best window of the grid measured on the evaluation set itself."""
    from softmax_icl.figures.low_rank.rivals import SCALE_GRID, tuned_scales, tuning_errors
    d, k, n = 6, 2, 12
    spec = InputSpec(d=d, k=k, task_seed=3)
    rows = [dict(function_class=c, L=1.0, sigma=0.0, n=n) for c in ("lowrank_linear", "lowrank_cosine")]
    w, err = tuned_scales(np.eye(d), rows, spec, eval_seed=5, seeds=3, n_tasks=1500)
    assert w.shape == (2, 3) and err.shape == (2, 3, len(SCALE_GRID))
    assert not np.allclose(err[:, 0], err[:, 1]) and not np.allclose(err[:, 1], err[:, 2])
    grid = np.asarray(SCALE_GRID)
    on_eval, _ = icl_error_of_matrices("softmax", np.tile(grid[:, None, None] * np.eye(d), (2, 1, 1)),
                                       [r for r in rows for _ in grid], spec, n_tasks=1500, eval_seed=5)
    on_eval = on_eval.reshape(2, len(grid))
    assert not any(np.allclose(on_eval[i], err[i, s]) for i in range(2) for s in range(3))
    tuned, _ = icl_error_of_matrices("softmax", w.reshape(-1)[:, None, None] * np.eye(d),
                                     [r for r in rows for _ in range(3)], spec, n_tasks=4000, eval_seed=5)
    best, _ = icl_error_of_matrices("softmax", grid[on_eval.argmin(1)][:, None, None] * np.eye(d), rows, spec,
                                    n_tasks=4000, eval_seed=5)
    assert np.all(tuned.reshape(2, 3) <= 1.02 * best[:, None])
    # the tuning errors of one seed are those of one set evaluated alone (batching over seeds changes nothing)
    from softmax_icl.base import derive_seed
    from softmax_icl.figures.low_rank.rivals import TUNE_KEY
    Ms = np.stack([2.0 * np.eye(d), 9.0 * np.eye(d)])
    both = tuning_errors("softmax", Ms, rows, spec, [derive_seed(5, TUNE_KEY, s) for s in range(2)], 700)
    alone = tuning_errors("softmax", Ms, rows, spec, [derive_seed(5, TUNE_KEY, 1)], 700)
    np.testing.assert_allclose(both[1], alone[0], rtol=1e-6)


def test_the_subspace_window_beats_the_isotropic_window_by_the_designs_margin_on_the_linear_class():
    """What the rival must lose to: on F_B^lin (sigma = 0) the best c B B^T has an ICL error well below 0.9 times the
    best w I (both tuned on a tuning set), so the check can pass for a unit that learned the subspace."""
    from softmax_icl.figures.low_rank.rivals import tuned_scales
    d, k, n = 10, 2, 20
    spec = InputSpec(d=d, k=k, task_seed=2)
    B = low_rank_basis(d, k, 2).numpy()
    rows = [dict(function_class="lowrank_linear", L=1.0, sigma=0.0, n=n)]
    w, _ = tuned_scales(np.eye(d), rows, spec, eval_seed=1, seeds=1, n_tasks=2000)
    c, _ = tuned_scales(B @ B.T, rows, spec, eval_seed=1, seeds=1, n_tasks=2000)
    err, _ = icl_error_of_matrices("softmax", np.stack([w[0, 0] * np.eye(d), c[0, 0] * B @ B.T]), rows * 2, spec,
                                   n_tasks=4000, eval_seed=3)
    assert np.log(err[1] / err[0]) < np.log(0.9) - np.log(1 / 0.9)


def test_a_cell_with_its_trajectory_is_the_final_value_per_seed_and_the_seed_mean_per_step():
    from softmax_icl.figures.low_rank.claims import along, with_curve
    x = np.arange(12.0).reshape(4, 3)                                       # (T, S)
    final, steps, means = along(x, [0, 10, 20, 30])
    np.testing.assert_array_equal(final, x[-1])
    np.testing.assert_array_equal(means, x.mean(-1))
    final, steps, means = with_curve(np.ones(3), x, [0, 10, 20, 30])
    np.testing.assert_array_equal(final, np.ones(3))
    np.testing.assert_array_equal(means, x.mean(-1))


# -- the window in the range of the projection (window.py, the window sweep) ----------------------------------------

def test_subspace_scale_is_c_on_a_constructed_M_whatever_lies_outside_colB():
    """c = tr(B^T M B) / k is exactly c for M = c BB^T plus anything with B^T N B = 0 (the complement block and the
    cross blocks), signed, batched, and the same for any orthonormal basis of col(B)."""
    from softmax_icl.figures.low_rank.window import subspace_scale
    B, Bp = _bases(5)
    rng = np.random.default_rng(4)
    cs = np.array([[0.5, 7.0, -3.0], [12.0, -0.1, 2.0]])                                   # (2, 3)
    N = np.einsum("da,...ab,eb->...de", Bp, rng.standard_normal((2, 3, D - K, D - K)), Bp)  # in B_perp
    X = np.einsum("da,...ab,eb->...de", Bp, rng.standard_normal((2, 3, D - K, K)), B)      # cross block
    M = cs[..., None, None] * (B @ B.T) + 4.0 * N + X + np.swapaxes(X, -1, -2)
    np.testing.assert_allclose(subspace_scale(M, B), cs, rtol=1e-12)
    Q, _ = np.linalg.qr(rng.standard_normal((K, K)))
    np.testing.assert_allclose(subspace_scale(M, B @ Q), cs, rtol=1e-12)
    np.testing.assert_allclose(subspace_scale(-M[1, 2], B), -cs[1, 2], rtol=1e-12)
    # an uneven block: the mean of its eigenvalues
    A = np.diag([2.0, 6.0])
    assert subspace_scale(B @ A @ B.T, B) == pytest.approx(4.0, rel=1e-12)


def test_on_the_even_cosine_link_M_and_minus_M_attend_equally_well():
    """The reason the window statistic is |c|: on the cosine link -c BB^T errs as c BB^T does (up to the evaluation
    set's sampling), while on the linear class -c BB^T is far worse."""
    d, k, n = 6, 2, 12
    spec = InputSpec(d=d, k=k, task_seed=3)
    B = low_rank_basis(d, k, 3).numpy()
    Ms = np.stack([8.0 * B @ B.T, -8.0 * B @ B.T])
    for cls, same in (("lowrank_cosine", True), ("lowrank_linear", False)):
        rows = [dict(function_class=cls, L=1.0, sigma=0.1, n=n)] * 2
        err, _ = icl_error_of_matrices("softmax", Ms, rows, spec, n_tasks=20000, eval_seed=2)
        if same:
            assert abs(np.log(err[1] / err[0])) < 0.03
        else:
            assert err[1] > 2.0 * err[0]


def test_the_window_sweep_trains_as_the_main_units_at_its_settings():
    from softmax_icl.figures.low_rank.sweeps import window_settings, window_sweep
    cfg = FIGURES.resolve("low_rank", "smoke")
    sw, main = window_sweep(cfg), sweep_for(cfg, "softmax")
    for field in ("steps", "batch_size", "lr", "lr_schedule", "seeds", "param", "log_every", "d", "k", "n",
                  "task_seed", "data_seed", "init_seed"):
        assert getattr(sw, field) == getattr(main, field), field
    assert sw.model == "softmax" and sw.classes == ("lowrank_cosine",)
    omega_sigma = [(4 * L, s) for L, s in sw.settings()]
    assert omega_sigma == ([(om, cfg["link_sigma"]) for om in cfg["link_omegas"]]
                           + [(cfg["noise_omega"], s) for s in cfg["noise_sigmas"]])
    assert len(sw.configs()) == len(omega_sigma) * cfg["seeds"]
    # a noise setting already on the omega grid is trained once
    shared = window_settings({**cfg, "noise_omega": cfg["link_omegas"][1], "noise_sigmas": [cfg["link_sigma"], 1.0]})
    assert len(shared) == len(cfg["link_omegas"]) + 1
    with pytest.raises(ParameterError, match="link_omegas"):
        FIGURES.resolve("low_rank", "smoke", {"link_omegas": [3.0, 1.5]})
    with pytest.raises(ParameterError, match="noise_sigmas"):
        FIGURES.resolve("low_rank", "smoke", {"noise_sigmas": [1.0, 0.1]})


def test_window_cells_are_the_log_ratios_of_the_scale_and_rho2_per_seed():
    """A window that doubles |c| per omega step gives log 2 per seed (and -log 2 read as widening); the untrained
    control's cells are the same ratio at the first logged step; rho_2 cells carry the final values and the
    trajectory of their seed mean."""
    from softmax_icl.figures.low_rank.claims import window_cells
    from softmax_icl.figures.low_rank.window import WindowUnits
    T, P, S = 4, 3, 5
    rng = np.random.default_rng(0)
    base = rng.uniform(1.0, 2.0, (T, 1, S))
    scale = base * (2.0 ** np.arange(P))[None, :, None]
    scale[0] = 0.01                                                     # the initial M: the same for every setting
    rho = rng.uniform(0.0, 0.2, (T, P, S))
    w = WindowUnits(omega=np.array([1.5, 3.0, 6.0]), sigma=np.full(P, 0.2), log_steps=np.arange(T) * 10,
                    scale=scale, rho2=rho, best_scale=np.ones(P), best_over_mean=np.ones(P), lipschitz=(0, 1, 2),
                    noise=(0, 1))
    cells, control = window_cells(w, [(0, 1), (1, 2)], "ω", w.omega, widens=False)
    assert list(cells) == ["window: ω = 1.5 -> 3", "window: ω = 3 -> 6", "rho2: ω = 1.5", "rho2: ω = 3",
                           "rho2: ω = 6"]
    x, steps, means = cells["window: ω = 3 -> 6"]
    np.testing.assert_allclose(x, np.log(2.0), rtol=1e-12)
    np.testing.assert_allclose(means[1:], np.log(2.0), rtol=1e-12)
    np.testing.assert_allclose(cells["rho2: ω = 3"][0], rho[-1, 1])
    np.testing.assert_allclose(cells["rho2: ω = 3"][2], rho[:, 1].mean(-1))
    np.testing.assert_allclose(control["window: ω = 1.5 -> 3"], 0.0, atol=1e-12)
    widen, _ = window_cells(w, [(0, 1)], "σ", w.sigma, widens=True)
    np.testing.assert_allclose(widen["window: σ = 0.2 -> 0.2"][0], -np.log(2.0), rtol=1e-12)
