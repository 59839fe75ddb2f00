"""The bias-variance trade-off of the window, read off the isotropic population scan, and its two checks.

The scan over ``M = w I`` (:func:`softmax_icl.figures.norm_scaling.analysis.population_scans`) holds, per row (class,
L, n) and grid point ``w``, the two terms of the loss ``bias(w) + sigma^2 noise(w)`` with their Monte Carlo standard
errors. Around the population optimum ``w*`` (at the chapter's ``sigma``):

* the rebuttal's "the bias of the estimator should increase with an increase in the size of the attention window
  (to counteract the decrease in variance)": ``log bias(w*/4) - log bias(4 w*)``, the window four times wider than
  the optimum against the one four times narrower, with its delta-method standard error; the noise term through the
  same statistic is the rival (it falls as the window widens);
* the slides' proof-sketch bounds ``Omega(L^2/w^2) < bias < Theta(L^2/w + L^2/n)``: the local log-log slope ``k`` of
  the bias in ``w`` over ``[w*/2, 2 w*]`` (a finding: ``|k + 3/2| < 1/2``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ... import stats
from ... import theory as th
from ...book.run import Run
from .analysis import Analysis

#: How far either side of the optimum the trade-off compares the window (a factor in w), and the range of the slope fit.
SPAN = 4.0
FIT_SPAN = 2.0
SRC_REBUTTAL = ("Collins et al. (rebuttal, global response point 1): 'the bias of the estimator should increase with "
                "an increase in the size of the attention window (to counteract the decrease in variance)'")
SRC_SKETCH = ("beyond the papers: the slides' proof sketch, Omega(L^2/w^2) < L_bias(w) < Theta(L^2/w + L^2/n) (not "
              "counted as a claim: see the ledger's not_counted)")


@dataclass(frozen=True)
class Tradeoff:
    """Per scan row: its label, the optimum ``w_star`` at ``sigma``, the compared windows ``w_wide`` (w*/4) and
    ``w_narrow`` (4 w*) on the grid, the log ratios wide over narrow of the bias and of the noise term with their
    standard errors, and the bias's local log-log slope in w around the optimum (NaN with fewer than 3 grid points)."""

    labels: list
    classes: list
    w_star: np.ndarray
    w_wide: np.ndarray
    w_narrow: np.ndarray
    bias_log_ratio: np.ndarray
    bias_se: np.ndarray
    noise_log_ratio: np.ndarray
    noise_se: np.ndarray
    bias_slope: np.ndarray


def _log_ratio(x: np.ndarray, se: np.ndarray, a: int, b: int) -> tuple[float, float]:
    """``log x[a] - log x[b]`` and its delta-method standard error (the two estimates taken as independent)."""
    return float(np.log(x[a] / x[b])), float(np.hypot(se[a] / x[a], se[b] / x[b]))


def tradeoff(a: Analysis, sigma: float) -> Tradeoff:
    """The trade-off statistics of every row of the isotropic scan at noise level ``sigma``."""
    sc, rows, wg = a.scans.iso_scan, a.scans.iso_rows, np.asarray(a.w_grid, dtype=np.float64)
    lw = np.log(wg)
    w_star, _ = th.refine_minimum(wg, sc.bias + sigma ** 2 * sc.noise)                         # (R,)
    near = lambda w: int(np.argmin(np.abs(lw - np.log(w))))  # noqa: E731  (nearest grid point in log w)
    out = {k: [] for k in ("w_wide", "w_narrow", "bias", "bias_se", "noise", "noise_se", "slope")}
    for i, ws in enumerate(w_star):
        jw, jn = near(ws / SPAN), near(ws * SPAN)
        out["w_wide"].append(wg[jw])
        out["w_narrow"].append(wg[jn])
        for key, x, se in (("bias", sc.bias[i], sc.bias_se[i]), ("noise", sc.noise[i], sc.noise_se[i])):
            v, s = _log_ratio(x, se, jw, jn)
            out[key].append(v)
            out[key + "_se"].append(s)
        fit = (wg >= ws / FIT_SPAN) & (wg <= ws * FIT_SPAN)
        out["slope"].append(float(np.polyfit(lw[fit], np.log(sc.bias[i][fit]), 1)[0]) if fit.sum() >= 3 else np.nan)
    labels = [f"{r['function_class']}, L = {r['L']:g}, n = {r['n']}" for r in rows]
    return Tradeoff(labels, [r["function_class"] for r in rows], np.asarray(w_star), np.array(out["w_wide"]),
                    np.array(out["w_narrow"]), np.array(out["bias"]), np.array(out["bias_se"]),
                    np.array(out["noise"]), np.array(out["noise_se"]), np.array(out["slope"]))


