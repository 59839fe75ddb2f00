"""The norm-scaling figure: parameters, sweeps, the whitened-task inputs, and the trend / regime logic."""

import math

import numpy as np
import pytest
import torch

from types import SimpleNamespace

from softmax_icl.figures.norm_scaling import analysis as an
from softmax_icl.figures.norm_scaling import dynamics
from softmax_icl.figures.norm_scaling import sweeps as sw_mod
from softmax_icl.figures.norm_scaling import trends
from softmax_icl.profiles import ParameterError
from softmax_icl.figures import FIGURES
from softmax_icl.tasks import ClassBlock, InputSpec, draw_raw, evaluate_class, make_batch, nonisotropic_covariance
from softmax_icl.training import Grid, Sweep, SweepResult


def test_profiles_resolve_and_bad_values_are_named():
    for prof in ("smoke", "default", "paper"):
        cfg = FIGURES.resolve("norm_scaling", prof)
        assert cfg["sigma"] in cfg["sigma_values"] and cfg["n"] in cfg["n_values"]
    with pytest.raises(ParameterError, match="sigma"):
        FIGURES.resolve("norm_scaling", "default", {"sigma": 0.25})
    with pytest.raises(ParameterError, match="L_values"):
        FIGURES.resolve("norm_scaling", "default", {"L_values": [1.0, 0.3, 3.0]})
    with pytest.raises(ParameterError, match="n_sweep_L"):
        FIGURES.resolve("norm_scaling", "default", {"n_sweep_L": [0.7]})
    with pytest.raises(ParameterError, match="classes"):
        FIGURES.resolve("norm_scaling", "default", {"classes": ["affine"]})
    with pytest.raises(ParameterError, match="regime_saturation"):
        FIGURES.resolve("norm_scaling", "default", {"regime_saturation": 1.5})
    with pytest.raises(ParameterError, match="t34_train_n"):
        FIGURES.resolve("norm_scaling", "default", {"t34_train_n": 1000})
    with pytest.raises(ParameterError, match="dyn_L"):
        FIGURES.resolve("norm_scaling", "default", {"dyn_L": [1.0]})
    with pytest.raises(ParameterError, match="full_more_d.*other than d"):
        FIGURES.resolve("norm_scaling", "default", {"full_more_d": [3, 5]})
    with pytest.raises(ParameterError, match="full_more_d"):
        FIGURES.resolve("norm_scaling", "default", {"full_more_d": [8, 3]})


def test_sweeps_cover_the_grids_once():
    cfg = FIGURES.resolve("norm_scaling", "default")
    sw = sw_mod.sweeps(cfg)
    assert set(sw) == {"iso", "n", "noniso", "whitened", "full", "inner", "dyn_iso", "dyn_noniso"} | {
        f"t34_d{d}" for d in cfg["t34_d"]} | {f"full_d{d}" for d in cfg["full_more_d"]}
    assert cfg["full_more_d"] and all(
        sw[f"full_d{d}"].d == d and sw[f"full_d{d}"].param == "full" and sw[f"full_d{d}"].classes == ("relu",)
        and sw[f"full_d{d}"].L == sw["full"].L and sw[f"full_d{d}"].lr == sw["full"].lr for d in cfg["full_more_d"])
    assert {k for k in sw if sw_mod.is_full(k)} == {"full"} | {f"full_d{d}" for d in cfg["full_more_d"]}
    assert sw["dyn_iso"].lr == cfg["dyn_lr"] and sw["dyn_iso"].init_scale == cfg["dyn_init"]
    assert sw["dyn_noniso"].input_dist == "nonisotropic" and sw["dyn_iso"].steps == cfg["dyn_steps"]
    assert all(sw[f"t34_d{d}"].d == d and sw[f"t34_d{d}"].n == (cfg["t34_train_n"],) for d in cfg["t34_d"])
    pairs = sw["iso"].pairs
    assert len(pairs) == len(set(pairs)) == len(cfg["L_values"]) + len(cfg["sigma_values"]) - 1
    assert sw["noniso"].input_dist == "nonisotropic" and sw["whitened"].input_dist == "nonisotropic_whitened"
    assert sw["full"].param == "full" and sw["full"].lr == cfg["lr_full"]
    assert sw["n"].n == tuple(cfg["n_values"]) and sw["n"].classes == ("relu",)
    assert len(sw["iso"].configs()) == len(cfg["classes"]) * len(pairs) * cfg["seeds"]


