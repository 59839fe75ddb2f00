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


def test_sweeps_cover_the_grids_once():
    cfg = FIGURES.resolve("norm_scaling", "default")
    sw = sw_mod.sweeps(cfg)
    assert set(sw) == {"iso", "n", "noniso", "whitened", "full", "inner", "dyn_iso", "dyn_noniso"} | {
        f"t34_d{d}" for d in cfg["t34_d"]}
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
