"""Scaling of the window ||M|| (Collins et al. 2024, Figure 3; Theorem 3.4; covariance lemma).

Five batched pretraining programs (one per input distribution / parameterisation / context grid):

* ``iso``: classes x [(L, sigma) for L in L_values] + [(L_sigma, s) for s in sigma_values] x seeds, n fixed;
* ``n``: ReLU x [(L, sigma) for L in n_sweep_L] x n_values x seeds (one task stream per context length);
* ``noniso``: classes x L_values x seeds with the SPEC's non-isotropic inputs;
* ``whitened``: the same with tasks that are functions of the whitened input (the covariance lemma's symmetry);
* ``full``: classes x full_L x seeds with full W_K, W_Q, W_V on raw tokens.

Every trained unit is compared with the population optimum of its own setting, found by a Monte Carlo scan
of the loss over ``M = w I`` (or ``w Sigma^{-p}``) that evaluates all ``w`` (and ``p``) in one stacked program
(:func:`softmax_icl.theory.loss_terms`).
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np

from ... import theory as th
from ...metrics import spectral_norm
from ...records import Run
from ...tasks import InputSpec, nonisotropic_covariance
from ...training import Sweep, SweepResult

# Thresholds of the claim checks (stated in each claim's text)
W_RATIO_TOL = 1.25          # trained w within this factor of the population optimum
LOSS_EXCESS_TOL = 0.05      # trained unit's population loss at most 5% above the best scanned
COV_DIST_TOL = 0.10         # ||M/||M|| - Sigma^-1/||Sigma^-1|| ||_F
COV_EXPONENT_TOL = 0.10     # |p - 1| for M ~ Sigma^-p, and |p_trained - p_population|
L_OVER_SIGMA_TOL = 0.05     # relative difference of trained w at equal L / sigma (ReLU)
BLOCK_TOL = {"label_row": 0.10, "xblock": 0.20, "value": 0.10}
SLOPE_WINDOW = 0.25 * math.log(10)   # local exponents of the population curves: fit over +-1/4 decade
SCAN_CHUNK = 512            # tasks per chunk of the Monte Carlo scans (fixed so paired evaluations share draws)
P_GRID = np.round(np.linspace(0.0, 1.5, 13), 4)     # exponents p of the scan over M = w Sigma^-p
WHITENED_L = (0.1, 0.3, 1.0, 3.0)                    # L of the whitened-task units (subset of L_values)
SETTINGS = ("isotropic", "nonisotropic", "nonisotropic_whitened")
SETTING_LABEL = {"isotropic": "isotropic", "nonisotropic": "non-isotropic",
                 "nonisotropic_whitened": "non-isotropic, whitened tasks"}
CLASS_COLORS = {"relu": "#1f77b4", "cosine": "#ff7f0e"}


# -- sweeps ---------------------------------------------------------------------------------------

def _sweep(cfg: dict, **kw) -> Sweep:
    base = dict(d=cfg["d"], seeds=cfg["seeds"], steps=cfg["steps"], batch_size=cfg["batch_size"], lr=cfg["lr"],
                data_seed=cfg["data_seed"], init_seed=cfg["init_seed"], log_every=max(1, cfg["steps"] // 50),
                param="KQ")
    base.update(kw)
    return Sweep(**base)


def iso_pairs(cfg: dict) -> tuple:
    pairs = [(L, cfg["sigma"]) for L in cfg["L_values"]]
    pairs += [(cfg["L_sigma"], s) for s in cfg["sigma_values"] if (cfg["L_sigma"], s) not in pairs]
    return tuple(pairs)


def whitened_L(cfg: dict) -> tuple:
    Ls = tuple(L for L in cfg["L_values"] if any(math.isclose(L, w) for w in WHITENED_L))
    return Ls if len(Ls) >= 2 else tuple(cfg["L_values"])


def sweeps(cfg: dict) -> dict[str, Sweep]:
    classes, n, sigma = tuple(cfg["classes"]), (cfg["n"],), (cfg["sigma"],)
    return {
        "iso": _sweep(cfg, classes=classes, pairs=iso_pairs(cfg), n=n),
        "n": _sweep(cfg, classes=("relu",), pairs=tuple((L, cfg["sigma"]) for L in cfg["n_sweep_L"]),
                    n=tuple(cfg["n_values"])),
        "noniso": _sweep(cfg, classes=classes, L=tuple(cfg["L_values"]), sigma=sigma, n=n,
                         input_dist="nonisotropic"),
        "whitened": _sweep(cfg, classes=classes, L=whitened_L(cfg), sigma=sigma, n=n,
                           input_dist="nonisotropic_whitened"),
        "full": _sweep(cfg, classes=classes, L=tuple(cfg["full_L"]), sigma=sigma, n=n, param="full",
                       lr=cfg["lr_full"]),
    }


def train(run: Run) -> dict[str, SweepResult]:
    """Every sweep of the figure, each one batched program, through the cache."""
    return {k: run.train(f"train_{k}", s) for k, s in sweeps(run.cfg).items()}


# -- analysis -------------------------------------------------------------------------------------

def final_M(res: SweepResult, frac: float) -> np.ndarray:
    """Mean of the logged M over the last ``frac`` of training (at least the last log)."""
    T = len(res.log_steps)
    k = max(1, int(round(frac * (T - 1))))
    return res.M_history[-k:].mean(0)


def w_grid(cfg: dict) -> np.ndarray:
    return np.geomspace(cfg["w_min"], cfg["w_max"], cfg["scan_points"])


def _spec(cfg: dict, setting: str) -> InputSpec:
    return InputSpec(d=cfg["d"], input_dist=setting)


def _row(c: dict) -> dict:
    return dict(function_class=c["function_class"], L=c["L"], n=c["n"])


def _unique_rows(configs: list[dict]) -> list[dict]:
    seen, out = set(), []
    for c in configs:
        key = (c["function_class"], float(c["L"]), int(c["n"]))
        if key not in seen:
            seen.add(key)
            out.append(_row(c))
    return out


def _row_index(rows: list[dict], c: dict) -> int:
    for i, r in enumerate(rows):
        if r["function_class"] == c["function_class"] and math.isclose(r["L"], c["L"]) and r["n"] == c["n"]:
            return i
    raise KeyError(c)


def population_scans(run: Run, res: dict[str, SweepResult], Ms: dict[str, np.ndarray]) -> dict:
    """Monte Carlo scans (cached): the loss over M = w I / w Sigma^-p for every trained setting, the trained
    units' own loss on the same draws, and the ReLU curves w*(n L^2 / sigma^2) at the n of ``n_curve``."""
    cfg = run.cfg
    wg = w_grid(cfg)
    d = cfg["d"]
    kw = dict(n_tasks=cfg["scan_tasks"], seed=cfg["eval_seed"] + 200, device=run.device, chunk=SCAN_CHUNK)

    def compute():
        out = {}
        # isotropic: every (class, L, n) trained, plus the trained units on the same draws
        iso_cfgs = res["iso"].configs + res["n"].configs
        rows = _unique_rows(iso_cfgs)
        n_draw = max(r["n"] for r in rows)
        spec = _spec(cfg, "isotropic")
        out["iso_rows"] = rows
        out["iso_scan"] = th.loss_terms(spec, rows, wg[:, None, None] * np.eye(d), n_draw=n_draw, **kw)
        out["iso_trained"] = th.loss_terms(spec, [_row(c) for c in iso_cfgs],
                                           np.concatenate([Ms["iso"], Ms["n"]]), paired=True, n_draw=n_draw, **kw)
        # ReLU population curves at larger n (L = 1; other L follow from s = n L^2 / sigma^2)
        crow = [dict(function_class="relu", L=1.0, n=n) for n in cfg["n_curve"]]
        out["curve_rows"] = crow
        out["curve_scan"] = th.loss_terms(spec, crow, wg[:, None, None] * np.eye(d),
                                          **{**kw, "chunk": None})      # not paired: memory-bounded chunks
        # non-isotropic settings: M = w Sigma^-p for every p of P_GRID, and the trained units
        cov = nonisotropic_covariance(d).numpy()
        wsub = wg[(wg >= 0.1) & (wg <= 100)][::2]
        mats = np.concatenate([wsub[:, None, None] * np.diag(cov ** -p) for p in P_GRID])
        out["cov_w"] = wsub
        for key, setting in (("noniso", "nonisotropic"), ("whitened", "nonisotropic_whitened")):
            rows = _unique_rows(res[key].configs)
            spec = _spec(cfg, setting)
            out[f"{key}_rows"] = rows
            out[f"{key}_scan"] = th.loss_terms(spec, rows, mats, **kw)
            out[f"{key}_trained"] = th.loss_terms(spec, [_row(c) for c in res[key].configs], Ms[key],
                                                  paired=True, **kw)
        # the full-parameter units: their x-block as M, on the isotropic draws
        out["full_trained"] = th.loss_terms(_spec(cfg, "isotropic"), [_row(c) for c in res["full"].configs],
                                            Ms["full"], paired=True, n_draw=n_draw, **kw)
        return out

    key = {"train": {k: r.sweep for k, r in res.items()}, "scan_tasks": cfg["scan_tasks"], "w": wg.tolist(),
           "seed": kw["seed"], "n_curve": cfg["n_curve"], "p": P_GRID.tolist(), "chunk": SCAN_CHUNK,
           "average_last": cfg["average_last"]}
    return run.cached("population_scan", key, compute)