def test_whitened_inputs_scale_x_and_evaluate_the_task_at_the_whitened_input():
    d = 4
    spec = InputSpec(d=d, input_dist="nonisotropic_whitened")
    g = torch.Generator().manual_seed(0)
    raw = draw_raw(spec, 8, 6, g, "cpu")
    sq = nonisotropic_covariance(d).sqrt().float()
    torch.testing.assert_close(raw["x"], raw["x_task"] * sq)
    torch.testing.assert_close(raw["x_task"].norm(dim=-1), torch.ones(8, 7))
    # same generator, isotropic spec: the same u
    g2 = torch.Generator().manual_seed(0)
    torch.testing.assert_close(draw_raw(InputSpec(d=d), 8, 6, g2, "cpu")["x"], raw["x_task"])
    r1 = {k: v.unsqueeze(0) for k, v in raw.items()}
    L, sig = torch.tensor([2.0]), torch.tensor([0.0])
    batch = make_batch(spec, r1, [ClassBlock("relu")], L.view(1, 1), sig.view(1, 1), 6)
    f = evaluate_class("relu", r1["x_task"], r1, L)
    torch.testing.assert_close(batch.y_ctx[:, 0], f[:, :, :6])
    torch.testing.assert_close(batch.f_q[:, 0], f[:, :, 6])
    torch.testing.assert_close(batch.x_ctx, r1["x"][:, :, :6])       # attention sees the non-isotropic x


def test_final_M_averages_the_last_fraction_of_the_logs():
    T, C, d = 9, 2, 3
    hist = np.arange(T, dtype=float)[:, None, None, None] * np.ones((T, C, d, d))
    res = SweepResult(sweep={}, configs=[{}] * C, log_steps=np.arange(T) * 10, M_history=hist,
                      loss_history=np.zeros((T, C)), final_state={})
    assert an.final_M(res, 0.25)[0, 0, 0] == pytest.approx(7.5)        # round(0.25 * 8) = 2: logs 7 and 8
    assert an.final_M(res, 0.0)[0, 0, 0] == pytest.approx(8.0)


def _fake_analysis(norm_pop, norm, Ls=(0.1, 0.3, 1.0, 3.0, 10.0)):
    cfg = dict(L_values=list(Ls), sigma=0.1, n=50, regime_saturation=0.75, classes=["relu"], sigma_values=[0.1],
               L_sigma=1.0)
    configs = [dict(function_class="relu", L=L, sigma=0.1, n=50, seed=s) for L in Ls for s in (0, 1)]
    rep = lambda v: np.repeat(np.asarray(v, dtype=float), 2)          # noqa: E731
    grid = Grid(("relu",), tuple((L, 0.1) for L in Ls), (50,), 2)
    u = SimpleNamespace(configs=configs, grid=grid, norm=rep(norm), w=rep(norm), norm_pop=rep(norm_pop),
                        w_pop=rep(norm_pop))
    return SimpleNamespace(cfg=cfg, units={"iso": u})


def test_L_trend_stops_at_the_saturation_boundary():
    a = _fake_analysis(norm_pop=[1, 3, 8, 9.5, 10], norm=[1.1, 2.9, 8.2, 8.0, 8.1])
    t = trends.L_trend(a, "iso", "relu")
    assert t.boundary == 2                                             # 8 >= 0.75 * 10 first at L = 1
    assert np.all(t.ratios_in > 1) and t.ratios_in.size == 2         # the dip after saturation is not checked
    assert t.snr_boundary == pytest.approx(50 * 1.0 / 0.01)
    bad = _fake_analysis(norm_pop=[1, 3, 8, 9.5, 10], norm=[1.1, 1.0, 8.2, 8.0, 8.1])
    assert trends.L_trend(bad, "iso", "relu").ratios_in.min() < 1      # a violation inside the regime is caught


def test_equal_L_over_sigma_pairs():
    configs = [dict(function_class="relu", L=L, sigma=s, n=50, seed=0)
               for L, s in ((0.1, 0.1), (1.0, 1.0), (0.3, 0.1), (1.0, 0.1), (1.0, 0.3))]
    a = SimpleNamespace(units={"iso": SimpleNamespace(configs=configs)})
    pairs = trends.L_over_sigma_pairs(a, "relu")
    assert pairs == [(0, 1)]                                           # (0.1, 0.1) ~ (1, 1); (1, 0.1) has no partner
    assert math.isclose(configs[0]["L"] / configs[0]["sigma"], configs[1]["L"] / configs[1]["sigma"])


