"""Generalisation: the checks of Figure 5 and Theorem 3.5, each with a kind, a source, and a threshold stated
before the runs. Verdicts are statements over the seeds (the worst seed, or every seed)."""

from __future__ import annotations

import numpy as np

from ...book.records import BASELINE_SOURCE as BASE, claim_or_baseline
from ...book.run import Run
from .analysis import GeneralizationAnalysis, TheoryAtD, index_of, loglog_slope, two_branch_fit

FIG5 = "Collins et al. Fig. 5"
SRC_5A = "Collins et al. Fig. 5(a) (slides): 'All three attention units generalize to all test distributions'"
THM35 = "Collins et al. Theorem 3.5 (slides)"
#: Thresholds (stated before the runs; see the notebook's text for why).
SPREAD_TOLERANCE = 0.25       # (a): max relative spread across pretraining classes, every test class and n
MISMATCH_FACTOR = 2.0         # (b): a mismatched-L unit's error over the matched unit's, at n = n_train
BIAS_SLOPE = -0.3             # log-log slope of error vs test n above which the error is bias-dominated
NOISE_SLOPE = -0.7            # ... below which it is noise-dominated (a fixed window: variance ~ 1/n)
CONVERGED_CHANGE = 0.02       # |relative loss change over the last quarter| below this, or below 3 standard errors
CROSSOVER_FACTOR = 2.0        # Theorem 3.5: the branches meet within this factor of the pretraining L



#: Short titles of the checks for the book's tables (MyST maths); a baseline is titled after its check.
TITLES = {
    'matched-L-curves-coincide-wrong-L': 'a cosine unit pretrained at the wrong $L$',
    'mismatched-L-same-L-control': 'a unit of another class at the same $L$',
    'small-L-bias-dominated-control': 'the unit of the other regime',
    'large-L-noise-dominated-control': 'the unit of the other regime',
    'thm35-crossover-at-L-control': 'the unit pretrained at the wrong $L$',
    'thm35-matched-rate-control': 'the unit pretrained at the wrong $L$',
    'matched-L-curves-coincide': 'matched-$L$ units alike up to the training length',
    'matched-L-curves-coincide-long-contexts': 'matched-$L$ units alike at every test length',
    'mismatched-L-small-worse': 'pretrained at a smaller $L$: worse',
    'mismatched-L-large-worse': 'pretrained at a larger $L$: worse',
    'small-L-bias-dominated': 'too small $L$: error flat in $n$ (bias)',
    'large-L-noise-dominated': 'too large $L$: error falls like $1/n$ (noise)',
    'window-set-by-pretraining-L': '$\\|M\\|_2$ rises with the pretraining $L$',
    'thm35-crossover-at-L': "the penalty switches branch at $L' = L$",
    'thm35-matched-rate': 'matched error falls at least like $n^{-1/(d+2)}$',
}


def _converged(change, se) -> np.ndarray:
    return np.abs(change) <= np.maximum(CONVERGED_CHANGE, 3.0 * se)