def _seed_mean(values: np.ndarray, configs: list[dict], keys: list[tuple]) -> np.ndarray:
    """Mean over seeds of ``values`` for each key (function_class, L, sigma, n)."""
    out = []
    for cls, L, s, n in keys:
        idx = [i for i, c in enumerate(configs) if c["function_class"] == cls and math.isclose(c["L"], L)
               and math.isclose(c["sigma"], s) and c["n"] == n]
        out.append(np.mean(values[idx]))
    return np.array(out)


def analyse(run: Run, res: dict[str, SweepResult]) -> dict:
    """Window scales, population optima, regimes, slope fits and covariance/block-form measurements."""
    cfg = run.cfg
    d, wg = cfg["d"], w_grid(cfg)
    cov = nonisotropic_covariance(d).numpy()
    base = {"iso": np.eye(d), "n": np.eye(d), "full": np.eye(d), "noniso": th.window_base(d, "nonisotropic"),
            "whitened": th.window_base(d, "nonisotropic")}
    Ms = {k: final_M(r, cfg["average_last"]) for k, r in res.items()}
    scans = population_scans(run, res, Ms)
    a = {"cfg": cfg, "w_grid": wg, "scans": scans, "M": Ms, "cov": cov}

    # trained window scales, norms, population optimum of each trained unit
    units = {}
    for key in ("iso", "n", "noniso", "whitened", "full"):
        cfgs = res[key].configs
        w, resid = th.best_multiple(Ms[key], base[key])
        sig = np.array([c["sigma"] for c in cfgs])
        u = {"configs": cfgs, "w": w, "resid": resid, "norm": spectral_norm(Ms[key]),
             "norm_history": spectral_norm(res[key].M_history), "steps": res[key].log_steps,
             "snr": th.snr([c["n"] for c in cfgs], [c["L"] for c in cfgs], sig)}
        if key in ("iso", "n", "full"):
            sc, rows = scans["iso_scan"], scans["iso_rows"]
            ri = np.array([_row_index(rows, c) for c in cfgs])
            loss = sc.bias[ri] + sig[:, None] ** 2 * sc.noise[ri]
            u["w_pop"], u["loss_pop"] = th.refine_minimum(wg, loss)
            u["norm_pop"] = u["w_pop"]
            if key == "full":
                u["loss_trained"] = scans["full_trained"].loss(sig)
            else:   # the isotropic and n-sweep units were evaluated together, in that order
                n_iso = len(res["iso"].configs)
                sl = slice(0, n_iso) if key == "iso" else slice(n_iso, None)
                both = np.array([c["sigma"] for c in res["iso"].configs + res["n"].configs])
                u["loss_trained"] = scans["iso_trained"].loss(both)[sl]
            # saturation level of the ReLU window at this n: argmin of the bias (noise -> 0)
            u["w_sat"] = np.array([th.saturation_w(wg, sc.bias[_row_index(rows, c)]) for c in cfgs])
        else:
            sc, rows = scans[f"{key}_scan"], scans[f"{key}_rows"]
            ri = np.array([_row_index(rows, c) for c in cfgs])
            W = len(scans["cov_w"])
            loss = (sc.bias[ri] + sig[:, None] ** 2 * sc.noise[ri]).reshape(len(cfgs), len(P_GRID), W)
            best_w, best_l = th.refine_minimum(scans["cov_w"], loss)                       # (C, P)
            p_star, _ = th.refine_minimum(P_GRID, best_l, log=False)
            j1 = int(np.argmin(np.abs(P_GRID - 1.0)))
            u["w_pop"], u["loss_pop_p1"] = best_w[:, j1], best_l[:, j1]
            u["loss_pop"] = best_l.min(-1)
            u["loss_by_p"] = best_l
            u["p_star"] = p_star
            jb = best_l.argmin(-1)
            u["norm_pop"] = np.array([bw[j] * np.max(cov ** -P_GRID[j]) for bw, j in zip(best_w, jb)])
            u["p_trained"] = th.covariance_exponent(Ms[key], cov)
            # what the trained exponent costs in the population: loss at p_trained (best w) over the minimum
            u["p_cost"] = np.array([np.interp(pt, P_GRID, bl) / bl.min() - 1 if np.isfinite(pt) else np.nan
                                    for pt, bl in zip(u["p_trained"], best_l)])
            u["dist_cov"] = th.normalized_distance(Ms[key], base[key])
            u["dist_iso"] = th.normalized_distance(Ms[key], np.eye(d))
            u["loss_trained"] = scans[f"{key}_trained"].loss(sig)
        units[key] = u
    a["units"] = units
    a["block"] = th.block_form(res["full"].final_state["WK"], res["full"].final_state["WQ"],
                               res["full"].final_state["WV"])
    a["WV"] = res["full"].final_state["WV"]

    # regimes: population optimum inside [regime_w, regime_saturation * w_sat(n)] (ReLU, isotropic)
    for key in ("iso", "n"):
        u = units[key]
        u["in_regime"] = np.array([c["function_class"] == "relu" for c in u["configs"]]) & \
            (u["w_pop"] >= cfg["regime_w"]) & (u["w_pop"] < cfg["regime_saturation"] * u["w_sat"])

    # population curves w*(s) at the n of n_curve (ReLU, L = 1) and their local exponents
    s_grid = np.geomspace(1.0, 1e8, 241)
    curves = {}
    cs = scans["curve_scan"]
    for i, r in enumerate(scans["curve_rows"]):
        n = r["n"]
        w_star = th.optimal_w_curve(wg, cs.bias[i], cs.noise[i], s_grid, n)
        w_sat = th.saturation_w(wg, cs.bias[i])
        inside = (w_star >= cfg["regime_w"]) & (w_star < cfg["regime_saturation"] * w_sat)
        curves[n] = {"s": s_grid, "w": w_star, "w_sat": w_sat,
                     "slope": th.local_slopes(s_grid, w_star, half_width=SLOPE_WINDOW),
                     "inside": inside,
                     "bounds": (s_grid[inside].min(), s_grid[inside].max()) if inside.any() else (np.nan, np.nan)}
        if inside.sum() >= 3:
            curves[n]["fit"] = th.fit_loglog(s_grid[inside], w_star[inside])
    # the same curves at the n of the trained units (from the ReLU rows of the isotropic scan)
    rows, sc = scans["iso_rows"], scans["iso_scan"]
    trained_curves = {}
    for n in sorted({c["n"] for c in units["iso"]["configs"] + units["n"]["configs"]}):
        cand = [k for k, r in enumerate(rows) if r["function_class"] == "relu" and r["n"] == n]
        i = min(cand, key=lambda k: abs(math.log(rows[k]["L"])))      # the row with L closest to 1
        L = rows[i]["L"]
        trained_curves[n] = {"s": s_grid, "w": th.optimal_w_curve(wg, sc.bias[i] / L**2, sc.noise[i], s_grid, n),
                             "w_sat": th.saturation_w(wg, sc.bias[i])}
    a["curves"], a["trained_curves"] = curves, trained_curves

    # slope fits (ReLU, isotropic, inside the regime), per variable and pooled against s = n L^2 / sigma^2
    a["fits"] = slope_fits(a)
    return a


