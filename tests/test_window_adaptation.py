"""Window-adaptation chapter: the zero-mean task family, the sweeps, the per-seed Nadaraya-Watson windows, the
evaluation of each unit on its own cell, and the checks decided on per-seed statistics."""

import math

import numpy as np
import pytest
import torch

from softmax_icl.figures.window_adaptation.sweeps import families, settings, sweep_for, trained_families, unit_index
from softmax_icl.metrics import icl_error_of_matrices
from softmax_icl.profiles import ParameterError
from softmax_icl.figures import FIGURES
from softmax_icl.tasks import InputSpec, draw_raw, evaluate_class, sphere_cos_mean


@pytest.mark.parametrize("L", [0.5, 2.0, 8.0])
def test_sphere_cos_mean_matches_closed_forms(L):
    """E[cos(L w^T x)] on S^{d-1}: cos L (d = 1), J_0(L) (d = 2), sin(L) / L (d = 3)."""
    Lt = torch.tensor(L, dtype=torch.float64)
    assert sphere_cos_mean(Lt, 1).item() == pytest.approx(math.cos(L))
    assert sphere_cos_mean(Lt, 2).item() == pytest.approx(torch.special.bessel_j0(Lt).item(), abs=1e-7)
    assert sphere_cos_mean(Lt, 3).item() == pytest.approx(math.sin(L) / L, abs=1e-7)


@pytest.mark.parametrize("d", [2, 5])
@pytest.mark.parametrize("L", [0.5, 8.0])
def test_centered_cosine_tasks_have_zero_mean_and_keep_the_shape(d, L):
    """Every task of cosine_centered has mean ~0 over x ~ U^d (the cosine class does not), and differs from the
    cosine task with the same draws by a constant."""
    spec = InputSpec(d=d)
    raw = {k: v.unsqueeze(0) for k, v in draw_raw(spec, 6, 40000, torch.Generator().manual_seed(1), "cpu").items()}
    Lt = torch.tensor([L])
    f = evaluate_class("cosine_centered", raw["x"], raw, Lt)[0]                   # (6, m)
    f0 = evaluate_class("cosine", raw["x"], raw, Lt)[0]
    assert f.mean(-1).abs().max().item() < 0.02
    diff = f0 - f
    assert (diff - diff[:, :1]).abs().max().item() < 1e-5                         # a per-task constant
    np.testing.assert_allclose(diff[:, 0], torch.cos(raw["phase"][0]) * sphere_cos_mean(Lt, d).float(), atol=1e-5)


def test_linear_attention_cannot_output_the_offset_but_can_on_centered_tasks():
    """Near-constant cosine tasks (L small): predicting 0 (linear attention's only choice for an offset, M = 0 here)
    loses E[cos^2 phi] = 1/2 on the cosine class, nothing comparable on the centered class."""
    spec = InputSpec(d=2)
    rows = [dict(function_class=c, L=0.05, sigma=0.0, n=32) for c in ("cosine", "cosine_centered")]
    err, _ = icl_error_of_matrices("linear", np.zeros((2, 2, 2)), rows, spec, n_tasks=4000, eval_seed=2)
    assert err[0] == pytest.approx(0.5, rel=0.05) and err[1] < 0.01


def test_sweeps_hold_every_setting_linear_both_families_softmax_the_papers():
    cfg = FIGURES.resolve("window_adaptation", "smoke")
    assert families(cfg) == (cfg["function_class"], cfg["zero_mean_class"])
    for model, fams in (("linear", families(cfg)), ("softmax", families(cfg)[:1])):
        confs = sweep_for(cfg, model).configs()
        assert trained_families(cfg, model) == fams and {c["function_class"] for c in confs} == set(fams)
        assert len(confs) == len(fams) * len(settings(cfg)) * len(cfg["n_values"]) * cfg["seeds"]
    assert cfg["seeds"] >= 2 and FIGURES.resolve("window_adaptation", "default")["seeds"] == 15
    assert FIGURES.resolve("window_adaptation", "paper")["seeds"] == 10