def _growth_result(rates, T=101):
    """Fake dynamics sweep: ||M|| = 0.01 exp(rate t) up to a plateau at step 50 (M = ||M|| I / 1, d = 2); ``rates``
    one row per seed, one rate per L of (0.1, 0.3, 1.0); the units laid out on the sweep's grid (seed fastest)."""
    steps = np.arange(T) * 10
    sweep = Sweep(classes=("relu",), L=(0.1, 0.3, 1.0), sigma=(0.1,), n=(50,), seeds=len(rates))
    configs = sweep.configs()
    r = np.array([rates[c["seed"]][sweep.L.index(c["L"])] for c in configs])
    t = np.minimum(steps, 500)[:, None]
    norm = 0.01 * np.exp(r[None, :] * t)
    hist = norm[:, :, None, None] * np.eye(2)
    return SweepResult(sweep=sweep.to_dict(), configs=configs, log_steps=steps, M_history=hist,
                       loss_history=np.zeros((T, len(configs))), final_state={})


def test_growth_rate_is_the_early_slope_of_log_norm_and_the_ordering_takes_the_worst_seed():
    res = _growth_result([[0.001, 0.002, 0.004], [0.001, 0.003, 0.002]])
    g = dynamics.growth(res, "isotropic", early=0.2)
    assert g.early_slope == pytest.approx([0.001, 0.001, 0.002, 0.003, 0.004, 0.002])     # (L, seed), seed fastest
    assert g.late_slope == pytest.approx(np.zeros(6), abs=1e-12)         # settled: no growth in the last quarter
    o = dynamics.ordering([g], ["relu"], [0.1, 0.3, 1.0], "early_slope")
    assert o.worst_step == pytest.approx(-0.001) and "seed 1" in o.worst_where
    ok = dynamics.ordering([dynamics.growth(_growth_result([[0.001, 0.002, 0.004]]), "iso", 0.2)], ["relu"],
                           [0.1, 0.3, 1.0], "early_slope")
    assert ok.worst_step == pytest.approx(0.001)


# -- the design's statistics ----------------------------------------------------------------------------------

def test_full_weights_trainer_trains_as_the_sweep_does_and_logs_the_weights():
    from softmax_icl.training import train_sweep
    sweep = Sweep(classes=("relu",), L=(1.0,), sigma=(0.1,), n=(10,), seeds=2, d=3, param="full", steps=6,
                  batch_size=8, lr=0.03, log_every=3)
    plain = train_sweep(sweep, "cpu")
    logged = sw_mod.FullWeights(sweep).train("cpu")
    np.testing.assert_allclose(logged.M_history, plain.M_history, rtol=1e-6, atol=1e-7)
    assert logged.to_dict()["sweep"] == sweep.to_dict() and sw_mod.FullWeights(sweep).to_dict()["log"]
    h = logged.weights_history
    assert h["WK"].shape == (3, 2, 4, 4)                                 # log points 0, 3, 6; two seeds; d + 1
    for k in ("WK", "WQ", "WV"):
        np.testing.assert_allclose(h[k][-1], logged.final_state[k], rtol=1e-6)
    A = np.swapaxes(h["WK"], -1, -2) @ h["WQ"]
    np.testing.assert_allclose(A[..., :3, :3], logged.M_history, rtol=1e-5, atol=1e-6)
    bh = an.block_history(logged)
    assert bh.label_row_ratio.shape == (3, 2)
    assert an.block_history(plain) is None                              # no weights logged: no history
    with pytest.raises(ValueError, match="param='full'"):
        sw_mod.FullWeights(Sweep(param="KQ")).train("cpu")