def _sweep_index(u: dict, cls: str, sweep: str, cfg: dict) -> np.ndarray:
    """Indices of the units of one sweep direction: 'L' (sigma fixed), 'sigma' (L = L_sigma) of the iso sweep."""
    out = []
    for i, c in enumerate(u["configs"]):
        if c["function_class"] != cls:
            continue
        if sweep == "L" and math.isclose(c["sigma"], cfg["sigma"]):
            out.append(i)
        elif sweep == "sigma" and math.isclose(c["L"], cfg["L_sigma"]):
            out.append(i)
    return np.array(out, dtype=int)


def slope_fits(a: dict) -> dict:
    cfg, u_iso, u_n = a["cfg"], a["units"]["iso"], a["units"]["n"]
    d = cfg["d"]
    fits = {}

    def add(name, variable, x, w, w_pop, groups=None):
        ok = (w > 0) & np.isfinite(w)
        g = None if groups is None else np.asarray(groups)[ok]
        entry = {"variable": variable, "x": x, "w": w, "w_pop": w_pop, "n_points": int(ok.sum()), "groups": groups,
                 "ranges": {v: th.theorem34_slope_range(d, variable, v) for v in th.THEOREM_34_VERSIONS}}
        if np.unique(x[ok]).size >= 2 and ok.sum() > (1 if g is None else len(set(g))):
            entry["fit"] = th.fit_loglog(x[ok], w[ok], groups=None if g is None else list(g))
            entry["fit_pop"] = th.fit_loglog(x[ok], w_pop[ok], groups=None if g is None else list(g))
        fits[name] = entry

    for sweep, var in (("L", "L"), ("sigma", "sigma")):
        idx = _sweep_index(u_iso, "relu", sweep, cfg)
        idx = idx[u_iso["in_regime"][idx]]
        x = np.array([u_iso["configs"][i][var] for i in idx], dtype=float)
        add(var, var, x, u_iso["w"][idx], u_iso["w_pop"][idx])
    idx = np.nonzero(u_n["in_regime"])[0]
    add("n", "n", np.array([u_n["configs"][i]["n"] for i in idx], dtype=float), u_n["w"][idx], u_n["w_pop"][idx],
        groups=[u_n["configs"][i]["L"] for i in idx])       # one constant per L: w ~ C(L) n^slope
    # pooled: every ReLU unit inside the regime, against s
    ii = np.nonzero(u_iso["in_regime"])[0]
    add("snr", "snr", np.concatenate([u_iso["snr"][ii], u_n["snr"][idx]]),
        np.concatenate([u_iso["w"][ii], u_n["w"][idx]]), np.concatenate([u_iso["w_pop"][ii], u_n["w_pop"][idx]]))
    return fits


# -- claims ---------------------------------------------------------------------------------------

def _panels(a: dict) -> list[tuple[str, str]]:
    return [(key, cls) for key in ("iso", "noniso") for cls in a["cfg"]["classes"]]


def L_trend(a: dict, key: str, cls: str) -> dict:
    """Seed-mean final ||M||_2 over the L sweep of one panel, its population counterpart and the regime boundary:
    the first L at which the population-optimal ||M*||_2 reaches ``regime_saturation`` of its maximum."""
    cfg, u = a["cfg"], a["units"][key]
    Ls = np.array(cfg["L_values"])
    keys = [(cls, L, cfg["sigma"], cfg["n"]) for L in Ls]
    norm = _seed_mean(u["norm"], u["configs"], keys)
    w = _seed_mean(u["w"], u["configs"], keys)
    pop = _seed_mean(u["norm_pop"], u["configs"], keys)
    b = int(np.argmax(pop >= cfg["regime_saturation"] * pop.max()))
    ratios = norm[1:] / norm[:-1]
    return {"L": Ls, "norm": norm, "w": w, "norm_pop": pop, "boundary": b, "ratios_in": ratios[:b],
            "snr_boundary": float(th.snr(cfg["n"], Ls[b], cfg["sigma"]))}


def sigma_trend(a: dict, cls: str) -> dict:
    cfg, u = a["cfg"], a["units"]["iso"]
    sig = np.array(cfg["sigma_values"])
    keys = [(cls, cfg["L_sigma"], s, cfg["n"]) for s in sig]
    w = _seed_mean(u["w"], u["configs"], keys)
    pop = _seed_mean(u["w_pop"], u["configs"], keys)
    sat = pop >= cfg["regime_saturation"] * pop.max()
    b = int(len(sig) - 1 - np.argmax(sat[::-1]))            # last sigma still at the saturated window
    ratios = w[1:] / w[:-1]
    return {"sigma": sig, "w": w, "w_pop": pop, "boundary": b, "ratios_in": ratios[b:]}


def n_trend(a: dict, L: float) -> dict:
    cfg, u = a["cfg"], a["units"]["n"]
    ns = np.array(cfg["n_values"])
    keys = [("relu", L, cfg["sigma"], n) for n in ns]
    w = _seed_mean(u["w"], u["configs"], keys)
    return {"n": ns, "w": w, "w_pop": _seed_mean(u["w_pop"], u["configs"], keys), "ratios": w[1:] / w[:-1]}


def L_over_sigma_pairs(a: dict, cls: str) -> list[tuple[int, int]]:
    """Pairs of isotropic units (same class, n and seed) with equal L / sigma but different L."""
    cf = a["units"]["iso"]["configs"]
    out = []
    for i, c in enumerate(cf):
        for j, e in enumerate(cf):
            if j <= i or c["function_class"] != cls or e["function_class"] != cls or c["seed"] != e["seed"]:
                continue
            if not math.isclose(c["L"], e["L"]) and math.isclose(c["L"] / c["sigma"], e["L"] / e["sigma"],
                                                                 rel_tol=1e-9):
                out.append((i, j))
    return out


