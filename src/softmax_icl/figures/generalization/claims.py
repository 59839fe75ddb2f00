"""Generalisation: the checks of Figure 5 and Theorem 3.5, each with a kind, a source, and a threshold stated
before the runs. Verdicts are statements over the seeds (the worst seed, or every seed)."""

from __future__ import annotations

import numpy as np

from ...records import Run
from .analysis import GeneralizationAnalysis, TheoryAtD, index_of, loglog_slope, two_branch_fit

FIG5 = "Collins et al. Fig. 5"
THM35 = "Collins et al. Theorem 3.5 (slides)"
#: Thresholds (stated before the runs; see the notebook's text for why).
SPREAD_TOLERANCE = 0.25       # (a): max relative spread across pretraining classes, every test class and n
MISMATCH_FACTOR = 2.0         # (b): a mismatched-L unit's error over the matched unit's, at n = n_train
BIAS_SLOPE = -0.3             # log-log slope of error vs test n above which the error is bias-dominated
NOISE_SLOPE = -0.7            # ... below which it is noise-dominated (a fixed window: variance ~ 1/n)
CONVERGED_CHANGE = 0.02       # |relative loss change over the last quarter| below this, or below 3 standard errors
CROSSOVER_FACTOR = 2.0        # Theorem 3.5: the branches meet within this factor of the pretraining L


def _converged(change, se) -> np.ndarray:
    return np.abs(change) <= np.maximum(CONVERGED_CHANGE, 3.0 * se)