def check_claims(run: Run, a: GeneralizationAnalysis) -> None:
    """Every check of the chapter."""
    run.titles.update(TITLES)
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
    # (a) matched L: the curves coincide whatever the pretraining class, at the lengths pretrained for (the claim's
    #     scope), with the cosine unit of a wrong L in place of the matched one as the baseline; every n is a finding
    matched = err[:, lt]                                                      # (P, T, N)
    upto = ns <= a.n_train
    p_cos = index_of(classes, cfg["mismatch_class"])

    def spread_of(curves):                                                    # (P, T, N') -> max relative spread
        return float(((curves.max(0) - curves.min(0)) / curves.min(0)).max())

    spread = (matched.max(0) - matched.min(0)) / matched.min(0)               # (T, N)
    wrong = []
    for li in (0, len(Ls) - 1):
        swapped = matched.copy()
        swapped[p_cos] = err[p_cos, li]
        wrong.append(spread_of(swapped[..., upto]))
    for cid, value, kind, what in (
            ("matched-L-curves-coincide", spread[:, upto].max(), "claim", f"n = {ns[0]}..{a.n_train} (up to the "
             "pretraining length)"),
            ("matched-L-curves-coincide-wrong-L", min(wrong), "control", f"n = {ns[0]}..{a.n_train}, with the "
             f"{cfg['mismatch_class']} unit pretrained at L = {Ls[0]:g} or {Ls[-1]:g} in place of the one at "
             f"L = {a.L_test:g} (the smaller of the two)"),
            ("matched-L-curves-coincide-long-contexts", spread.max(), "finding", f"every test length n = "
             f"{ns[0]}..{ns[-1]}, up to {ns[-1] // a.n_train}x the pretraining length")):
        run.check(cid, ("control: " if kind == "control" else "") + "max relative spread (max-min)/min of the "
                  f"seed-mean ICL error across pretraining classes at L = {a.L_test:g}, over test classes and {what}",
                  float(value), value <= SPREAD_TOLERANCE, f"<= {SPREAD_TOLERANCE}", kind=kind,
                  **({"ledger": "same-L-sufficient", "source": SRC_5A} if kind == "claim" else
                     {"control_of": "matched-L-curves-coincide", "source": BASE} if kind == "control" else
                     {"ledger": "same-L-sufficient", "source": "beyond the papers: test lengths past pretraining"}))
    # (b) mismatched L: higher error on both sides, at the pretraining context length, in every seed; a unit
    #     pretrained at the same L on another class is the baseline
    t = index_of(classes, cfg["mismatch_class"])
    p_mis, p_ref = index_of(classes, cfg["mismatch_class"]), index_of(classes, cfg["reference_class"])
    ref = err[p_ref, lt, t, j_tr]
    per_seed = a.softmax[p_mis][:, :, t, j_tr] / ref                          # (nL, S)
    p_other = next(i for i, c in enumerate(classes) if i not in (p_mis, p_ref))
    same_L = a.softmax[p_other][lt, :, t, j_tr] / ref                         # (S,)
    for name, li in (("small", 0), ("large", len(Ls) - 1)):
        run.check(f"mismatched-L-{name}-worse",
                  f"ICL error on {cfg['mismatch_class']} L = {a.L_test:g} (n = {a.n_train}) of the "
                  f"{cfg['mismatch_class']} unit pretrained at L = {Ls[li]:g} over the {cfg['reference_class']} unit "
                  f"pretrained at L = {a.L_test:g} (seed mean), worst seed", per_seed[li].min(),
                  per_seed[li].min() > MISMATCH_FACTOR, f"> {MISMATCH_FACTOR:g}", kind="claim",
                  source=f"{FIG5}(b): 'Only pretraining on the same Lipschitzness generalizes'",
                  ledger="same-L-necessary")
    run.check("mismatched-L-same-L-control", f"control: the same ratio for the {classes[p_other]} unit pretrained at "
              f"the same L = {a.L_test:g}, worst seed", same_L.min(), same_L.min() > MISMATCH_FACTOR,
              f"> {MISMATCH_FACTOR:g} (must fail)", kind="control", control_of="mismatched-L-small-worse", source=BASE)
    # Theorem 3.5's two regimes, per seed: too small L -> bias-dominated (flat in n); too large L -> noise-dominated;
    # each regime's statistic on the other regime's unit is its baseline
    far = ns >= a.n_train / 2
    if far.sum() < 2:
        far = np.arange(len(ns)) >= len(ns) - 2
    slope = loglog_slope(ns[far], a.softmax[:, :, :, t][..., far])           # (P, nL, S)
    rng = f"n = {ns[far][0]}..{ns[far][-1]}"
    for tag, li in (("", 0), ("-control", len(Ls) - 1)):
        run.check("small-L-bias-dominated" + tag, ("control: the same for the unit of the other regime; " if tag else
                  "") + f"log-log slope of ICL error vs test n ({rng}) of the {cfg['mismatch_class']} unit pretrained "
                  f"at L = {Ls[li]:g}, smallest over seeds (matched unit: {slope[p_ref, lt].mean():.2f})",
                  slope[p_mis, li].min(), slope[p_mis, li].min() > BIAS_SLOPE, f"> {BIAS_SLOPE:g} (error flat in n)",
                  **claim_or_baseline(tag, "small-L-bias-dominated", "theorem-3-5-mismatched",
                          f"{THM35}, case L' > L: error >= L'^2 (sigma^2/(nL^2))^(2/(d+2)), bias-dominated"))
    for tag, li in (("", len(Ls) - 1), ("-control", 0)):
        run.check("large-L-noise-dominated" + tag, ("control: the same for the unit of the other regime; " if tag else
                  "") + f"log-log slope of ICL error vs test n ({rng}) of the {cfg['mismatch_class']} unit pretrained "
                  f"at L = {Ls[li]:g}, largest over seeds", slope[p_mis, li].max(), slope[p_mis, li].max() < NOISE_SLOPE,
                  f"< {NOISE_SLOPE:g} (error falls nearly like 1/n)",
                  **claim_or_baseline(tag, "large-L-noise-dominated", "theorem-3-5-mismatched",
                          f"{THM35}, case L' <= L: 'no benefit of L'', a narrow window: noise ~ 1/n"))
    # the mechanism: the learned window narrows (||M|| grows) with the pretraining L, in every seed; the untrained
    # units (the same initial M at every L) must fail
    for tag, norms in (("", a.M_norm[p_mis]), ("-untrained", a.M_norm_history[p_mis][:, 0])):   # (nL, S)
        increasing = bool(np.all(np.diff(norms, axis=0) > 0))
        run.check("window-set-by-pretraining-L" + tag, ("control: the same for the untrained units (initial M); "
                  if tag else "") + f"||M||_2 of the {cfg['mismatch_class']} units at L = "
                  f"{', '.join(f'{L:g}' for L in Ls)} (seed mean)", norms.mean(1), increasing,
                  "strictly increasing in L, in every seed",
                  **claim_or_baseline(tag, "window-set-by-pretraining-L", "window-widens",
                          "Collins et al. (abstract): the window 'widens with decreasing Lipschitzness'"))
    if a.theory:
        check_theory(run, list(a.theory))
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