def check_claims(run: Run, a: dict) -> None:
    cfg, units, fits = run.cfg, a["units"], a["fits"]
    d = cfg["d"]
    # 1) ||M|| ends larger for larger L in every panel, up to the regime boundary
    worst, notes, beyond = np.inf, [], {}
    for key, cls in _panels(a):
        t = L_trend(a, key, cls)
        r = t["ratios_in"].min() if t["ratios_in"].size else np.inf
        worst = min(worst, r)
        notes.append(f"{cls}/{SETTING_LABEL[_setting(key)]} up to L = {t['L'][t['boundary']]:g}")
        beyond[f"{cls}_{key}"] = {"boundary_L": t["L"][t["boundary"]], "boundary_snr": t["snr_boundary"],
                                  "norm_last_over_boundary": t["norm"][-1] / t["norm"][t["boundary"]],
                                  "pop_last_over_boundary": t["norm_pop"][-1] / t["norm_pop"][t["boundary"]]}
    run.check("norm-grows-with-L", "final ||M||_2 (seed mean) rises at every step of the L grid up to the regime "
              "boundary, in every panel (" + "; ".join(notes) + "); smallest ratio of consecutive norms",
              worst, worst > 1.0, "> 1")
    run.record(L_regime_boundaries=beyond)
    # 2) w falls as sigma grows (isotropic, each class), from the last saturated sigma upwards
    worst, notes = -np.inf, []
    for cls in cfg["classes"]:
        t = sigma_trend(a, cls)
        r = t["ratios_in"].max() if t["ratios_in"].size else -np.inf
        worst = max(worst, r)
        notes.append(f"{cls} from sigma = {t['sigma'][t['boundary']]:g}")
    run.check("w-falls-with-sigma", f"trained w (seed mean, L = {cfg['L_sigma']:g}) falls at every step of the "
              "sigma grid beyond the saturated end (" + "; ".join(notes) + "); largest ratio of consecutive w",
              worst, worst < 1.0, "< 1")
    # 3) w rises with n (ReLU)
    worst = min(n_trend(a, L)["ratios"].min() for L in cfg["n_sweep_L"])
    run.check("w-rises-with-n", f"trained w (ReLU, seed mean) rises at every step of n = {cfg['n_values']} for "
              f"L = {cfg['n_sweep_L']}; smallest ratio of consecutive w", worst, worst > 1.0, "> 1")
    # 4) fitted exponent against both versions of Theorem 3.4
    f = fits["snr"]
    if "fit" in f:
        fit = f["fit"]
        lo_ci, hi_ci = fit.ci()
        for version in ("sketch", "slides"):
            lo, hi = f["ranges"][version]
            ok = hi_ci >= lo and lo_ci <= hi
            run.check(f"exponent-in-{version}-range",
                      f"fitted exponent of trained w against n L^2/sigma^2 (ReLU, {f['n_points']} units inside the "
                      f"regime; 95% CI [{lo_ci:.3f}, {hi_ci:.3f}]) overlaps the {version} range "
                      f"[{lo:.3f}, {hi:.3f}] for d = {d}", fit.slope, ok, "95% CI overlaps the range")
        run.record(exponent=fit.slope, exponent_se=fit.stderr, exponent_population=f["fit_pop"].slope,
                   exponent_supported_by=th.which_version(fit.slope, d),
                   exponent_ranges={v: f["ranges"][v] for v in th.THEOREM_34_VERSIONS})
    else:
        run.check("exponent-in-sketch-range", "fitted exponent against n L^2/sigma^2: fewer than two distinct "
                  "settings inside the regime", float("nan"), False, "at least 2 settings inside the regime")
    # 5) trained w close to the population optimum; trained loss close to the best scanned loss
    ratios, excess = [], []
    for key in ("iso", "n", "whitened"):
        u = units[key]
        ok = u["w_pop"] >= cfg["regime_w"]
        r = u["w"][ok] / u["w_pop"][ok]
        ratios.append(np.maximum(r, 1 / r))
    for key in ("iso", "n", "noniso", "whitened"):
        u = units[key]
        excess.append(u["loss_trained"] / u["loss_pop"] - 1)
    worst_ratio, worst_excess = np.concatenate(ratios).max(), np.concatenate(excess).max()
    run.check("trained-w-near-optimum", f"worst factor between trained w and the population-optimal w (isotropic "
              f"and whitened units with optimal w >= {cfg['regime_w']:g})", worst_ratio,
              worst_ratio <= W_RATIO_TOL, f"<= {W_RATIO_TOL}")
    run.check("trained-loss-near-optimum", "worst excess of a trained unit's population loss over the best scanned "
              "M = w I (isotropic) or w Sigma^-p (non-isotropic), every unit", worst_excess,
              worst_excess <= LOSS_EXCESS_TOL, f"<= {LOSS_EXCESS_TOL:.0%}")
    # 6) ReLU: w depends on L and sigma only through L / sigma
    pairs = L_over_sigma_pairs(a, "relu")
    if pairs:
        w = units["iso"]["w"]
        rel = max(abs(w[i] - w[j]) / max(abs(w[i]), abs(w[j])) for i, j in pairs)
        run.check("relu-depends-on-L-over-sigma", f"ReLU: largest relative difference of trained w between "
                  f"{len(pairs)} pairs of units with equal L/sigma", rel, rel <= L_OVER_SIGMA_TOL,
                  f"<= {L_OVER_SIGMA_TOL}")
    # 7) covariance lemma
    for key, label in (("whitened", "tasks of the whitened input (lemma's symmetry holds)"),
                       ("noniso", "SPEC tasks, direction uniform in x (symmetry fails)")):
        u = units[key]
        ok = u["w_pop"] >= cfg["regime_w"]
        dist, dp = u["dist_cov"][ok].max(), np.abs(u["p_trained"][ok] - 1).max()
        run.check(f"covariance-lemma-{key}", f"M ∝ Sigma^-1 for {label}: largest ||M/||M|| - Sigma^-1/||Sigma^-1|| "
                  f"||_F over {int(ok.sum())} units with optimal w >= {cfg['regime_w']:g} (largest |p - 1| of "
                  f"M ~ Sigma^-p: {dp:.3f})", dist, dist <= COV_DIST_TOL and dp <= COV_EXPONENT_TOL,
                  f"<= {COV_DIST_TOL} and |p - 1| <= {COV_EXPONENT_TOL}")
    gaps, costs, where = [], [], []
    for key in ("whitened", "noniso"):
        u = units[key]
        ok = np.nonzero(u["w_pop"] >= cfg["regime_w"])[0]
        gaps.append(np.abs(u["p_trained"][ok] - u["p_star"][ok]))
        costs.append(u["p_cost"][ok])
        where += [f"{u['configs'][i]['function_class']} L = {u['configs'][i]['L']:g}" for i in ok]
    gaps, costs = np.concatenate(gaps), np.concatenate(costs)
    gap = gaps.max()
    bad = sorted({w for w, g in zip(where, gaps) if g > COV_EXPONENT_TOL})
    run.check("covariance-exponent-matches-population", "largest |p_trained - p*| between the exponent of the "
              "trained M ~ Sigma^-p and the population-optimal exponent, both non-isotropic settings, units with "
              f"optimal w >= {cfg['regime_w']:g} (beyond tolerance: {', '.join(bad) or 'none'}; population loss at "
              f"the trained exponent exceeds that at p* by at most {100 * np.nanmax(costs):.1f}%)", gap,
              gap <= COV_EXPONENT_TOL, f"<= {COV_EXPONENT_TOL}")
    run.record(covariance_exponent_cost=costs)
    # 8) full W_K, W_Q, W_V: block form
    b = a["block"]
    uf = units["full"]
    row, xb, val = b["label_row_ratio"].max(), b["xblock_identity_distance"].max(), np.abs(b["value_label"] - 1).max()
    r = uf["w"] / uf["w_pop"]
    wr = np.maximum(r, 1 / r).max()
    run.check("full-weights-block-form", f"full W_K, W_Q, W_V: largest label-row mass / x-block mass of W_K^T W_Q "
              f"(x-block distance from w I: {xb:.3f}; |W_V label weight - 1|: {val:.3f}; factor to optimal w: "
              f"{wr:.3f})", row, row <= BLOCK_TOL["label_row"] and xb <= BLOCK_TOL["xblock"]
              and val <= BLOCK_TOL["value"] and wr <= W_RATIO_TOL,
              f"<= {BLOCK_TOL['label_row']}, x-block distance <= {BLOCK_TOL['xblock']}, |v - 1| <= "
              f"{BLOCK_TOL['value']}, factor <= {W_RATIO_TOL}")
    run.record(**key_numbers(a))