def check_claims(run: Run, a: GeneralizationAnalysis) -> None:
    """Every check of the chapter."""
    cfg = run.cfg
    classes, Ls, ns = a.classes, a.L, np.array(a.n)
    lt, j_tr = index_of(Ls, a.L_test), index_of(ns, a.n_train)
    err = a.softmax.mean(2)                                                   # (P, nL, T, N), mean over seeds
    # preconditions: every unit converged, none ended at M ~ -wI
    conv = {k: _converged(a.loss_change[k], a.loss_change_se[k]) for k in a.loss_change}
    worst = max(a.loss_change, key=lambda k: np.abs(a.loss_change[k]).max())
    n_units = sum(len(v) for v in conv.values())
    run.check("pretraining-converged", f"units whose training loss still moves over the last quarter of pretraining "
              f"(fitted relative change, every sweep; largest |change|: {np.abs(a.loss_change[worst]).max():.3f} "
              f"in {worst}) out of {n_units}", sum(int((~v).sum()) for v in conv.values()),
              all(v.all() for v in conv.values()), f"0 (|change| <= {CONVERGED_CHANGE:g} or within 3 standard "
              "errors)", kind="finding", source="beyond the papers (a precondition of every check below)")
    neg = int((a.w_signed < 0).sum()) + sum(int((t.w_signed < 0).sum()) for t in a.theory)
    run.check("no-negative-window", "softmax units that end with tr(M) < 0 (attending away from the query), all "
              "sweeps", neg, neg == 0, "0", kind="finding",
              source="beyond the papers (the theorem's optimum is M = wI with w > 0)")
    # (a) matched L: the curves coincide whatever the pretraining class
    matched = err[:, lt]                                                      # (P, T, N)
    spread = (matched.max(0) - matched.min(0)) / matched.min(0)               # (T, N)
    run.check("matched-L-curves-coincide",
              f"max relative spread (max-min)/min of the seed-mean ICL error across pretraining classes at "
              f"L = {a.L_test:g}, over test classes and n = {ns[0]}..{ns[-1]}", spread.max(),
              spread.max() <= SPREAD_TOLERANCE, f"<= {SPREAD_TOLERANCE}", kind="claim",
              source=f"{FIG5}(a): units pretrained on affine, ReLU, cosine with L = 1 'nearly coincide'")
    # (b) mismatched L: higher error on both sides, at the pretraining context length, in every seed
    t = index_of(classes, cfg["mismatch_class"])
    p_mis, p_ref = index_of(classes, cfg["mismatch_class"]), index_of(classes, cfg["reference_class"])
    ref = err[p_ref, lt, t, j_tr]
    per_seed = a.softmax[p_mis][:, :, t, j_tr] / ref                          # (nL, S)
    for name, li in (("small", 0), ("large", len(Ls) - 1)):
        run.check(f"mismatched-L-{name}-worse",
                  f"ICL error on {cfg['mismatch_class']} L = {a.L_test:g} (n = {a.n_train}) of the "
                  f"{cfg['mismatch_class']} unit pretrained at L = {Ls[li]:g} over the {cfg['reference_class']} unit "
                  f"pretrained at L = {a.L_test:g} (seed mean), worst seed", per_seed[li].min(),
                  per_seed[li].min() > MISMATCH_FACTOR, f"> {MISMATCH_FACTOR:g}", kind="claim",
                  source=f"{FIG5}(b): 'only pretraining on the same Lipschitzness generalizes'")
    # Theorem 3.5's two regimes, per seed: too small L -> bias-dominated (flat in n); too large L -> noise-dominated
    far = ns >= a.n_train / 2
    if far.sum() < 2:
        far = np.arange(len(ns)) >= len(ns) - 2
    slope = loglog_slope(ns[far], a.softmax[:, :, :, t][..., far])           # (P, nL, S)
    run.check("small-L-bias-dominated",
              f"log-log slope of ICL error vs test n (n = {ns[far][0]}..{ns[far][-1]}) of the {cfg['mismatch_class']} "
              f"unit pretrained at L = {Ls[0]:g}, smallest over seeds (matched unit: {slope[p_ref, lt].mean():.2f})",
              slope[p_mis, 0].min(), slope[p_mis, 0].min() > BIAS_SLOPE, f"> {BIAS_SLOPE:g} (error flat in n)",
              kind="claim", source=f"{THM35}, case L' > L: error >= L'^2 (sigma^2/(nL^2))^(2/(d+2)), bias-dominated")
    run.check("large-L-noise-dominated",
              f"log-log slope of ICL error vs test n (n = {ns[far][0]}..{ns[far][-1]}) of the {cfg['mismatch_class']} "
              f"unit pretrained at L = {Ls[-1]:g}, largest over seeds", slope[p_mis, -1].max(),
              slope[p_mis, -1].max() < NOISE_SLOPE, f"< {NOISE_SLOPE:g} (error falls nearly like 1/n)",
              kind="claim", source=f"{THM35}, case L' <= L: 'no benefit of L'', a narrow window: noise ~ 1/n")
    # the mechanism: the learned window narrows (||M|| grows) with the pretraining L, in every seed
    norms = a.M_norm[p_mis]                                                   # (nL, S)
    increasing = bool(np.all(np.diff(norms, axis=0) > 0))
    run.check("window-set-by-pretraining-L",
              f"||M||_2 of the {cfg['mismatch_class']} units at L = {', '.join(f'{L:g}' for L in Ls)} (seed mean)",
              norms.mean(1), increasing, "strictly increasing in L, in every seed", kind="claim",
              source="Collins et al. (slides): the window 'shrinks with increased Lipschitzness'")
    for th in a.theory:
        check_theory(run, th)
    mis_all = err[:, :, t, j_tr] / ref                                        # every class's mismatch factors
    run.record(seeds_with_negative_window=(a.w_signed < 0).sum(-1), w_signed=a.w_signed,
               spread_by_test_class_and_n=spread, matched_error_at_n_train=matched[:, :, j_tr],
               mismatch_factor_all_classes=mis_all, slope=slope.mean(-1), M_norm=a.M_norm.mean(-1),
               softmax_over_oracle_at_n_train=matched[:, :, j_tr] / a.oracle[None, :, j_tr],
               linear_error_at_n_train=a.linear.mean(1)[:, :, j_tr], oracle_error=a.oracle,
               oracle_w=a.oracle_w, classes=classes, L=Ls, n=list(map(int, ns)),
               loss_change_worst={k: float(np.abs(v).max()) for k, v in a.loss_change.items()})