def check_theory(run: Run, theories: list[TheoryAtD]) -> None:
    """Theorem 3.5 at every d of the profile: where the two branches meet, and the matched unit's decay in n; each
    with its control (the unit pretrained at the wrong L)."""
    xs = {th.d: theory_numbers(th) for th in theories}
    ds = ", ".join(str(d) for d in xs)
    Lm, Ls = theories[0].L_unit[1], theories[0].L_unit[0]

    def factor(c):                                  # how far a crossover is from L = Lm, as a factor >= 1
        return np.maximum(c / Lm, Lm / c)

    where = "; ".join(f"d = {th.d}, n = {th.n[-1]}" for th in theories)
    for tag, k, unit in (("", 1, Lm), ("-control", 0, Ls)):
        f = max(float(factor(xs[th.d]["crossover"][k]).max()) for th in theories)
        per = "; ".join(f"d = {d}: " + ", ".join(f"{v:.3g}" for v in x["crossover"][k]) for d, x in xs.items())
        run.check("thm35-crossover-at-L" + tag, ("control: the same for the unit pretrained at the wrong L; "
                  if tag else "") + f"{where}: L' where the fitted branches a L'^2 (bias) and b (noise floor) meet, "
                  f"for the unit pretrained at L = {unit:g} (L' = {', '.join(f'{v:g}' for v in theories[0].L_prime)}; "
                  f"per seed: {per}); largest factor between it and L = {Lm:g}, over d and seeds", f,
                  f < CROSSOVER_FACTOR, f"< {CROSSOVER_FACTOR:g} at every d and seed",
                  **claim_or_baseline(tag, "thm35-crossover-at-L", "theorem-3-5-mismatched",
                          f"{THM35}: the penalty switches from 'no benefit of L'' (L' <= L) to L'^2 (L' > L) at L' = L"))
    for tag, key, unit in (("", "rate", Lm), ("-control", "control_rate", Ls)):
        gap = max(float(x[key].max() - x["bound_rate"]) for x in xs.values())
        per = "; ".join(f"d = {d}: {x[key].max():.3f} (bound {x['bound_rate']:.3f}, sketch {x['sketch_rate']:.2f}, "
                        f"re-tuned NW oracle {x['oracle_rate']:.2f})" for d, x in xs.items())
        run.check("thm35-matched-rate" + tag, ("control: the same slope for the unit pretrained at the wrong L, tested "
                  "at every n; " if tag else "") + f"d = {ds}: log-log slope in n of the ICL error at L = {Lm:g} of "
                  f"units pretrained at L = {unit:g}" + ("" if tag else " and at each test n") + f", largest over "
                  f"seeds ({per}); largest slope + 1/(d+2) over d", gap, gap <= 0, "<= 0 at every d: slope <= -1/(d+2)",
                  **claim_or_baseline(tag, "thm35-matched-rate", "theorem-3-5-matched",
                          f"{THM35}: matched L, L(M) <= L^(2-2/(d+2)) (sigma^2/n)^(1/(d+2))"))
    for th in theories:
        x = xs[th.d]
        run.record(**{f"theory_d{th.d}": dict(
            L_prime=th.L_prime, n=th.n, L_unit=th.L_unit, error_at_nmax=th.at_nmax.mean(1),
            oracle_at_nmax=th.oracle[:, -1], crossover=x["crossover"].mean(-1), slope_above=x["slope_above"],
            slope_below=x["slope_below"], oracle_slope_above=x["oracle_slope_above"],
            oracle_slope_below=x["oracle_slope_below"], matched_rate=x["rate"].mean(),
            control_rate=x["control_rate"].mean(), bound_rate=x["bound_rate"], sketch_rate=x["sketch_rate"],
            oracle_rate=x["oracle_rate"], matched_error_vs_n=th.matched_rate(x["f1"]).mean(0),
            oracle_vs_n=th.oracle[x["f1"]])})