def key_numbers(a: dict) -> dict:
    cfg, units = a["cfg"], a["units"]
    out = {"L_values": cfg["L_values"], "final_norm": {}, "population_norm": {}}
    for key, cls in _panels(a):
        t = L_trend(a, key, cls)
        out["final_norm"][f"{cls}_{key}"] = t["norm"]
        out["population_norm"][f"{cls}_{key}"] = t["norm_pop"]
    out["sigma_sweep_w"] = {cls: sigma_trend(a, cls)["w"] for cls in cfg["classes"]}
    out["n_sweep_w"] = {str(L): n_trend(a, L)["w"] for L in cfg["n_sweep_L"]}
    out["fits"] = {k: {"slope": f["fit"].slope, "stderr": f["fit"].stderr, "population_slope": f["fit_pop"].slope,
                       "n_points": f["n_points"]} for k, f in a["fits"].items() if "fit" in f}
    out["regime_s_bounds"] = {str(n): c["bounds"] for n, c in a["curves"].items()}
    out["saturation_w"] = {str(n): c["w_sat"] for n, c in a["curves"].items()}
    out["covariance"] = {k: {"dist_sigma_inv": units[k]["dist_cov"], "dist_identity": units[k]["dist_iso"],
                             "p_trained": units[k]["p_trained"], "p_population": units[k]["p_star"]}
                         for k in ("noniso", "whitened")}
    b = a["block"]
    out["full_block"] = {k: b[k] for k in ("w", "xblock_identity_distance", "label_row_ratio", "label_col_ratio",
                                           "offblock_ratio", "value_label", "value_x_ratio")}
    return out


# -- printed tables (stable for nbval) --------------------------------------------------------------

def _row_fmt(vals, width=7) -> str:
    return "".join(f"{v:>{width}.3g}" for v in vals)


def key_numbers_table(a: dict) -> str:
    cfg, units = a["cfg"], a["units"]
    Ls = cfg["L_values"]
    lines = [f"Final ||M||_2 (seed mean; trained / population optimum), n = {cfg['n']}, sigma = {cfg['sigma']:g}",
             f"{'L':<28}" + _row_fmt(Ls)]
    for key, cls in _panels(a):
        t = L_trend(a, key, cls)
        name = f"{cls}, {SETTING_LABEL['isotropic' if key == 'iso' else 'nonisotropic']}"
        lines.append(f"{name + ' trained':<28}" + _row_fmt(t["norm"]))
        lines.append(f"{name + ' optimum':<28}" + _row_fmt(t["norm_pop"]))
        lines.append(f"{'':<28}regime boundary L = {t['L'][t['boundary']]:g} (n L^2/sigma^2 = "
                     f"{t['snr_boundary']:.3g})")
    lines.append("")
    lines.append(f"Trained w against sigma (L = {cfg['L_sigma']:g}, n = {cfg['n']})")
    lines.append(f"{'sigma':<28}" + _row_fmt(cfg["sigma_values"]))
    for cls in cfg["classes"]:
        t = sigma_trend(a, cls)
        lines.append(f"{cls + ' trained':<28}" + _row_fmt(t["w"]))
        lines.append(f"{cls + ' optimum':<28}" + _row_fmt(t["w_pop"]))
    lines.append(f"Trained w against n (ReLU, sigma = {cfg['sigma']:g})")
    lines.append(f"{'n':<28}" + _row_fmt(cfg["n_values"]))
    for L in cfg["n_sweep_L"]:
        t = n_trend(a, L)
        lines.append(f"{f'L = {L:g} trained':<28}" + _row_fmt(t["w"]))
        lines.append(f"{f'L = {L:g} optimum':<28}" + _row_fmt(t["w_pop"]))
    lines.append("")
    lines.append("Population curves (ReLU): theory regime in n L^2/sigma^2 and noiseless saturation of w")
    for n, c in a["curves"].items():
        lo, hi = c["bounds"]
        fit = c.get("fit")
        lines.append(f"  n = {n:<5} regime s in [{lo:.3g}, {hi:.3g}], w_sat = {c['w_sat']:.3g}, population exponent "
                     f"in regime = {fit.slope:.3f}" if fit else f"  n = {n:<5} no regime")
    lines.append("")
    lines.append("Log-log slopes of trained w inside the regime (ReLU, isotropic)")
    lines.append(f"  {'against':<10}{'units':>6}{'slope':>8}{'± s.e.':>8}{'optimum':>9}   sketch range    slides range")
    for k, f in a["fits"].items():
        rs, rl = f["ranges"]["sketch"], f["ranges"]["slides"]
        if "fit" not in f:
            lines.append(f"  {k:<10}{f['n_points']:>6}   (too few settings inside the regime)")
            continue
        lines.append(f"  {k:<10}{f['n_points']:>6}{f['fit'].slope:>8.3f}{f['fit'].stderr:>8.3f}"
                     f"{f['fit_pop'].slope:>9.3f}   [{rs[0]:.3f}, {rs[1]:.3f}]  [{rl[0]:.3f}, {rl[1]:.3f}]")
    lines.append("")
    lines.append("Covariance lemma: distance of normalised M to Sigma^-1 and to I, exponent p of M ~ Sigma^-p")
    for key in ("noniso", "whitened"):
        u = units[key]
        for cls in cfg["classes"]:
            idx = [i for i, c in enumerate(u["configs"]) if c["function_class"] == cls and c["seed"] == 0]
            for i in idx:
                c = u["configs"][i]
                lines.append(f"  {SETTING_LABEL[_setting(key)]:<31}{cls:<7}L = {c['L']:<6g} d(Sigma^-1) = "
                             f"{u['dist_cov'][i]:.3f}  d(I) = {u['dist_iso'][i]:.3f}  p = {u['p_trained'][i]:.2f}  "
                             f"p* = {u['p_star'][i]:.2f}")
    lines.append("")
    b = a["block"]
    lines.append("Full W_K, W_Q, W_V: block form of W_K^T W_Q and the label row of W_V")
    for i, c in enumerate(units["full"]["configs"]):
        lines.append(f"  {c['function_class']:<7}L = {c['L']:<5g} seed {c['seed']}: w = {b['w'][i]:.3g} "
                     f"(optimum {units['full']['w_pop'][i]:.3g}), x-block distance from w I = "
                     f"{b['xblock_identity_distance'][i]:.3f}, label row / x-block = {b['label_row_ratio'][i]:.3f}, "
                     f"label column / x-block = {b['label_col_ratio'][i]:.3f}, W_V label weight = "
                     f"{b['value_label'][i]:.3f}")
    return "\n".join(lines)


def _setting(key: str) -> str:
    return {"iso": "isotropic", "n": "isotropic", "full": "isotropic", "noniso": "nonisotropic",
            "whitened": "nonisotropic_whitened"}[key]


# -- plots ----------------------------------------------------------------------------------------

def _L_colors(Ls):
    return plt.cm.viridis(np.linspace(0, 0.92, len(Ls)))


