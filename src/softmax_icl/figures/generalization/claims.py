"""Generalisation: the claim checks of Figure 5 and Theorem 3.5, each with a threshold stated before the runs."""

from __future__ import annotations

import numpy as np

from ...records import Run
from .analysis import GeneralizationAnalysis, index_of, loglog_slope

#: Claim thresholds (stated before the runs; see the notebook's text for why).
SPREAD_TOLERANCE = 0.25       # (a): max relative spread across pretraining classes, every test class and n
MISMATCH_FACTOR = 2.0         # (b): a mismatched-L unit's error over the matched unit's, at n = n_train
BIAS_SLOPE = -0.3             # log-log slope of error vs test n above which the error is bias-dominated
NOISE_SLOPE = -0.7            # ... below which it is noise-dominated (a fixed window: variance ~ 1/n)


def check_claims(run: Run, a: GeneralizationAnalysis) -> None:
    """The figure's claims, each computed from the data with a stated threshold."""
    cfg = run.cfg
    classes, Ls, ns = a.classes, a.L, np.array(a.n)
    lt, j_tr = index_of(Ls, a.L_test), index_of(ns, a.n_train)
    err = a.softmax.mean(2)                                                   # (P, nL, T, N)
    # (a) matched L: the curves coincide whatever the pretraining class
    matched = err[:, lt]                                                      # (P, T, N)
    spread = (matched.max(0) - matched.min(0)) / matched.min(0)               # (T, N)
    run.check("matched-L-curves-coincide",
              f"max relative spread (max-min)/min of ICL error across pretraining classes at L = {a.L_test:g}, "
              f"over test classes and n = {ns[0]}..{ns[-1]}", spread.max(), spread.max() <= SPREAD_TOLERANCE,
              f"<= {SPREAD_TOLERANCE}")
    # (b) mismatched L: higher error on both sides, at the pretraining context length
    t = index_of(classes, cfg["mismatch_class"])
    p_mis, p_ref = index_of(classes, cfg["mismatch_class"]), index_of(classes, cfg["reference_class"])
    ref = err[p_ref, lt, t, j_tr]
    low, high = err[p_mis, 0, t, j_tr] / ref, err[p_mis, -1, t, j_tr] / ref
    for name, val, L in (("small", low, Ls[0]), ("large", high, Ls[-1])):
        run.check(f"mismatched-L-{name}-worse",
                  f"ICL error on {cfg['mismatch_class']} L = {a.L_test:g} (n = {a.n_train}) of the "
                  f"{cfg['mismatch_class']} unit pretrained at L = {L:g} over the {cfg['reference_class']} unit "
                  f"pretrained at L = {a.L_test:g}", val, val > MISMATCH_FACTOR, f"> {MISMATCH_FACTOR:g}")
    # Theorem 3.5's two regimes: too small L -> wide window, bias-dominated (more context does not help);
    # too large L -> narrow window, noise-dominated (error falls like 1/n as the context grows)
    far = ns >= a.n_train / 2
    if far.sum() < 2:
        far = np.arange(len(ns)) >= len(ns) - 2
    slope = loglog_slope(ns[far], err[:, :, t][..., far])                     # (P, nL)
    run.check("small-L-bias-dominated",
              f"log-log slope of ICL error vs test n (n = {ns[far][0]}..{ns[far][-1]}) of the {cfg['mismatch_class']} unit "
              f"pretrained at L = {Ls[0]:g} (matched unit: {slope[p_ref, lt]:.2f})", slope[p_mis, 0],
              slope[p_mis, 0] > BIAS_SLOPE, f"> {BIAS_SLOPE:g} (error flat in n)")
    run.check("large-L-noise-dominated",
              f"log-log slope of ICL error vs test n (n = {ns[far][0]}..{ns[far][-1]}) of the {cfg['mismatch_class']} unit "
              f"pretrained at L = {Ls[-1]:g}", slope[p_mis, -1], slope[p_mis, -1] < NOISE_SLOPE,
              f"< {NOISE_SLOPE:g} (error falls nearly like 1/n)")
    # the mechanism: the learned window narrows (||M|| grows) with the pretraining L, in every seed
    norms = a.M_norm[p_mis]                                                   # (nL, S)
    increasing = bool(np.all(np.diff(norms, axis=0) > 0))
    run.check("window-set-by-pretraining-L",
              f"||M||_2 of the {cfg['mismatch_class']} units at L = {', '.join(f'{L:g}' for L in Ls)}",
              norms.mean(1), increasing, "strictly increasing in L, in every seed")
    # key numbers
    mis_all = err[:, :, t, j_tr] / ref                                        # every class's mismatch factors
    run.record(seeds_with_negative_window=(a.w_signed < 0).sum(-1), w_signed=a.w_signed,
               spread_by_test_class_and_n=spread, matched_error_at_n_train=matched[:, :, j_tr],
               mismatch_factor_all_classes=mis_all, slope=slope, M_norm=a.M_norm.mean(-1),
               softmax_over_oracle_at_n_train=matched[:, :, j_tr] / a.oracle[None, :, j_tr],
               linear_error_at_n_train=a.linear.mean(1)[:, :, j_tr], oracle_error=a.oracle,
               oracle_w=a.oracle_w, classes=classes, L=Ls, n=list(map(int, ns)))
