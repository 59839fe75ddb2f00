"""Window adaptation: the claim checks of Figure 1, each with a threshold stated before the runs."""

from __future__ import annotations

import numpy as np

from ...records import Run
from .analysis import WindowAnalysis
from .sweeps import MODELS


def check_claims(run: Run, a: WindowAnalysis) -> None:
    """The figure's claims, each computed from the data with a stated threshold."""
    hw_s, hw_l = a.halfwidth["softmax"], a.halfwidth["linear"]   # (setting, seed)
    L_s = [s.L for s in a.settings]
    # 1) softmax window narrows as L grows (low-noise settings 0, 1, 2), in every seed
    narrowing = np.all(np.diff(hw_s[:3], axis=0) < 0, axis=0)
    ratio_L = hw_s[0].mean() / hw_s[2].mean()
    run.check("window-narrows-with-L", f"softmax half-width falls as L grows ({L_s[0]:g} -> {L_s[1]:g} -> {L_s[2]:g}), "
              "ratio smallest/largest L", ratio_L, bool(narrowing.all()) and ratio_L > 1.5,
              "> 1.5 and strictly decreasing in every seed")
    # 2) softmax window widens with the noise (medium L)
    ratio_sigma = hw_s[3].mean() / hw_s[1].mean()
    run.check("window-widens-with-sigma", f"softmax half-width at σ = {a.settings[3].sigma:g} over σ = "
              f"{a.settings[1].sigma:g} (L = {L_s[1]:g})", ratio_sigma,
              bool(np.all(hw_s[3] > hw_s[1])) and ratio_sigma > 1.2, "> 1.2, and larger in every seed")
    # 3) linear attention does not adapt: its window is the same in every setting
    spread_lin = hw_l.mean(1).max() / hw_l.mean(1).min()
    spread_soft = hw_s.mean(1).max() / hw_s.mean(1).min()
    run.check("linear-does-not-adapt", "linear half-width max/min across the four settings (softmax: "
              f"{spread_soft:.3g})", spread_lin, spread_lin < 1.1 and spread_soft > 2.0,
              "< 1.1 (while softmax's > 2)")
    # 4) softmax ICL error below linear once the context is long enough (n >= n_window), every setting;
    #    below that, a wide-window NW estimator can lose to linear attention: reported, not hidden
    err = a.error
    ratio = err["softmax"].mean(-1) / err["linear"].mean(-1)             # (setting, n)
    ns = np.array(a.n)
    long = ns >= run.cfg["n_window"]
    run.check("softmax-beats-linear", f"worst ratio of softmax to linear ICL error over settings, n >= "
              f"{run.cfg['n_window']}", ratio[:, long].max(), ratio[:, long].max() < 1.0, "< 1")
    linear_wins = {s.label: [int(n) for n in ns[ratio[i] >= 1]] for i, s in enumerate(a.settings)}
    run.record(linear_wins_at_n=linear_wins)
    # 5) beyond the paper: the trained softmax unit is close to the best-bandwidth Nadaraya-Watson oracle
    gap = err["softmax"].mean(-1) / err["oracle"]
    n_big = [i for i, n in enumerate(a.n) if n >= 16] or [len(a.n) - 1]
    run.check("softmax-near-oracle", "worst ratio of trained-softmax to oracle-NW ICL error (n >= 16)",
              gap[:, n_big].max(), gap[:, n_big].max() < 1.25, "< 1.25")
    run.record(softmax_over_linear=ratio, halfwidth_deg={m: a.halfwidth[m].mean(1) for m in MODELS},
               w_norm={m: a.w[m].mean(1) for m in MODELS},
               icl_error={k: (v.mean(-1) if v.ndim == 3 else v) for k, v in err.items()},
               settings=[s.label for s in a.settings], n=a.n)