def plot_training(run: Run, a: dict):
    """||M||_2 against pretraining step, one curve per L; panels class x input distribution."""
    cfg = run.cfg
    Ls = cfg["L_values"]
    panels = _panels(a)
    fig, axes = plt.subplots(2, len(cfg["classes"]), figsize=(4.6 * len(cfg["classes"]), 7.0), sharex=True,
                             squeeze=False)
    colors = _L_colors(Ls)
    for ax, (key, cls) in zip(axes.ravel(), panels):
        u = a["units"][key]
        t = L_trend(a, key, cls)
        for L, col, pop in zip(Ls, colors, t["norm_pop"]):
            idx = [i for i, c in enumerate(u["configs"]) if c["function_class"] == cls and math.isclose(c["L"], L)
                   and math.isclose(c["sigma"], cfg["sigma"])]
            h = u["norm_history"][:, idx].mean(1)
            ax.plot(u["steps"], h, color=col, lw=1.3, label=f"L = {L:g}")
            ax.plot([u["steps"][-1] * 1.02], [pop], marker="<", color=col, ms=6, clip_on=False)
        ax.set(yscale="log", title=f"{cls}, {SETTING_LABEL[_setting(key)]} inputs", xlabel="pretraining step",
               ylabel="‖M‖₂")
        ax.set_ylim(bottom=1e-3)
    axes[0, -1].legend(fontsize="x-small", ncol=2, loc="lower right")
    fig.suptitle(f"‖M‖₂ during pretraining (d = {cfg['d']}, n = {cfg['n']}, σ = {cfg['sigma']:g}; mean of "
                 f"{cfg['seeds']} seeds). Triangles: population-optimal ‖M*‖₂ of each L", fontsize="small")
    return fig


def _shade_regime(ax, x_in):
    if len(x_in):
        ax.axvspan(min(x_in), max(x_in), color="0.85", alpha=0.5, lw=0, zorder=0)


def _no_minor_labels(ax):
    from matplotlib.ticker import NullFormatter
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_minor_formatter(NullFormatter())


def plot_scaling(run: Run, a: dict):
    """Final w against L, sigma and n (log-log), with the population optimum and the fitted slopes."""
    cfg, units, fits = run.cfg, a["units"], a["fits"]
    floor = cfg["w_min"]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.8))
    # against L
    ax = axes[0]
    for cls in cfg["classes"]:
        t = L_trend(a, "iso", cls)
        idx = _sweep_index(units["iso"], cls, "L", cfg)
        ax.scatter([units["iso"]["configs"][i]["L"] for i in idx], np.maximum(units["iso"]["w"][idx], floor), s=14,
                   color=CLASS_COLORS[cls], alpha=0.6, label=f"{cls}: trained (each seed)")
        ax.plot(t["L"], np.maximum(_seed_mean(units["iso"]["w_pop"], units["iso"]["configs"],
                                              [(cls, L, cfg["sigma"], cfg["n"]) for L in t["L"]]), floor),
                color=CLASS_COLORS[cls], lw=1, ls="--", label=f"{cls}: population optimum")
    sub = _annotate_fit(ax, fits["L"], "L")
    ax.set(xscale="log", yscale="log", xlabel="Lipschitz constant L", ylabel="window scale w (best multiple of I)")
    ax.set_title(f"against L (σ = {cfg['sigma']:g}, n = {cfg['n']})\n{sub}", fontsize="small")
    # against sigma
    ax = axes[1]
    for cls in cfg["classes"]:
        idx = _sweep_index(units["iso"], cls, "sigma", cfg)
        sig = np.array([units["iso"]["configs"][i]["sigma"] for i in idx])
        ax.scatter(sig, np.maximum(units["iso"]["w"][idx], floor), s=14, color=CLASS_COLORS[cls], alpha=0.6,
                   label=f"{cls}: trained")
        t = sigma_trend(a, cls)
        ax.plot(t["sigma"], np.maximum(t["w_pop"], floor), color=CLASS_COLORS[cls], lw=1, ls="--",
                label=f"{cls}: optimum")
    sub = _annotate_fit(ax, fits["sigma"], "σ")
    ax.set(xscale="log", yscale="log", xlabel="label noise σ", ylabel="window scale w")
    ax.set_title(f"against σ (L = {cfg['L_sigma']:g}, n = {cfg['n']})\n{sub}", fontsize="small")
    # against n
    ax = axes[2]
    u = units["n"]
    for L, mk in zip(cfg["n_sweep_L"], ("o", "s", "^", "D")):
        idx = [i for i, c in enumerate(u["configs"]) if math.isclose(c["L"], L)]
        ax.scatter([u["configs"][i]["n"] for i in idx], np.maximum(u["w"][idx], floor), s=16, marker=mk,
                   color=CLASS_COLORS["relu"], alpha=0.6, label=f"ReLU L = {L:g}: trained")
        t = n_trend(a, L)
        ax.plot(t["n"], t["w_pop"], color=CLASS_COLORS["relu"], lw=1, ls="--")
    ax.plot([], [], color=CLASS_COLORS["relu"], lw=1, ls="--", label="population optimum")
    sub = _annotate_fit(ax, fits["n"], "n")
    ax.set(xscale="log", yscale="log", xlabel="context length n", ylabel="window scale w")
    lo, hi = ax.get_ylim()
    ticks = [v for v in (0.3, 0.5, 1, 2, 3, 5, 10, 20, 30, 50, 100) if lo <= v <= hi]
    ax.set_yticks(ticks, [f"{v:g}" for v in ticks])
    ax.set_title(f"against n (σ = {cfg['sigma']:g}; one constant per L)\n{sub}", fontsize="small")
    for ax in axes:
        ax.legend(fontsize="x-small", loc="lower right" if ax is not axes[1] else "lower left")
        _no_minor_labels(ax)
    fig.suptitle("Grey band: settings inside the Theorem 3.4 regime (ReLU), where the slope is fitted (black line; "
                 f"theory ranges are for this slope). Units with w < {floor:g} are drawn at {floor:g}",
                 fontsize="small")
    return fig


def _annotate_fit(ax, f: dict, var: str) -> str:
    """Shade the regime, draw the fitted line(s); returns a subtitle with the slope and both theory ranges."""
    x_in = f["x"]
    _shade_regime(ax, x_in)
    rs, rl = f["ranges"]["sketch"], f["ranges"]["slides"]
    ranges = f"theory: sketch [{rs[0]:.2f}, {rs[1]:.2f}], slides [{rl[0]:.2f}, {rl[1]:.2f}]"
    if "fit" in f:
        fit = f["fit"]
        head = f"fitted slope {fit.slope:.2f} ± {fit.stderr:.2f} (optimum {f['fit_pop'].slope:.2f})"
    if "fit" not in f:
        return f"too few settings inside the regime; {ranges}"
    fit = f["fit"]
    groups = [None] if f["groups"] is None else sorted(set(f["groups"]))
    for g in groups:
        xg = x_in if g is None else x_in[np.asarray(f["groups"]) == g]
        if len(xg) == 0:
            continue
        xs = np.geomspace(xg.min(), xg.max(), 20)
        ax.plot(xs, fit.predict(xs, g), color="k", lw=1.8, zorder=4)
    ax.plot([], [], color="k", lw=1.8, label=f"fit in regime: slope {fit.slope:.2f} ± {fit.stderr:.2f}")
    return f"{head}\n{ranges}"