def test_softmax_units_are_the_same_on_both_families():
    """Why one softmax sweep serves both families: trained on the cosine tasks or on the same tasks less their mean
    (the same draws), a softmax unit reaches the same M and has the same ICL error; a linear unit does not."""
    from dataclasses import replace

    from softmax_icl.training import Sweep

    base = Sweep(classes=("cosine", "cosine_centered"), pairs=((2.0, 0.1), (8.0, 0.1)), n=(8, 16), seeds=2, d=2,
                 steps=40, batch_size=32, lr=0.1, log_every=20)
    spec = InputSpec(d=2)
    trained = {}
    for model in ("softmax", "linear"):
        trained[model] = replace(base, model=model).train("cpu").M.reshape(2, -1, 2, 2)   # (family, rest, d, d)
        same = np.allclose(trained[model][0], trained[model][1], rtol=1e-4, atol=1e-5)
        assert same == (model == "softmax"), model
        assert np.abs(trained[model]).max() > 0.5                               # it moved from its initialisation
    rows = [dict(function_class=c, L=8.0, sigma=0.1, n=16) for c in ("cosine", "cosine_centered")]
    M = np.stack([trained["softmax"][0, -1]] * 2)                             # one softmax unit, on both families
    err, _ = icl_error_of_matrices("softmax", M, rows, spec, n_tasks=2000, eval_seed=4)
    np.testing.assert_allclose(err[0], err[1], rtol=1e-5)


def test_validation_names_the_parameter():
    with pytest.raises(ParameterError, match="zero_mean_class"):
        FIGURES.resolve("window_adaptation", "smoke", {"zero_mean_class": "cosine"})
    with pytest.raises(ParameterError, match="L_values"):
        FIGURES.resolve("window_adaptation", "smoke", {"L_values": [1.0, 2.0]})
    with pytest.raises(ParameterError, match="curve_tasks"):
        FIGURES.resolve("window_adaptation", "smoke", {"curve_tasks": 10**6})
    with pytest.raises(ParameterError, match="seeds"):
        FIGURES.resolve("window_adaptation", "smoke", {"seeds": 1})


def test_unit_index_selects_one_unit_per_seed():
    cfg = FIGURES.resolve("window_adaptation", "smoke")

    class _Res:
        grid = sweep_for(cfg, "linear").grid()

        def select(self, **where):
            return self.grid.units(**where)

    s = settings(cfg)[1]
    idx = unit_index(_Res(), s, cfg["n_window"], cfg["zero_mean_class"])
    assert len(idx) == cfg["seeds"]

    class _Soft(_Res):
        grid = sweep_for(cfg, "softmax").grid()

    paper = unit_index(_Soft(), s, cfg["n_window"], cfg["function_class"])
    np.testing.assert_array_equal(unit_index(_Soft(), s, cfg["n_window"], cfg["zero_mean_class"]), paper)


def test_each_unit_on_its_own_cell_is_the_grids_number():
    """The evaluation reads every pretrained unit on its own test setting and context length only; each number is
    the one the whole grid (every unit on every setting and length, the same tasks) gives for that cell, for units
    with leading axes (logged steps) too."""
    from softmax_icl.figures.window_adaptation.analysis import own_cell_errors
    from softmax_icl.metrics import icl_error_grid

    spec = InputSpec(d=2)
    tests = [dict(function_class=c, L=L, sigma=0.1) for c in ("cosine", "cosine_centered") for L in (0.5, 8.0)]
    ns = [4, 16, 32]
    cells = [(r, n) for r in range(len(tests)) for n in ns for _ in range(2)]
    rng = np.random.default_rng(0)
    Ms = [rng.standard_normal((3, len(cells), 2, 2)).astype(np.float32) * s for s in (4.0, 1.0)]
    soft, lin = own_cell_errors([("softmax", Ms[0], cells), ("linear", Ms[1][-1], cells)], tests, ns, spec,
                                n_tasks=700, eval_seed=5, device="cpu", chunk=256)
    assert soft.shape == (3, len(cells)) and lin.shape == (len(cells),)
    for kind, M, got in [("softmax", Ms[0][t], soft[t]) for t in range(3)] + [("linear", Ms[1][-1], lin)]:
        grid, _ = icl_error_grid(kind, M, tests, ns, spec, n_tasks=700, eval_seed=5)
        want = [grid[u, r, ns.index(n)] for u, (r, n) in enumerate(cells)]
        np.testing.assert_allclose(got, want, rtol=2e-5)
    with pytest.raises(ValueError, match="kind"):
        own_cell_errors([("relu", Ms[0][0], cells)], tests, ns, spec, n_tasks=10, eval_seed=5, device="cpu")


