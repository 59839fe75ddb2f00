"""Generalisation chapter: the one-pass evaluation over test context lengths, slopes, sweeps and validation."""

import numpy as np
import pytest

from softmax_icl.figures.generalization.analysis import loglog_slope
from softmax_icl.figures.generalization.sweeps import sweep_for
from softmax_icl.metrics import icl_error_grid, icl_error_of_matrices
from softmax_icl.profiles import ParameterError
from softmax_icl.figures import FIGURES
from softmax_icl.tasks import InputSpec

TESTS = [dict(function_class="relu", L=1.5, sigma=0.3), dict(function_class="cosine", L=4.0, sigma=0.0),
         dict(function_class="affine", L=0.5, sigma=1.0)]


@pytest.mark.parametrize("kind", ["softmax", "linear"])
def test_one_pass_over_prefixes_equals_icl_error_row_by_row(kind):
    """Same tasks, same numbers as metrics.icl_error with one row per (unit, test setting, n)."""
    spec = InputSpec(d=3)
    M = np.random.default_rng(0).standard_normal((4, 3, 3)) * 3
    ns = [2, 5, 9]
    err, se = icl_error_grid(kind, M, TESTS, ns, spec, n_tasks=1000, eval_seed=5, chunk=256)
    for j, n in enumerate(ns):
        rows = [dict(t, n=n) for _ in range(4) for t in TESTS]
        ref, ref_se = icl_error_of_matrices(kind, np.repeat(M, len(TESTS), 0), rows, spec, n_tasks=1000,
                                            eval_seed=5, chunk=256, n_draw=max(ns))
        np.testing.assert_allclose(err[..., j], ref.reshape(4, len(TESTS)), rtol=1e-5)
        np.testing.assert_allclose(se[..., j], ref_se.reshape(4, len(TESTS)), rtol=1e-4)


def test_one_pass_does_not_depend_on_chunking_beyond_the_task_stream():
    """Splitting the units into separate calls (other chunk sizes for the same tasks) gives the same errors."""
    spec = InputSpec(d=2)
    M = np.stack([w * np.eye(2) for w in (0.5, 5.0, 50.0)])
    both, _ = icl_error_grid("softmax", M, TESTS[:2], [4, 16], spec, n_tasks=600, chunk=100)
    one, _ = icl_error_grid("softmax", M[1:2], TESTS[:2], [4, 16], spec, n_tasks=600, chunk=100)
    np.testing.assert_allclose(both[1:2], one, rtol=1e-6)


def test_wide_window_on_constant_tasks_averages_out_the_noise():
    """Cosine tasks with L = 0 are constants cos(phi); M = 0 averages the n noisy labels: error sigma^2 / n."""
    spec = InputSpec(d=2)
    sigma, ns = 0.7, [1, 4, 16, 64]
    err, se = icl_error_grid("softmax", np.zeros((1, 2, 2)), [dict(function_class="cosine", L=0.0, sigma=sigma)], ns,
                          spec, n_tasks=20000)
    np.testing.assert_allclose(err[0, 0], sigma**2 / np.array(ns), rtol=0.05)


def test_loglog_slope_recovers_power_laws():
    ns = np.array([8, 16, 32, 64])
    e = np.stack([3.0 * ns**-1.0, 0.2 * ns**-0.5, np.full(4, 0.1)])
    np.testing.assert_allclose(loglog_slope(ns, e), [-1.0, -0.5, 0.0], atol=1e-12)