def plot_regime(run: Run, a: dict):
    """Left: trained w of every ReLU unit against s = n L^2 / sigma^2 over the population curves w*(s).
    Right: local exponent d log w* / d log s of the population curves, against both theory ranges."""
    cfg, units = run.cfg, a["units"]
    d = cfg["d"]
    fig, axes = plt.subplots(1, 2, figsize=(12.5, 4.6))
    ax = axes[0]
    ns = sorted(a["trained_curves"])
    cmap = plt.cm.plasma(np.linspace(0.05, 0.8, len(ns)))
    col = dict(zip(ns, cmap))
    for n in ns:
        c = a["trained_curves"][n]
        ax.plot(c["s"], c["w"], color=col[n], lw=1.2, label=f"optimum, n = {n}")
        ax.axhline(c["w_sat"], color=col[n], lw=0.7, ls=":")
    for key in ("iso", "n"):
        u = units[key]
        relu = np.array([c["function_class"] == "relu" for c in u["configs"]])
        for n in ns:
            m = relu & np.array([c["n"] == n for c in u["configs"]])
            ins = m & u["in_regime"]
            out = m & ~u["in_regime"]
            ax.scatter(u["snr"][ins], np.maximum(u["w"][ins], cfg["w_min"]), color=col[n], s=18, zorder=3)
            ax.scatter(u["snr"][out], np.maximum(u["w"][out], cfg["w_min"]), facecolor="none", edgecolor=col[n],
                       s=18, zorder=3)
    f = a["fits"]["snr"]
    if "fit" in f:
        xs = np.geomspace(f["x"].min(), f["x"].max(), 20)
        ax.plot(xs, f["fit"].predict(xs), color="k", lw=2, label=f"fit inside regime: slope {f['fit'].slope:.3f}")
    ax.scatter([], [], color="0.3", s=18, label="trained, inside the regime")
    ax.scatter([], [], facecolor="none", edgecolor="0.3", s=18, label="trained, outside")
    ax.plot([], [], color="0.3", ls=":", lw=0.7, label="noiseless limit (saturation)")
    ax.axhline(cfg["regime_w"], color="0.5", lw=0.8, ls="--")
    ax.set(xscale="log", yscale="log", xlabel="n L² / σ²", ylabel="window scale w",
           title="ReLU, isotropic: trained units over the population optimum", ylim=(cfg["w_min"], None))
    ax.legend(fontsize="x-small", loc="upper left")
    ax = axes[1]
    for v, colr in (("sketch", "#2ca02c"), ("slides", "#9467bd")):
        lo, hi = th.theorem34_exponents(d, v)
        ax.axhspan(lo, hi, color=colr, alpha=0.18, lw=0, label=f"{v}: [{lo:.3f}, {hi:.3f}]")
    ncol = plt.cm.plasma(np.linspace(0.05, 0.8, len(a["curves"])))
    for (n, c), cl in zip(a["curves"].items(), ncol):
        ax.plot(c["s"], c["slope"], color=cl, lw=1.2, label=f"optimum, n = {n}")
        if c["inside"].any():
            ax.plot(c["s"][c["inside"]], c["slope"][c["inside"]], color=cl, lw=3, alpha=0.6)
    if "fit" in f:
        lo_ci, hi_ci = f["fit"].ci()
        s_mid = float(np.exp(np.log(f["x"]).mean()))
        ax.errorbar([s_mid], [f["fit"].slope], yerr=[[f["fit"].slope - lo_ci], [hi_ci - f["fit"].slope]], fmt="ko",
                    ms=5, capsize=3, label="trained units: fitted exponent (95% CI)")
    ax.set(xscale="log", xlabel="n L² / σ²", ylabel="local exponent d log w* / d log(n L²/σ²)",
           title="Local exponent of the population optimum (thick: inside the regime)", ylim=(-0.05, 1.05))
    ax.legend(fontsize="x-small", loc="upper right")
    return fig