def test_per_seed_scan_blocks_are_each_seeds_own_tasks():
    """Seed s of the per-seed scan averages tasks s T .. (s+1) T - 1 of the tuning stream: seed 0 is the grid's mean
    over the first T tasks, seed 1 the rest of the first 2 T."""
    from softmax_icl.baselines import nw_matrices
    from softmax_icl.figures.window_adaptation.rivals import scan_per_seed
    from softmax_icl.metrics import icl_error_grid

    spec = InputSpec(d=2)
    tests = [dict(function_class="cosine", L=L, sigma=0.1) for L in (0.5, 8.0)]
    ns, w, T = [8, 32], (0.5, 5.0, 50.0), 300
    scan = scan_per_seed(tests, ns, spec, seeds=2, n_tune=T, tune_seed=9, w_grid=w, max_elements=2e4)
    one, _ = icl_error_grid("softmax", nw_matrices(w, 2), tests, ns, spec, n_tasks=T, eval_seed=9)
    two, _ = icl_error_grid("softmax", nw_matrices(w, 2), tests, ns, spec, n_tasks=2 * T, eval_seed=9)
    np.testing.assert_allclose(scan[0], one, rtol=1e-5)
    np.testing.assert_allclose(scan[1], 2 * two - one, rtol=1e-4)


def test_the_oracle_tunes_to_each_setting_and_the_fixed_window_to_all():
    """choose(): the oracle takes each setting's best bandwidth, the fixed window the one whose worst ratio to it is
    smallest; on real tasks the oracle narrows its window as L grows, the fixed window is the oracle where there is
    one setting, and is worse than the oracle somewhere where the settings want different windows."""
    from softmax_icl.figures.window_adaptation.rivals import choose, tuned_windows

    scan = np.array([[[1.0, 4.0], [2.0, 2.0], [4.0, 1.0]]])        # (seed, w, setting): best w 0 and 2, fixed w 1
    best, fixed = choose(scan[..., None])
    np.testing.assert_array_equal(best[0, :, 0], [0, 2])
    assert fixed[0, 0] == 1
    spec = InputSpec(d=2)
    tests = [dict(function_class="cosine", L=L, sigma=0.1) for L in (0.5, 8.0)]
    kw = dict(seeds=2, n_tune=512, tune_seed=21, n_eval=1024, n_curve=256, eval_seed=3)
    tw = tuned_windows(tests, [64], spec, **kw)
    assert tw.oracle.shape == (2, 2, 1) and tw.fixed_w.shape == (2, 1)
    assert np.all(tw.oracle_w[:, 1] > 4 * tw.oracle_w[:, 0])                  # narrower window at the larger L
    assert np.all((tw.fixed / tw.oracle).max(1) > 1.3)                        # one window cannot suit both
    alone = tuned_windows(tests[1:], [64], spec, **kw)
    np.testing.assert_array_equal(alone.fixed, alone.oracle)
    np.testing.assert_array_equal(alone.fixed_curve, alone.oracle_curve)


def test_halfwidth_in_degrees_matches_the_closed_form():
    """For M = w I the softmax half-width is arccos(1 - ln 2 / w); computed in blocks as in one call."""
    from softmax_icl.figures.window_adaptation.analysis import halfwidth_degrees
    from softmax_icl.metrics import window_halfwidth

    w = np.array([2.0, 10.0, 80.0])
    M = w[:, None, None] * np.eye(2)
    np.testing.assert_allclose(halfwidth_degrees("softmax", M[None], max_units=2)[0],
                               np.degrees(np.arccos(1 - np.log(2) / w)), atol=0.05)
    rng = np.random.default_rng(1)
    R = rng.standard_normal((2, 5, 2, 2)) * 3
    np.testing.assert_allclose(halfwidth_degrees("softmax", R, max_units=3),
                               np.degrees(window_halfwidth("softmax", R.reshape(-1, 2, 2))).reshape(2, 5))