def theory_numbers(th: TheoryAtD) -> dict:
    """The fits of Theorem 3.5 at one d (computed here so the checks, the table and the record agree)."""
    f1 = index_of(th.L_prime, th.L_unit[1])
    a_, b_ = two_branch_fit(th.L_prime, th.at_nmax)                         # (2, S)
    crossover = np.sqrt(np.clip(b_, 1e-30, None) / np.clip(a_, 1e-30, None))  # (2, S)
    above, below = th.L_prime > th.L_unit[1], th.L_prime < th.L_unit[1]
    mean = th.at_nmax.mean(1)                                                # (2, F)
    rate = loglog_slope(th.n, th.matched_rate(f1))                           # (S,)
    ctrl = loglog_slope(th.n, th.error[0, -1, :, f1, :])                     # (S,) small-L unit at every test n
    return dict(f1=f1, crossover=crossover, slope_above=loglog_slope(th.L_prime[above], mean[:, above]),
                slope_below=loglog_slope(th.L_prime[below], mean[:, below]),
                oracle_slope_above=loglog_slope(th.L_prime[above], th.oracle[above, -1]),
                oracle_slope_below=loglog_slope(th.L_prime[below], th.oracle[below, -1]),
                rate=rate, control_rate=ctrl, bound_rate=-1.0 / (th.d + 2), sketch_rate=-2.0 / (th.d + 2),
                oracle_rate=float(loglog_slope(th.n, th.oracle[f1])))


def check_theory(run: Run, th: TheoryAtD) -> None:
    """Theorem 3.5 at one d: where the two branches meet, and the matched unit's decay in n; each with a control."""
    x = theory_numbers(th)
    Lm, Ls = th.L_unit[1], th.L_unit[0]
    lo, hi = Lm / CROSSOVER_FACTOR, Lm * CROSSOVER_FACTOR
    tag = f"d = {th.d}, n = {th.n[-1]}"
    c = x["crossover"]
    run.check(f"thm35-crossover-at-L-d{th.d}",
              f"{tag}: L' where the fitted branches a L'^2 (bias) and b (noise floor) meet, for the unit pretrained "
              f"at L = {Lm:g} (L' = {', '.join(f'{v:g}' for v in th.L_prime)}), every seed", c[1],
              bool(np.all((c[1] > lo) & (c[1] < hi))), f"in ({lo:g}, {hi:g}) in every seed", kind="claim",
              source=f"{THM35}: the penalty switches from 'no benefit of L'' (L' <= L) to L'^2 (L' > L) at L' = L")
    run.check(f"thm35-crossover-at-L-d{th.d}-control",
              f"{tag}: the same crossover for the unit pretrained at L = {Ls:g} (the window of another L)", c[0],
              bool(np.all((c[0] > lo) & (c[0] < hi))), f"in ({lo:g}, {hi:g}) in every seed", kind="control",
              control_of=f"thm35-crossover-at-L-d{th.d}", source=f"{THM35}, against the wrong pretraining L")
    run.check(f"thm35-matched-rate-d{th.d}",
              f"d = {th.d}: log-log slope in n of the ICL error of units pretrained and tested at L = {Lm:g} and at "
              f"each n = {', '.join(map(str, th.n))}, largest over seeds (the proof sketch's rate: "
              f"{x['sketch_rate']:.2f}; re-tuned NW oracle: {x['oracle_rate']:.2f})", x["rate"].max(),
              bool(x["rate"].max() <= x["bound_rate"]), f"<= {x['bound_rate']:.3f} = -1/(d+2)", kind="claim",
              source=f"{THM35}: matched L, L(M) <= L^(2-2/(d+2)) (sigma^2/n)^(1/(d+2))")
    run.check(f"thm35-matched-rate-d{th.d}-control",
              f"d = {th.d}: the same slope for the unit pretrained at L = {Ls:g} (n = {th.n[-1]}) tested at L = {Lm:g} "
              "at every n, largest over seeds", x["control_rate"].max(),
              bool(x["control_rate"].max() <= x["bound_rate"]), f"<= {x['bound_rate']:.3f}", kind="control",
              control_of=f"thm35-matched-rate-d{th.d}", source=f"{THM35}, against a unit pretrained at the wrong L")
    run.record(**{f"theory_d{th.d}": dict(
        L_prime=th.L_prime, n=th.n, L_unit=th.L_unit, error_at_nmax=th.at_nmax.mean(1), oracle_at_nmax=th.oracle[:, -1],
        crossover=x["crossover"].mean(-1), slope_above=x["slope_above"], slope_below=x["slope_below"],
        oracle_slope_above=x["oracle_slope_above"], oracle_slope_below=x["oracle_slope_below"],
        matched_rate=x["rate"].mean(), control_rate=x["control_rate"].mean(), bound_rate=x["bound_rate"],
        sketch_rate=x["sketch_rate"], oracle_rate=x["oracle_rate"],
        matched_error_vs_n=th.matched_rate(x["f1"]).mean(0), oracle_vs_n=th.oracle[x["f1"]])})