def test_sweeps_cover_the_grid_and_validation_names_the_parameter():
    cfg = FIGURES.resolve("generalization", "smoke")
    soft, lin = sweep_for(cfg, "softmax"), sweep_for(cfg, "linear")
    assert {(c["function_class"], c["L"]) for c in soft.configs()} == {
        (c, L) for c in cfg["pretrain_classes"] for L in cfg["L_pretrain"]}
    assert {c["L"] for c in lin.configs()} == {cfg["L_test"]} and lin.model == "linear"
    assert all(c["n"] == cfg["n_train"] and c["sigma"] == cfg["sigma"] for c in soft.configs())
    with pytest.raises(ParameterError, match="L_pretrain"):
        FIGURES.resolve("generalization", "smoke", {"L_pretrain": [1.0, 10.0]})           # nothing below L_test
    with pytest.raises(ParameterError, match="mismatch_class"):
        FIGURES.resolve("generalization", "smoke", {"pretrain_classes": ["affine", "relu"]})
    with pytest.raises(ParameterError, match="n_train"):
        FIGURES.resolve("generalization", "smoke", {"n_train": 16})
    with pytest.raises(ParameterError, match="pretrain_classes"):
        FIGURES.resolve("generalization", "smoke", {"pretrain_classes": ["lowrank_linear"]})


def test_loss_trend_is_zero_on_a_flat_noisy_loss_and_negative_on_a_falling_one():
    from softmax_icl.figures.generalization.analysis import loss_trend
    rng = np.random.default_rng(0)
    T = 51
    flat = 1.0 + 0.01 * rng.standard_normal((T, 3))
    falling = np.linspace(2.0, 1.0, T)[:, None] * np.ones((1, 2))
    change, se = loss_trend(np.concatenate([flat, falling], 1), window=0.25)
    assert np.all(np.abs(change[:3]) <= np.maximum(0.02, 3 * se[:3]))
    # the last quarter (12 of 50 log points) of a line from 2 to 1: from 1.22 to 1, mean 1.11
    np.testing.assert_allclose(change[3:], (1.0 - 1.22) / 1.11, rtol=1e-9)


def test_two_branch_fit_recovers_a_and_b_and_the_crossover():
    from softmax_icl.figures.generalization.analysis import two_branch_fit
    Lp = np.array([0.1, 0.2, 0.5, 1, 2, 5, 10])
    a_, b_ = two_branch_fit(Lp, np.stack([0.03 * Lp**2 + 0.12, 2.0 * Lp**2 + 0.02]))
    np.testing.assert_allclose(a_, [0.03, 2.0], rtol=1e-8)
    np.testing.assert_allclose(b_, [0.12, 0.02], rtol=1e-8)
    np.testing.assert_allclose(np.sqrt(b_ / a_), [2.0, 0.1], rtol=1e-8)


def test_relu_error_is_exactly_quadratic_in_L_prime_for_a_fixed_unit():
    """f_{L'} = L' g for the ReLU class, so a fixed unit's error is a L'^2 + b (the two branches of Theorem 3.5) up to
    the noise cross term, which averages out: the fit leaves relative residuals of a few percent at most."""
    from softmax_icl.figures.generalization.analysis import two_branch_fit
    Lp = np.array([0.1, 0.3, 1.0, 3.0, 10.0])
    tests = [dict(function_class="relu", L=float(L), sigma=0.5) for L in Lp]
    err, _ = icl_error_grid("softmax", 5.0 * np.eye(2)[None], tests, [64], InputSpec(d=2), n_tasks=4000)
    e = err[0, :, 0]
    a_, b_ = two_branch_fit(Lp, e)
    assert np.abs((a_ * Lp**2 + b_) / e - 1).max() < 0.05


def test_identity_initialisation_starts_from_a_positive_window():
    import torch
    from softmax_icl.models import AttentionUnit
    seed_idx = torch.tensor([0, 1])
    for param in ("M", "KQ"):
        u = AttentionUnit("softmax", param, 3, seed_idx, [5, 6], 0.1, "cpu", init_identity=2.0)
        M = u.matrix().detach().numpy()
        assert np.all(np.trace(M, axis1=1, axis2=2) / 3 > 1.5)
        base = AttentionUnit("softmax", param, 3, seed_idx, [5, 6], 0.1, "cpu").matrix().detach().numpy()
        assert np.all(np.abs(np.trace(base, axis1=1, axis2=2)) < 0.5)