def _planted_full(d: int, label_row: float, seeds: int = 4, steps: int = 4):
    """Full-weight units at dimension ``d`` (ReLU, L = 1) whose W_K^T W_Q is 3 I plus 1 % noise with a label row of
    relative mass ``label_row``, and whose W_V reads the label (its covariate part 1 % of it), at every logged step;
    at initialisation W_Q is all ones and W_V the identity plus ones."""
    from softmax_icl import theory as th
    rng = np.random.default_rng(d)
    sweep = Sweep(classes=("relu",), L=(1.0,), sigma=(0.1,), n=(10,), seeds=seeds, d=d, param="full")
    shape = (steps, seeds, d + 1, d + 1)
    WK = np.broadcast_to(np.eye(d + 1), shape).copy()
    WQ = 3.0 * WK + 0.03 * rng.standard_normal(shape)
    WQ[..., d, :d] = 3.0 * label_row * (1 + 0.1 * rng.standard_normal((steps, seeds, d)))   # row norm: label_row ||X||
    WQ[..., :, d] = 0.0
    WV = np.zeros(shape)
    WV[..., d, d] = 1.0
    WV[..., d, :d] = 0.01 * rng.standard_normal((steps, seeds, d))
    init = th.block_form(WK[0], np.ones((seeds, d + 1, d + 1)), np.eye(d + 1) + np.ones((seeds, d + 1, d + 1)))
    w = np.full(seeds, 3.0) * (1 + 0.01 * rng.standard_normal(seeds))
    return an.FullDim(d, sweep.configs(), sweep.grid(), np.arange(steps) * 10.0, w, np.full(seeds, 3.0),
                      th.block_form(WK[-1], WQ[-1], WV[-1]), WV[-1], init, th.block_form(WK, WQ, WV))


def test_the_block_form_is_decided_at_every_ambient_dimension(tmp_path):
    """Planted: units at the chapter's d in the block form, and units at a further d whose label row carries half
    the x-block's mass. The block-form check names the further-d cells and fails on them; with the further d in the
    block form too it passes."""
    from softmax_icl.book.run import Run
    from softmax_icl.figures.norm_scaling import claims
    good5 = _planted_full(5, 0.0)
    units = {"full": SimpleNamespace(configs=good5.configs, grid=good5.grid, w=good5.w, w_pop=good5.w_pop,
                                     steps=good5.steps)}

    def decide(more):
        run = Run(FIGURES["norm_scaling"], "smoke", "cpu", use_cache=False, output_dir=str(tmp_path))
        a = SimpleNamespace(units=units, block=good5.block, block_init=good5.block_init,
                            block_history=good5.block_history, full_more=more)
        claims.check_block_form(run, a)
        return {c.id: c for c in run.claims}

    bad = decide({3: _planted_full(3, 0.5)})["full-weights-block-form"]
    labels = [c["label"] for c in bad.decision["cells"]]
    assert "label_row: relu, L = 1, d = 3" in labels and "label_row: relu, L = 1" in labels
    assert bad.status == "fail" and "d = 3, 5" in bad.statement
    assert [c["verdict"] for c in bad.decision["cells"] if c["label"] == "label_row: relu, L = 1, d = 3"] == ["fail"]
    good = decide({3: _planted_full(3, 0.0)})
    assert good["full-weights-block-form"].status == "pass"
    assert good["full-weights-value-ignores-x"].status == "pass"
    assert "relu, L = 1, d = 3" in [c["label"] for c in good["full-weights-value-ignores-x"].decision["cells"]]


def test_full_units_at_a_further_dimension_are_held_against_the_optimum_of_their_own_dimension(tmp_path):
    from softmax_icl import theory as th
    from softmax_icl.book.run import Run
    run = Run(FIGURES["norm_scaling"], "smoke", "cpu", use_cache=False, output_dir=str(tmp_path))
    cfg = run.cfg
    fds = {}
    for d in (3, 5):
        sweep = Sweep(classes=("relu",), L=(1.0,), sigma=(0.1,), n=(10,), seeds=2, d=d, param="full", steps=4,
                      batch_size=8, lr=0.03, log_every=2)
        fds[d] = an.full_at(run, sw_mod.FullWeights(sweep).train("cpu"), d)
    fd = fds[3]
    assert fd.d == 3 and fd.block.A.shape == (2, 4, 4) and fd.block_history.label_row_ratio.shape == (3, 2)
    assert fd.w.shape == fd.w_pop.shape == (2,) and cfg["w_min"] <= fd.w_pop[0] <= cfg["w_max"]
    spec = InputSpec(d=3, input_dist="isotropic")
    wg = an.w_grid(cfg)
    terms = th.loss_terms(spec, [dict(function_class="relu", L=1.0, n=10)], wg[:, None, None] * np.eye(3),
                          n_tasks=cfg["scan_tasks"], seed=cfg["eval_seed"] + 200, chunk=an.SCAN_CHUNK)
    assert fd.w_pop[0] == pytest.approx(th.refine_minimum(wg, terms.loss(np.array([0.1])))[0][0])
    assert fds[5].w_pop[0] != pytest.approx(fd.w_pop[0], rel=0.05)          # the optimum depends on d