def _analysis(soft: float, fixed: float, linear: float, seeds: int = 15, steps: int = 11):
    """A synthetic analysis: per seed, the softmax unit's error is ``soft`` times the oracle's, the fixed window's
    ``fixed`` times, the linear unit's ``linear`` times (with a little seed noise); windows narrow by 2x per step of
    L and widen by 2x with the noise."""
    from softmax_icl.figures.window_adaptation.analysis import WindowAnalysis
    from softmax_icl.figures.window_adaptation.sweeps import Setting

    rng = np.random.default_rng(0)
    sets = [Setting(0.5, 0.1), Setting(2.0, 0.1), Setting(8.0, 0.1), Setting(2.0, 1.0)]
    ns = [4, 16, 64]
    shape = (2, len(sets), len(ns), seeds)
    oracle = np.full(shape, 0.01) * rng.uniform(0.98, 1.02, shape)
    noise = lambda: rng.uniform(0.97, 1.03, shape)  # noqa: E731
    err = {"softmax": oracle * soft * noise(), "linear": oracle * linear * noise(), "untrained": np.full(shape, 0.5)}
    curve = {m: np.stack([err[m]] * steps) for m in ("softmax", "linear")}
    hw = np.array([40.0, 20.0, 10.0, 40.0])[None, :, None] * np.ones((steps, 1, seeds)) * rng.uniform(
        0.95, 1.05, (steps, len(sets), seeds))
    hw[0] = 180.0
    return WindowAnalysis(
        families=("cosine", "cosine_centered"), settings=sets, n=ns, steps=np.linspace(0, 1000, steps),
        curve_tasks=256, halfwidth={"softmax": np.stack([hw[-1]] * 2), "linear": np.full((2, len(sets), seeds), 60.0)},
        halfwidth_history=hw, w={m: np.ones((2, len(sets), seeds)) for m in MODELS}, error=err, curve=curve,
        oracle=oracle, oracle_w=np.ones(shape), fixed=oracle * fixed, fixed_w=np.ones((len(ns), seeds)),
        uniform=np.full(shape[:-1], 0.5), baseline_curve={"oracle": oracle, "fixed": oracle * fixed,
                                                          "uniform": np.full(shape[:-1], 0.5)})


MODELS = ("softmax", "linear")


@pytest.mark.parametrize("soft,fixed,want,want_fixed", [(1.05, 3.0, "pass", "fail"), (2.0, 3.0, "fail", "fail"),
                                                        (1.05, 1.05, "pass", "pass")])
def test_the_checks_are_decided_per_seed_and_rivals_through_the_same_test(tmp_path, soft, fixed, want, want_fixed):
    """check_claims on a synthetic analysis: the near-oracle claim passes within 25 % of the oracle and fails at twice
    it; a fixed window 3x worse in every cell is rejected, one as good as the oracle is not; every check carries its
    15 seeds and the claims their trajectories; the untrained baselines fail."""
    from softmax_icl.book.run import Run
    from softmax_icl.figures.window_adaptation.claims import check_claims

    run = Run(FIGURES["window_adaptation"], "smoke", "cpu", use_cache=False, output_dir=str(tmp_path))
    check_claims(run, _analysis(soft, fixed, linear=5.0))
    by = {c.id: c for c in run.claims}
    assert by["softmax-near-oracle"].status == want
    assert by["softmax-near-oracle-fixed-window"].status == want_fixed
    assert by["linear-does-not-adapt"].status == "pass" and by["softmax-near-oracle-control"].status == "fail"
    assert by["window-narrows-with-L"].status == "pass" and by["window-widens-with-sigma"].status == "pass"
    for cid in ("window-narrows-with-L-untrained", "window-widens-with-sigma-untrained",
                "softmax-beats-linear-untrained"):
        assert by[cid].status == "fail", cid
    assert all(c.decision["seeds"] == 15 for c in run.claims)
    assert all("trajectory" in cell for c in run.claims if c.kind == "claim" for cell in c.decision["cells"])
    assert len(by["softmax-near-oracle"].decision["cells"]) == 2 * 4 * 2          # families x settings x n >= 16


def test_cell_list_groups_context_lengths():
    from softmax_icl.figures.window_adaptation.claims import cell_list

    assert cell_list(["L = 2, n = 8", "L = 2, n = 16", "L = 8, n = 4", "one"]) == "L = 2: n = 8, 16; L = 8: n = 4; one"