def test_theory_sweeps_cover_both_L_and_every_n():
    from softmax_icl.figures.generalization.sweeps import theory_dims, theory_sweep
    cfg = FIGURES.resolve("generalization", "smoke")
    dims = theory_dims(cfg)
    assert [d for d, _ in dims] == [cfg["d"], cfg["large_d"]]
    for d, ns in dims:
        sw = theory_sweep(cfg, d, ns)
        assert sw.d == d and sw.classes == (cfg["theory_class"],)
        assert {(c["L"], c["n"]) for c in sw.configs()} == {(L, n) for L in (cfg["L_pretrain"][0], cfg["L_test"])
                                                            for n in ns}
    with pytest.raises(ParameterError, match="L_prime_factors"):
        FIGURES.resolve("generalization", "smoke", {"L_prime_factors": [2.0, 5.0]})


def test_matched_bound_is_the_slides_formula():
    """Theorem 3.5's matched bound L^(2-2/(d+2)) (sigma^2/n)^(1/(d+2)), constant 1, and its upper half of n."""
    from softmax_icl.figures.generalization.analysis import matched_bound, upper_half
    np.testing.assert_allclose(matched_bound(1.0, 0.5, [512], 2), [(0.25 / 512) ** 0.25], rtol=1e-12)
    b = matched_bound(np.array([1.0, 4.0]), 0.3, 100, 5)
    np.testing.assert_allclose(b[1] / b[0], 4.0 ** (2 - 2 / 7), rtol=1e-12)
    np.testing.assert_allclose(matched_bound(1.0, 0.3, [100, 800], 5)[1] / matched_bound(1.0, 0.3, [100], 5)[0],
                               8.0 ** (-1 / 7), rtol=1e-12)
    assert upper_half([32, 64, 128, 256, 512]) == [128, 256, 512] and upper_half([64, 256, 1024]) == [256, 1024]


def test_identical_units_at_M_zero_make_the_variance_of_f_their_error():
    """The identical-units rival M = 0 predicts the context mean of the labels: on ReLU tasks at d = 2 its error is
    Var_x(f) (1 + 1/n) + sigma^2 / n with Var_x(f) = L^2 (1/6 - 2 / (3 pi^2)) (coefficients ~ U[-L, L])."""
    L, sigma, ns = 1.5, 0.5, [4, 16, 64]
    err, _ = icl_error_grid("softmax", np.zeros((1, 2, 2)), [dict(function_class="relu", L=L, sigma=sigma)], ns,
                            InputSpec(d=2), n_tasks=40000)
    var_f = L**2 * (1 / 6 - 2 / (3 * np.pi**2))
    np.testing.assert_allclose(err[0, 0], var_f * (1 + 1 / np.array(ns)) + sigma**2 / np.array(ns), rtol=0.04)


def test_units_evaluated_in_blocks_are_the_units_evaluated_at_once(monkeypatch):
    """The curve set's blocks of units (memory only) give the numbers of one call on the same tasks."""
    from softmax_icl.figures.generalization import analysis
    M = np.random.default_rng(1).standard_normal((7, 2, 2)) * 2
    one, _ = icl_error_grid("softmax", M, TESTS, [4, 16], InputSpec(d=2), n_tasks=600)
    monkeypatch.setattr(analysis, "CURVE_ELEMENTS", 3 * 256 * 17 * 3)            # blocks of 3 units
    blocks = analysis.blocked_error(M, TESTS, [4, 16], InputSpec(d=2), 600, 3, "cpu")
    np.testing.assert_allclose(blocks, one, rtol=1e-6)


@pytest.fixture(scope="module")
def smoke_checks(tmp_path_factory):
    """The chapter's checks at the smoke profile, as its notebook runs them."""
    from softmax_icl.book.run import Run
    from softmax_icl.figures.generalization import FIGURE, analysis, claims, sweeps
    run = Run(FIGURE, "smoke", "cpu", output_dir=str(tmp_path_factory.mktemp("generalization")))
    a = analysis.analyse(run, sweeps.train(run))
    claims.check_claims(run, a)
    return run, a