def check_tradeoff(run: Run, a: Analysis) -> Tradeoff:
    """The trade-off claim with its rival (the noise term through the same statistic), and the bias-exponent
    finding; returns the statistics for the chapter's table."""
    run.titles.update({"bias-rises-as-window-widens": "the bias rises as the window widens",
                       "bias-rises-as-window-widens-noise-term": "the noise term through the same ratio",
                       "bias-exponent-in-sketch-range": "the bias's exponent in $w$ lies in $[-2, -1]$"})
    t = tradeoff(a, run.cfg["sigma"])
    head = (f"population scan over M = w I ({run.cfg['scan_tasks']} Monte Carlo tasks), every isotropic row "
            f"({len(t.labels)}: class, L, n), w* its optimum at sigma = {run.cfg['sigma']:g}")
    wg, cfg = np.asarray(a.w_grid), run.cfg
    inside = (t.w_star / SPAN >= wg[0]) & (t.w_star * SPAN <= wg[-1])
    sc = a.scans.iso_scan
    w_sat = np.array([th.saturation_w(wg, sc.bias[i]) for i in range(len(t.labels))])
    # the regime where the window trades bias for noise, from the scan alone: a window exists (w* >= regime_w) and
    # the bias is not at its floor (w* below regime_saturation of the bias's own minimiser, the noise-free optimum)
    regime = (t.w_star >= cfg["regime_w"]) & (t.w_star < cfg["regime_saturation"] * w_sat)
    out = [lab for lab, ok in zip(t.labels, inside) if not ok]
    off = [lab for lab, ok, r in zip(t.labels, inside, regime) if ok and not r]
    head += (f"; rows whose w*/{SPAN:g} or {SPAN:g} w* falls outside the scanned w = {wg[0]:g}..{wg[-1]:g}, left out: "
             f"{'; '.join(out) or 'none'}; rows outside the trade-off regime (w* < {cfg['regime_w']:g}, or w* at "
             f"least {cfg['regime_saturation']:g} of the bias's own minimiser), left out: {'; '.join(off) or 'none'}")
    inside = inside & regime
    for tag, x, se in (("", t.bias_log_ratio, t.bias_se), ("-noise-term", t.noise_log_ratio, t.noise_se)):
        term = "noise term" if tag else "bias term"
        cells = {lab: stats.Estimate(v, s) for lab, v, s, ok in zip(t.labels, x, se, inside) if ok}
        run.decide("bias-rises-as-window-widens" + tag, ("control: the same for the noise term; " if tag else "")
                   + f"{head}: log of the {term} at w*/{SPAN:g} (a window {SPAN:g} times wider) over at {SPAN:g} w*, "
                   "exact with its Monte Carlo standard error; lower bound vs log 2", cells,
                   **(dict(kind="control", control_of="bias-rises-as-window-widens",
                           source="the wrong counterpart: the noise term falls as the window widens") if tag else
                      dict(kind="claim", source=SRC_REBUTTAL, ledger="bias-variance-tradeoff")))
    relu = [i for i, c in enumerate(t.classes) if c == "relu" and np.isfinite(t.bias_slope[i])]
    if relu:
        run.decide("bias-exponent-in-sketch-range", f"{head}: least-squares slope k of log bias in log w over "
                   f"[w*/{FIT_SPAN:g}, {FIT_SPAN:g} w*], every ReLU row ({len(relu)}); the statistic k + 3/2, exact, "
                   "|.| vs 0.5", {t.labels[i]: [t.bias_slope[i] + 1.5] for i in relu}, kind="finding",
                   source=SRC_SKETCH)
    run.record(tradeoff={"rows": t.labels, "w_star": t.w_star, "w_wide": t.w_wide, "w_narrow": t.w_narrow,
                         "bias_log_ratio": t.bias_log_ratio, "noise_log_ratio": t.noise_log_ratio,
                         "bias_slope": t.bias_slope})
    return t