def plot_scan(run: Run, a: dict):
    """Population loss over M = w I for some ReLU settings with the trained w marked; trained vs optimal w."""
    cfg, units = run.cfg, a["units"]
    wg, sc, rows = a["w_grid"], a["scans"]["iso_scan"], a["scans"]["iso_rows"]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.3))
    ax = axes[0]
    show = [L for L in cfg["L_values"] if L in (0.1, 0.3, 1.0, 10.0)] or cfg["L_values"][:: max(1, len(cfg["L_values"]) // 4)]
    colors = _L_colors(show)
    u = units["iso"]
    for L, col in zip(show, colors):
        i = next(k for k, r in enumerate(rows) if r["function_class"] == "relu" and math.isclose(r["L"], L)
                 and r["n"] == cfg["n"])
        loss = sc.bias[i] + cfg["sigma"] ** 2 * sc.noise[i]
        wb, lb = th.refine_minimum(wg, loss)
        ax.plot(wg, loss / lb, color=col, lw=1.3, label=f"L = {L:g}: optimum w* = {wb:.3g}")
        idx = [k for k, c in enumerate(u["configs"]) if c["function_class"] == "relu" and math.isclose(c["L"], L)
               and math.isclose(c["sigma"], cfg["sigma"])]
        for k in idx:
            ax.axvline(max(u["w"][k], cfg["w_min"]), color=col, lw=0.9, ls="--")
    ax.plot([], [], color="0.4", ls="--", lw=0.9, label="trained w (each seed)")
    ax.set(xscale="log", yscale="log", xlabel="w  (M = w I)", ylabel="population loss / its minimum",
           title=f"ReLU, σ = {cfg['sigma']:g}, n = {cfg['n']}: loss over M = w I", ylim=(0.95, 20))
    ax.legend(fontsize="x-small", loc="upper left")
    ax = axes[1]
    for key, mk, lab in (("iso", "o", "isotropic (L and σ sweeps)"), ("n", "s", "isotropic (n sweep)"),
                         ("whitened", "^", "whitened tasks (M = w Σ⁻¹)"), ("full", "D", "full W_K, W_Q, W_V")):
        uu = units[key]
        wt = uu["w"] if key != "full" else a["block"]["w"]
        cls = np.array([c["function_class"] for c in uu["configs"]])
        for c in cfg["classes"]:
            m = cls == c
            ax.scatter(np.maximum(uu["w_pop"][m], cfg["w_min"]), np.maximum(wt[m], cfg["w_min"]), marker=mk, s=18,
                       color=CLASS_COLORS[c], alpha=0.7, label=f"{lab}, {c}")
    lim = np.array([cfg["w_min"], 50])
    ax.plot(lim, lim, color="k", lw=0.8)
    ax.fill_between(lim, lim / W_RATIO_TOL, lim * W_RATIO_TOL, color="0.8", alpha=0.5, lw=0,
                    label=f"within a factor {W_RATIO_TOL}")
    ax.axvspan(cfg["w_min"], cfg["regime_w"], color="0.93", lw=0, zorder=0)
    ax.set(xscale="log", yscale="log", xlabel="population-optimal w (scan)", ylabel="trained w",
           title=f"trained against optimal w (shaded left of w = {cfg['regime_w']:g}: no window, not checked)",
           xlim=lim, ylim=lim)
    ax.legend(fontsize="xx-small", loc="upper left", ncol=1)
    return fig


def plot_covariance(run: Run, a: dict):
    """Covariance lemma: loss against the exponent p of M = w Sigma^-p; the trained M's diagonal against Sigma."""
    cfg, units, cov = run.cfg, a["units"], a["cov"]
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    Lshow = cfg["L_sigma"] if cfg["L_sigma"] in whitened_L(cfg) else whitened_L(cfg)[-1]
    ax = axes[0]
    for key, ls in (("noniso", "-"), ("whitened", "--")):
        u = units[key]
        for c in cfg["classes"]:
            i = next(k for k, e in enumerate(u["configs"]) if e["function_class"] == c and math.isclose(e["L"], Lshow)
                     and e["seed"] == 0)
            lb = u["loss_by_p"][i]
            ax.plot(P_GRID, lb / lb.min(), ls=ls, color=CLASS_COLORS[c], marker="o", ms=3,
                    label=f"{SETTING_LABEL[_setting(key)]}, {c}: p* = {u['p_star'][i]:.2f}")
    ax.axvline(1.0, color="k", lw=0.8)
    ax.set(xlabel="exponent p  (M = w Σ⁻ᵖ, best w for each p)", ylabel="population loss / its minimum",
           title=f"Which direction is optimal? (L = {Lshow:g})", yscale="log")
    _no_minor_labels(ax)
    ax.legend(fontsize="xx-small")
    ax = axes[1]
    lam = np.sort(cov)
    for key, mk in (("noniso", "o"), ("whitened", "^")):
        u = units[key]
        for c in cfg["classes"]:
            i = next(k for k, e in enumerate(u["configs"]) if e["function_class"] == c and math.isclose(e["L"], Lshow)
                     and e["seed"] == 0)
            M = a["M"][key][i]
            diag = np.diag(M)[np.argsort(cov)]
            ax.plot(lam, diag / np.exp(np.log(np.abs(diag)).mean()), marker=mk, ls="none", color=CLASS_COLORS[c],
                    label=f"{SETTING_LABEL[_setting(key)]}, {c}: p = {u['p_trained'][i]:.2f}")
    for p, ls, lab in ((1.0, "-", "Σ⁻¹ (covariance lemma)"), (0.0, ":", "I (isotropic window)")):
        ref = lam ** -p
        ax.plot(lam, ref / np.exp(np.log(ref).mean()), color="k", ls=ls, lw=0.9, label=lab)
    ax.set(xscale="log", yscale="log", xlabel="eigenvalue of Σ", ylabel="diagonal of trained M (normalised)",
           title=f"Trained M along Σ's eigenvectors (L = {Lshow:g}, seed 0)")
    _no_minor_labels(ax)
    ax.legend(fontsize="xx-small")
    ax = axes[2]
    for key, mk in (("noniso", "o"), ("whitened", "^")):
        u = units[key]
        for c in cfg["classes"]:
            m = np.array([e["function_class"] == c for e in u["configs"]])
            ax.scatter(np.maximum(u["w_pop"][m], cfg["w_min"]), u["dist_cov"][m], marker=mk, color=CLASS_COLORS[c],
                       s=18, label=f"{SETTING_LABEL[_setting(key)]}, {c}")
    ax.axhline(COV_DIST_TOL, color="k", lw=0.8, ls="--", label=f"tolerance {COV_DIST_TOL}")
    ax.axhline(th.normalized_distance(np.eye(cfg["d"]), th.window_base(cfg["d"], "nonisotropic")), color="0.5",
               lw=0.8, ls=":", label="distance of I from Σ⁻¹")
    ax.axvspan(cfg["w_min"], cfg["regime_w"], color="0.93", lw=0, zorder=0)
    ax.set(xscale="log", xlabel="population-optimal w (M = w Σ⁻¹)", ylabel="‖M/‖M‖ − Σ⁻¹/‖Σ⁻¹‖‖_F",
           title="Distance of trained M from Σ⁻¹ (every unit)", xlim=(0.1, 50))
    ax.legend(fontsize="xx-small")
    return fig


def plot_full(run: Run, a: dict):
    """Heat maps of W_K^T W_Q and W_V of one full-parameter unit (ReLU, largest full_L, seed 0)."""
    cfg = run.cfg
    res_cfgs = a["units"]["full"]["configs"]
    i = next(k for k, c in enumerate(res_cfgs) if c["function_class"] == cfg["classes"][0]
             and math.isclose(c["L"], cfg["full_L"][-1]) and c["seed"] == 0)
    A = a["block"]["A"][i]
    d = cfg["d"]
    labels = [f"x{j + 1}" for j in range(d)] + ["y"]
    fig, axes = plt.subplots(1, 2, figsize=(9.5, 4.2))
    vmax = np.abs(A).max()
    im = axes[0].imshow(A, cmap="RdBu_r", vmin=-vmax, vmax=vmax)
    axes[0].set_title(f"W_Kᵀ W_Q ({cfg['classes'][0]}, L = {cfg['full_L'][-1]:g}): w = {a['block']['w'][i]:.2f}, "
                      f"label row / x-block = {a['block']['label_row_ratio'][i]:.3f}", fontsize="small")
    fig.colorbar(im, ax=axes[0], shrink=0.8)
    WV = a["WV"][i]
    vmax = np.abs(WV).max()
    im = axes[1].imshow(WV, cmap="RdBu_r", vmin=-vmax, vmax=vmax)
    axes[1].set_title(f"W_V: label weight {a['block']['value_label'][i]:.3f}, |x part| / label weight "
                      f"{a['block']['value_x_ratio'][i]:.3f}", fontsize="small")
    fig.colorbar(im, ax=axes[1], shrink=0.8)
    for ax in axes:
        ax.set_xticks(range(d + 1), labels)
        ax.set_yticks(range(d + 1), labels)
        ax.grid(False)
        ax.axhline(d - 0.5, color="k", lw=0.8)
        ax.axvline(d - 0.5, color="k", lw=0.8)
    axes[0].set(xlabel="query token coordinate", ylabel="key token coordinate")
    axes[1].set(xlabel="input token coordinate", ylabel="output coordinate (prediction: last row)")
    return fig


# -- computed conclusions (printed by the notebook) --------------------------------------------------

def _versions_text(slope: float, d: int) -> str:
    v = th.which_version(slope, d)
    return {0: "neither range", 1: f"only the {v[0] if v else ''} range", 2: "both ranges"}[len(v)]


def exponent_summary(a: dict) -> str:
    """Which version of Theorem 3.4 the fitted exponents support, computed from the fits."""
    d, f = a["cfg"]["d"], a["fits"]["snr"]
    lines = []
    for v in ("sketch", "slides"):
        lo, hi = th.theorem34_exponents(d, v)
        lines.append(f"{v:>7} version: w between (n L²/σ²)^{lo:.3f} and (n L²/σ²)^{hi:.3f}  (d = {d})")
    if "fit" not in f:
        return "\n".join(lines + ["Too few trained settings inside the regime to fit an exponent."])
    fit = f["fit"]
    lo_ci, hi_ci = fit.ci()
    lines.append(f"Trained units inside the regime ({f['n_points']}): exponent {fit.slope:.3f}, 95% CI "
                 f"[{lo_ci:.3f}, {hi_ci:.3f}] -> in {_versions_text(fit.slope, d)}")
    lines.append(f"Population optimum at the same settings: exponent {f['fit_pop'].slope:.3f} -> in "
                 f"{_versions_text(f['fit_pop'].slope, d)}")
    for n, c in a["curves"].items():
        if "fit" in c:
            lines.append(f"Population optimum, n = {n}, whole regime: exponent {c['fit'].slope:.3f} -> in "
                         f"{_versions_text(c['fit'].slope, d)}")
    sup = th.which_version(fit.slope, d)
    if len(sup) == 1:
        lines.append(f"The data support the {sup[0]} version (its range contains the fitted exponent; the other's "
                     "does not).")
    elif len(sup) == 2:
        lines.append("The fitted exponent lies where the two ranges overlap: the data do not separate them.")
    else:
        lines.append("The fitted exponent lies outside both ranges.")
    return "\n".join(lines)


def covariance_summary(a: dict) -> str:
    """Median over units inside the window regime of the covariance measurements, per setting."""
    cfg = a["cfg"]
    lines = []
    for key in ("noniso", "whitened"):
        u = a["units"][key]
        ok = u["w_pop"] >= cfg["regime_w"]
        lines.append(f"{SETTING_LABEL[_setting(key)]:<31}: {int(ok.sum())} units with optimal w >= {cfg['regime_w']:g}; "
                     f"median distance to Σ⁻¹ {np.median(u['dist_cov'][ok]):.3f} (to I {np.median(u['dist_iso'][ok]):.3f}); "
                     f"median exponent p of M ~ Σ^-p: trained {np.nanmedian(u['p_trained'][ok]):.2f}, population "
                     f"optimum {np.median(u['p_star'][ok]):.2f}; population loss at p = 1 over the best p: "
                     f"+{100 * np.median(u['loss_pop_p1'][ok] / u['loss_pop'][ok] - 1):.1f}% (median)")
    return "\n".join(lines)