def test_every_designed_check_is_decided_on_every_seed_with_its_rivals(smoke_checks):
    """Each design entry of the chapter is decided on every seed of the run, followed along training where the design
    says so, and each rival it names is decided as its control; nothing else is recorded."""
    from softmax_icl.book import design
    run, a = smoke_checks
    by = {c.id: c for c in run.claims}
    expected = set()
    for e in design.load().of_figure("generalization"):
        cid = e.key.split("/", 1)[1]
        expected |= {cid, *e.controls}
        dec = by[cid].decision
        assert dec["design"] == e.key and dec["seeds"] == run.cfg["seeds"] >= 2, cid
        for cell in dec["cells"]:
            assert ("trajectory" in cell) == bool(e.trajectory), (cid, cell["label"])
            if e.trajectory:
                assert len(cell["trajectory"]["steps"]) == len(a.log_steps)
        for ctrl in e.controls:
            assert by[ctrl].kind == "control" and by[ctrl].control_of in (cid, by[ctrl].control_of)
    assert set(by) == expected


def test_the_trajectory_ends_where_the_verdict_is_measured(smoke_checks):
    """The curve set is the evaluation set's first tasks: the trajectory's last point (curve set) and the seed mean
    of the samples (whole evaluation set) estimate the same log ratio; and the M = 0 rival is one value per seed."""
    run, a = smoke_checks
    by = {c.id: c for c in run.claims}
    for cell in by["matched-L-curves-coincide"].decision["cells"] + by["mismatched-L-large-worse"].decision["cells"]:
        assert abs(cell["trajectory"]["means"][-1] - cell["mean"]) < 0.15, cell["label"]
    assert all(c["sd"] == 0 for c in by["matched-L-level-identical"].decision["cells"])


def test_the_L_exponent_of_matched_units_tells_a_bound_shaped_error_from_one_window():
    """The statistic of thm35-matched-L-exponent on planted units: matched units whose error grows like L^(a - 0.1)
    (a = 2 - 2/(d+2), the bound's exponent, one margin and more below it) pass the design's test; one window for both
    L, whose bias grows like L'^2, fails it. Planted: errors of the form the theorem describes, with seed noise."""
    from softmax_icl import stats
    from softmax_icl.book import design
    from softmax_icl.figures.generalization.analysis import TheoryAtD
    from softmax_icl.figures.generalization.claims import theory_numbers

    rng = np.random.default_rng(0)
    d, ns, S, L_unit = 2, [32, 64, 128, 256, 512], 15, [0.1, 1.0]
    L_prime = np.array([0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0])
    a = 2 - 2 / (d + 2)
    n = np.array(ns, dtype=float)
    error = np.empty((2, len(ns), S, len(L_prime), len(ns)))
    for k, L in enumerate(L_unit):
        for j in range(len(ns)):
            noise = np.exp(0.02 * rng.standard_normal((S, 1, 1)))
            matched = L ** (a - 0.1) * n[j] ** (-1 / (d + 2))             # the unit's own L, its own n
            bias = matched * (L_prime / L) ** 2                            # one window: bias ~ L'^2 away from L
            error[k, j] = noise * np.maximum(bias, matched)[None, :, None]     # the same at every test n
    th = TheoryAtD(d=d, n=ns, L_unit=L_unit, L_prime=L_prime, error=error, oracle=np.ones((len(L_prime), len(ns))),
                   w_signed=np.ones((2, len(ns), S)), sigma=0.5)
    x = theory_numbers(th)
    test = design.load().entry("generalization", "thm35-matched-L-exponent").test
    assert x["bound_exponent"] == pytest.approx(a)
    claim = [stats.decide(test, x["L_exponent"][:, j]).verdict for j in range(len(ns))]
    rival = [stats.decide(test, x["control_L_exponent"][:, j]).verdict for j in range(len(ns))]
    assert claim == ["pass"] * len(ns) and rival == ["fail"] * len(ns)
    np.testing.assert_allclose(x["control_L_exponent"].mean(0), 2 - a, atol=0.02)