def test_pooled_scan_and_jackknife_give_the_mean_and_its_standard_error():
    from softmax_icl import theory as th
    from softmax_icl.figures.norm_scaling import theorem34 as t34
    assert t34.batch_sizes(10, 4) == [3, 3, 2, 2]
    rng = np.random.default_rng(0)
    vals = rng.normal(1.0, 0.3, size=(6, 2, 5))                          # 6 batches of equal size, (n, w) terms
    batches = [th.WindowScan(3, (10, 20), np.arange(5.0), v, 2 * v, 0 * v, 0 * v, 16) for v in vals]
    p = t34.pooled(batches)
    np.testing.assert_allclose(p.bias, vals.mean(0)) and np.testing.assert_allclose(p.noise, 2 * vals.mean(0))
    loo = t34._leave_one_out(batches)
    np.testing.assert_allclose(loo[2][0], np.delete(vals, 2, 0).mean(0))
    # for the mean itself the delete-one jackknife is the standard error of the batch means
    reps = np.array([b[0][0, 0] for b in loo])
    assert t34.jackknife_se(reps) == pytest.approx(vals[:, 0, 0].std(ddof=1) / np.sqrt(6))
    assert t34.edge_distance([0.25, 0.5, 0.1], (0.2, 0.4)).tolist() == pytest.approx([0.05, -0.1, -0.1])


def test_an_exact_check_with_its_monte_carlo_error_needs_the_whole_interval_inside(tmp_path):
    from softmax_icl import stats
    from softmax_icl.book.run import Run
    run = Run(FIGURES["norm_scaling"], "smoke", "cpu", use_cache=False, output_dir=str(tmp_path))
    kw = dict(source="test")
    z = stats.normal_quantile(0.95)
    ok = run.decide("theorem34-slides-range", "x", {"d = 3": stats.Estimate(0.03, 0.01)}, **kw)
    assert ok.status == "pass" and ok.value == pytest.approx(0.03 - z * 0.01)
    near = run.decide("theorem34-slides-range", "x", {"d = 3": stats.Estimate(0.01, 0.01)}, **kw)
    assert near.status == "inconclusive"                                 # inside, but not by its Monte Carlo error
    out = run.decide("theorem34-slides-range", "x", {"d = 3": stats.Estimate(-0.03, 0.01)}, **kw)
    assert out.status == "fail"


def _adam_like(plateaus, seeds=4, T=101, rate=0.01, jitter=0.0):
    """Fake dynamics sweep as Adam draws it: ||M|| = 0.01 exp(rate t) for every L alike (Adam's steps ignore the
    gradient's scale), up to a plateau at step ``plateaus[L index]`` (a larger L grows for longer); ``jitter``: a
    per-seed relative change of the rate."""
    steps = np.arange(T) * 10
    sweep = Sweep(classes=("relu",), L=(0.1, 0.3, 1.0), sigma=(0.1,), n=(50,), seeds=seeds)
    configs = sweep.configs()
    r = np.array([rate * (1 + jitter * (c["seed"] - seeds / 2) / seeds) for c in configs])
    stop = np.array([plateaus[sweep.L.index(c["L"])] for c in configs])
    norm = 0.01 * np.exp(r[None, :] * np.minimum(steps[:, None], stop[None, :]))
    return SweepResult(sweep=sweep.to_dict(), configs=configs, log_steps=steps,
                       M_history=norm[:, :, None, None] * np.eye(2), loss_history=np.zeros((T, len(configs))),
                       final_state={})


def _growth_checks(run, res):
    from softmax_icl.figures.norm_scaling import claims
    g = [dynamics.growth(res, "isotropic", early=0.05)]
    order = {stat: dynamics.ordering(g, ["relu"], [0.1, 0.3, 1.0], stat)
             for stat in ("gain", "late_gain", "early_slope", "late_slope")}
    claim, rival, _ = claims.growth_steps(order["gain"], order["late_gain"], {("isotropic", "relu"): 1.0})
    c = run.decide("growth-rate-orders-with-L", "x", claim, source="t")
    r = run.decide("growth-rate-orders-with-L-late", "x", rival, source="t")
    return c, r, order


