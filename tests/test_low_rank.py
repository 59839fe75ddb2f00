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