def test_the_growth_statistic_tells_faster_growth_under_adam_from_its_absence(tmp_path):
    """Planted: under Adam every L starts along the same path; with the property, a larger L grows for longer (to a
    higher norm) and has grown more after the same number of steps. The gain sees it and the late-training rival
    fails; without the property (every L the same path) the gain fails; the early slope is blind to both."""
    from softmax_icl.book.run import Run
    run = Run(FIGURES["norm_scaling"], "smoke", "cpu", use_cache=False, output_dir=str(tmp_path))
    c, r, order = _growth_checks(run, _adam_like([200, 400, 600], jitter=0.05))
    assert c.status == "pass" and r.status == "fail"
    cell = c.decision["cells"][0]
    assert cell["trajectory"]["means"][-1] == pytest.approx(cell["mean"])        # followed along training
    early = order["early_slope"].by_panel[("isotropic", "relu")]
    assert np.ptp(early.mean(0)) < 1e-9 * early.mean()                            # the early slope cannot see it
    absent, _, _ = _growth_checks(run, _adam_like([400, 400, 400], jitter=0.05))
    assert absent.status == "fail"


def test_trajectory_keeps_the_logged_steps_where_every_seed_is_defined():
    from softmax_icl.figures.norm_scaling import claims
    w = np.array([[-0.1, 0.2], [0.5, 1.0], [1.0, 2.0]])                  # (T, seeds): w <= 0 at the first log
    lr = claims.log_ratio(w, np.ones_like(w))
    steps, means = claims.trajectory([0, 10, 20], lr)
    assert steps.tolist() == [10, 20] and means == pytest.approx([np.log(0.5 * 1.0) / 2, np.log(2.0) / 2])
    with pytest.raises(ValueError, match="no log"):
        claims.defined(lr[0], "w-falls-with-sigma", "here")


def test_inner_dimension_compares_per_seed_with_the_nearer_neighbour_L():
    Ls, seeds, d = [0.3, 1.0, 3.0], 2, 2
    cfg = dict(L_values=Ls, sigma=0.1, n=50, classes=["relu"], regime_w=2.0, average_last=0.0, d=d)
    grid = Grid(("relu",), tuple((L, 0.1) for L in Ls), (50,), seeds)
    scale = {0.3: 1.0, 1.0: 4.0, 3.0: 4.5}                                # M_d = scale I; 1.0's nearer neighbour: 3.0
    M_d = np.stack([scale[L] * np.eye(d) for L in Ls for _ in range(seeds)])
    M_r = M_d * np.repeat([[1.0, 1.1]], len(Ls), 0).ravel()[:, None, None]   # seed 1 of the r x d units: 10 % off
    res = SimpleNamespace(M_history=M_r[None], log_steps=np.array([0]), grid=grid,
                          sweep={"inner_dim": 4, "seeds": seeds})
    u = SimpleNamespace(grid=grid, w_pop=np.repeat([1.0, 5.0, 5.0], seeds))   # L = 0.3 has no window
    iso = SimpleNamespace(M_history=np.stack([0.5 * M_d, M_d]), log_steps=np.array([0, 1]))
    res = dict(res.__dict__, M_history=np.stack([0.5 * M_r, M_r]), log_steps=np.array([0, 1]))
    inner = an.inner_dimension(cfg, {"inner": SimpleNamespace(**res), "iso": iso}, M_d, u)
    assert inner.keys == [("relu", 1.0), ("relu", 3.0)] and inner.neighbour == [3.0, 1.0]
    # followed along training: the distance with both units' M as it stood at each logged step (here the same)
    np.testing.assert_allclose(inner.dist_history, [[0.05, 0.05], [0.05, 0.05]])
    assert inner.steps.tolist() == [0, 1]
    np.testing.assert_allclose(inner.dist, [[0.0, 0.1], [0.0, 0.1]])
    assert inner.gap == pytest.approx([0.5 / 4.5, 0.5 / 4.0])
    np.testing.assert_allclose(inner.dist_next[0], [0.5 / 4.5, abs(4.4 - 4.5) / 4.5])


def test_running_final_is_final_M_had_training_stopped_at_each_log():
    T, C, d = 9, 2, 3
    rng = np.random.default_rng(1)
    hist = rng.normal(size=(T, C, d, d))
    run_M = an.running_final(hist, 0.25)
    for j in range(T):
        res = SweepResult(sweep={}, configs=[{}] * C, log_steps=np.arange(j + 1), M_history=hist[:j + 1],
                          loss_history=np.zeros((j + 1, C)), final_state={})
        np.testing.assert_allclose(run_M[j], an.final_M(res, 0.25))
