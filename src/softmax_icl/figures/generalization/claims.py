"""Generalisation: the checks of Figure 5 and Theorem 3.5, decided by the statistical design (``book/design.yml``,
:meth:`softmax_icl.book.run.Run.decide`).

Every check takes one per-seed sample of the design's statistic per cell (every seed of the sweeps, a batch axis of
each), the seed mean at every logged step where the design follows the statistic along training (on the curve set,
:func:`~softmax_icl.figures.generalization.analysis.curves`), and every rival the design names through the same
statistic and test. Ratios are natural logarithms per seed; the test, threshold and margin are the design's.
"""

from __future__ import annotations

import numpy as np

from ...book.records import BASELINE_SOURCE as BASE
from ...book.run import Run
from .analysis import GeneralizationAnalysis, TheoryAtD, index_of, loglog_slope, two_branch_fit, upper_half

#: The check ids that other modules of the chapter name (each check's design is in book/design.yml).
MATCHED_L_CURVES_COINCIDE = "matched-L-curves-coincide"
MATCHED_L_LEVEL = "matched-L-level"
MISMATCHED_L_SMALL_WORSE = "mismatched-L-small-worse"
THM35_CROSSOVER_AT_L = "thm35-crossover-at-L"
THM35_MATCHED_BOUND = "thm35-matched-bound"
THM35_MATCHED_BOUND_CONTROL = "thm35-matched-bound-control"

FIG5 = "Collins et al. Fig. 5"
SRC_5A = "Collins et al. Fig. 5(a) (slides): 'All three attention units generalize to all test distributions'"
THM35 = "Collins et al. Theorem 3.5 (slides)"

#: Short titles of the checks for the book's tables (MyST maths); a control is titled by its statement's first clause.
TITLES = {
    'matched-L-level': 'every unit near the best window at the training length',
    'thm35-slope-above-L': "the error grows like $L'^2$ above $L$",
    'no-negative-window': 'no unit attends away from the query',
    'matched-L-curves-coincide': 'units of another class as good as the in-class unit, up to the training length',
    'matched-L-curves-coincide-long-contexts': 'units of another class as good as the in-class unit, up to twice '
                                               'that length',
    'mismatched-L-small-worse': 'pretrained at a smaller $L$: worse',
    'mismatched-L-large-worse': 'pretrained at a larger $L$: worse',
    'small-L-bias-dominated': 'too small $L$: error flat in $n$ (bias)',
    'large-L-noise-dominated': 'too large $L$: error falls like $1/n$ (noise)',
    'window-set-by-pretraining-L': '$\\|M\\|_2$ rises with the pretraining $L$',
    'thm35-crossover-at-L': "the penalty switches branch at $L' = L$",
    'thm35-matched-bound': "matched error below Theorem 3.5's bound",
    'thm35-matched-rate': 'matched error falls at least like $n^{-1/(d+2)}$',
    'thm35-matched-L-exponent': 'matched error grows at most like $L^{2-2/(d+2)}$',
}


def _n_range(ns) -> str:
    return f"n = {ns[0]}..{ns[-1]}"


def check_claims(run: Run, a: GeneralizationAnalysis) -> None:
    """Every check of the chapter."""
    run.titles.update(TITLES)
    S = a.softmax.shape[2]
    neg = [(a.w_signed < 0).reshape(-1, S)] + [(th.w_signed < 0).reshape(-1, S) for th in a.theory]
    share = np.concatenate(neg).mean(0)                                       # (S,)
    run.decide("no-negative-window", f"share of a seed's {sum(len(x) for x in neg)} softmax units (every sweep) "
               f"that end with tr(M) < 0 (attending away from the query), {S} seeds", {"every sweep": share},
               source="beyond the papers (the theorem's optimum is M = wI with w > 0)")
    _same_L(run, a)
    _other_L(run, a)
    if a.theory:
        check_theory(run, list(a.theory))
    _record(run, a)


def _same_L(run: Run, a: GeneralizationAnalysis) -> None:
    """Fig. 5(a), the comparison the authors make: per seed, each unit pretrained at the test L on another class
    against the unit pretrained on the test class itself (paired: the same seed, tasks and evaluation set), at every
    n up to pretraining; the cosine unit of a wrong L in its place is the rival. And the level: at the pretraining
    length every unit against the oracle window of its test class, with three identical units at M = 0 as the rival
    (curves that coincide because every unit is equally poor)."""
    cfg, classes, Ls, ns, cv = run.cfg, a.classes, a.L, list(a.n), a.curves
    S, lt, mis = a.softmax.shape[2], index_of(a.L, a.L_test), cfg["mismatch_class"]
    logr = np.log(a.softmax / a.oracle[None, None, None])                   # (P, nL, S, T, N)
    upto = [n for n in ns if n <= a.n_train]
    curve = {u: np.log(cv.of(*u) / cv.oracle).mean(1) for u in cv.units}    # (T_log, T, Nc), seed mean

    def cells(n_max, trajectory):
        out = {}
        for p, pc in enumerate(classes):
            for t, tc in enumerate(classes):
                for n in (n for n in ns if n <= n_max and p != t):
                    x = logr[p, lt, :, t, ns.index(n)] - logr[t, lt, :, t, ns.index(n)]
                    j = cv.n.index(n) if trajectory else None
                    key = f"pretrained {pc}, test {tc}, n = {n}"
                    out[key] = (x, cv.steps, curve[(pc, a.L_test)][:, t, j] - curve[(tc, a.L_test)][:, t, j]) \
                        if trajectory else x
        return out

    what = (f"log of the ICL error of the unit pretrained on another class over the unit pretrained on the test "
            f"class, per seed ({S} seeds, paired), every class at L = {a.L_test:g}")
    run.decide("matched-L-curves-coincide", f"{what}, at every {_n_range(upto)} (up to the pretraining length); "
               f"seed mean followed at {len(cv.steps)} logged steps on the curve set ({cfg['curve_tasks']} tasks)",
               cells(a.n_train, True), source=SRC_5A)
    p_mis = index_of(classes, mis)
    wrong = {f"{mis} at L = {Ls[li]:g}, test {tc}, n = {n}":
             logr[p_mis, li, :, t, ns.index(n)] - logr[t, lt, :, t, ns.index(n)]
             for li in (0, len(Ls) - 1) for t, tc in enumerate(classes) for n in upto}
    run.decide("matched-L-curves-coincide-wrong-L", f"control: the same for the {mis} unit pretrained at L = "
               f"{Ls[0]:g} or {Ls[-1]:g} against the unit pretrained on the test class at L = {a.L_test:g}; {S} "
               f"seeds, every test class and {_n_range(upto)}", wrong, source=BASE)
    k, jt = ns.index(a.n_train), cv.n.index(a.n_train)
    level = {f"pretrained {pc}, test {tc}, n = {a.n_train}": (logr[p, lt, :, t, k], cv.steps,
                                                              curve[(pc, a.L_test)][:, t, jt])
             for p, pc in enumerate(classes) for t, tc in enumerate(classes)}
    run.decide("matched-L-level", f"log of the ICL error over the tuned Nadaraya-Watson oracle's of the test class, "
               f"per seed ({S} seeds), of the units pretrained at L = {a.L_test:g} on each class, tested on each "
               f"class at the pretraining length n = {a.n_train}; seed mean followed at {len(cv.steps)} logged steps",
               level, source=SRC_5A)
    zero = {f"M = 0, test {tc}, n = {a.n_train}": np.full(S, np.log(a.zero[t, k] / a.oracle[t, k]))
            for t, tc in enumerate(classes)}
    run.decide("matched-L-level-identical", "control: the same for three identical units at M = 0 (the uniform "
               "average over the context; one value on the fixed evaluation set, the same for every seed), every "
               f"test class at n = {a.n_train}", zero, source=BASE)
    longer = [n for n in ns if n <= 2 * a.n_train]
    run.decide("matched-L-curves-coincide-long-contexts", f"{what}, at every {_n_range(longer)} (up to twice the "
               "pretraining length)", cells(2 * a.n_train, False),
               source="beyond the papers: test lengths past pretraining")


def _other_L(run: Run, a: GeneralizationAnalysis) -> None:
    """Fig. 5(b) and the two regimes of Theorem 3.5 on its units, and the window against the pretraining L."""
    cfg, classes, Ls, ns, cv = run.cfg, a.classes, a.L, np.array(a.n), a.curves
    S, lt, j_tr = a.softmax.shape[2], index_of(Ls, a.L_test), index_of(a.n, a.n_train)
    mis, ref_cls = cfg["mismatch_class"], cfg["reference_class"]
    t = p_mis = index_of(classes, mis)
    p_ref = index_of(classes, ref_cls)
    p_other = next(i for i, c in enumerate(classes) if i not in (p_mis, p_ref))
    ref = a.softmax[p_ref, lt, :, t, j_tr]                                   # (S,)
    jc = cv.n.index(a.n_train)
    ref_curve = cv.of(ref_cls, a.L_test)[..., t, jc]                         # (T_log, S)
    at = f"test {mis}, L = {a.L_test:g}, n = {a.n_train}"
    for name, li in (("small", 0), ("large", len(Ls) - 1)):
        x = np.log(a.softmax[p_mis, li, :, t, j_tr] / ref)
        traj = np.log(cv.of(mis, Ls[li])[..., t, jc] / ref_curve).mean(1)
        run.decide(f"mismatched-L-{name}-worse", f"log of the ICL error ({at}) of the {mis} unit pretrained at "
                   f"L = {Ls[li]:g} over the {ref_cls} unit pretrained at L = {a.L_test:g}, per seed ({S} seeds, "
                   f"paired); seed mean followed at {len(cv.steps)} logged steps on the curve set",
                   {at: (x, cv.steps, traj)},
                   source=f"{FIG5}(b): 'Only pretraining on the same Lipschitzness generalizes'")
    run.decide("mismatched-L-same-L-control", f"control: the same log ratio for the {classes[p_other]} unit "
               f"pretrained at the same L = {a.L_test:g}; {S} seeds",
               {at: np.log(a.softmax[p_other, lt, :, t, j_tr] / ref)}, source=BASE)
    # Theorem 3.5's two regimes: too small L -> bias-dominated (flat in n); too large L -> noise-dominated; each
    # regime's statistic on the other regime's unit is its rival
    far = ns >= a.n_train / 2
    if far.sum() < 2:
        far = np.arange(len(ns)) >= len(ns) - 2
    slope = loglog_slope(ns[far], a.softmax[:, :, :, t][..., far])           # (P, nL, S)
    rng = _n_range(ns[far])
    for cid, li, other, what in (
            ("small-L-bias-dominated", 0, len(Ls) - 1,
             f"{THM35}, case L' > L: error >= L'^2 (sigma^2/(nL^2))^(2/(d+2)), bias-dominated"),
            ("large-L-noise-dominated", len(Ls) - 1, 0,
             f"{THM35}, case L' <= L: 'no benefit of L'', a narrow window: noise ~ 1/n")):
        for tag, k in (("", li), ("-control", other)):
            run.decide(cid + tag, ("control: the same for the unit of the other regime; " if tag else "") +
                       f"log-log slope of the ICL error in the test n ({rng}) of the {mis} unit pretrained at "
                       f"L = {Ls[k]:g}, tested on {mis} at L = {a.L_test:g}, per seed ({S} seeds)",
                       {rng: slope[p_mis, k]},
                       source=BASE if tag else what)
    # the mechanism: the learned window narrows (||M|| grows) with the pretraining L; the untrained units (the same
    # initial M at every L) are the rival
    hist = a.M_norm_history[p_mis]                                            # (nL, T_log, S)
    steps = [f"L = {Ls[i]:g} to {Ls[i + 1]:g}" for i in range(len(Ls) - 1)]
    grown = {s: (np.log(hist[i + 1, -1] / hist[i, -1]), a.log_steps, np.log(hist[i + 1] / hist[i]).mean(-1))
             for i, s in enumerate(steps)}
    run.decide("window-set-by-pretraining-L", f"log of ||M||_2 of the {mis} unit pretrained at one L over the one at "
               f"the previous L, per seed ({S} seeds); seed mean followed at {len(a.log_steps)} logged steps", grown,
               source="Collins et al. (abstract): the window 'widens with decreasing Lipschitzness'")
    run.decide("window-set-by-pretraining-L-untrained", f"control: the same for the untrained units (initial M); "
               f"{S} seeds", {s: np.log(hist[i + 1, 0] / hist[i, 0]) for i, s in enumerate(steps)}, source=BASE)


def _at_own_n(th: TheoryAtD, k: int, f: int) -> np.ndarray:
    """(S, N): the units of family ``k`` (0: pretrained at L_unit[0], 1: at L_unit[1]), each pretrained at one n of
    the grid and tested at that n, on the test L' of column ``f``."""
    return np.stack([th.error[k, j, :, f, j] for j in range(len(th.n))], -1)


def theory_numbers(th: TheoryAtD) -> dict:
    """The fits of Theorem 3.5 at one d (computed here so the checks, the table and the record agree)."""
    f1 = index_of(th.L_prime, th.L_unit[1])
    a_, b_ = two_branch_fit(th.L_prime, th.at_nmax)                         # (2, S)
    crossover = np.sqrt(np.clip(b_, 1e-30, None) / np.clip(a_, 1e-30, None))  # (2, S)
    above, below = th.L_prime > th.L_unit[1], th.L_prime < th.L_unit[1]
    mean = th.at_nmax.mean(1)                                                # (2, F)
    rate = loglog_slope(th.n, th.matched_rate(f1))                           # (S,)
    f0 = index_of(th.L_prime, th.L_unit[0])
    small = _at_own_n(th, 0, f1)                     # (S, N) the small-L units, each pretrained and tested at its n
    ctrl = loglog_slope(th.n, small)                                         # (S,)
    exponent = 2.0 - 2.0 / (th.d + 2)                                        # the bound's exponent of L
    per_L = np.log(th.L_unit[1] / th.L_unit[0])
    return dict(f1=f1, crossover=crossover, slope_above=loglog_slope(th.L_prime[above], mean[:, above]),
                slope_below=loglog_slope(th.L_prime[below], mean[:, below]),
                oracle_slope_above=loglog_slope(th.L_prime[above], th.oracle[above, -1]),
                oracle_slope_below=loglog_slope(th.L_prime[below], th.oracle[below, -1]),
                rate=rate, control_rate=ctrl, bound_rate=-1.0 / (th.d + 2), sketch_rate=-2.0 / (th.d + 2),
                oracle_rate=float(loglog_slope(th.n, th.oracle[f1])),
                over_bound=np.log(th.matched_rate(f1) / th.bound),              # (S, N) matched unit at each n
                control_over_bound=np.log(small / th.bound),                    # (S, N) small-L unit at each n
                # (S, N) slope in L between the units pretrained and tested at the same L, less the exponent; the
                # rival: the small-L unit (one window) tested at both L
                L_exponent=np.log(th.matched_rate(f1) / _at_own_n(th, 0, f0)) / per_L - exponent,
                control_L_exponent=np.log(small / _at_own_n(th, 0, f0)) / per_L - exponent, bound_exponent=exponent)


def check_theory(run: Run, theories: list[TheoryAtD]) -> None:
    """Theorem 3.5 at every d of the profile: the matched bound itself, where the two branches meet, and the matched
    unit's decay in n; each with its rival (the unit pretrained at the wrong L)."""
    xs = {th.d: theory_numbers(th) for th in theories}
    Lm, Ls = theories[0].L_unit[1], theories[0].L_unit[0]
    S = theories[0].error.shape[2]
    at_nmax = {th.d: f"d = {th.d}, n = {th.n[-1]}" for th in theories}
    for tag, k, unit in (("", 1, Lm), ("-control", 0, Ls)):
        run.decide("thm35-crossover-at-L" + tag, ("control: the same for the unit pretrained at the wrong L; "
                   if tag else "") + f"|log(L_x / {Lm:g})|, L_x the L' where the fitted branches a L'^2 (bias) and b "
                   f"(noise floor) meet, for the unit pretrained at L = {unit:g} (L' = "
                   f"{', '.join(f'{v:g}' for v in theories[0].L_prime)}), per seed ({S} seeds), at the largest n of "
                   "each d", {at_nmax[d]: np.abs(np.log(x["crossover"][k] / Lm)) for d, x in xs.items()},
                   source=BASE if tag else f"{THM35}: the penalty switches from 'no benefit of L'' (L' <= L) to "
                   "L'^2 (L' > L) at L' = L")
    above = {th.d: th.L_prime > th.L_unit[1] for th in theories}
    below = {th.d: th.L_prime <= th.L_unit[1] for th in theories}
    for tag, side in (("", above), ("-control", below)):
        run.decide("thm35-slope-above-L" + tag, ("control: the same slope over L' <= L, the branch with 'no benefit of "
                   "L''; " if tag else "") + f"log-log slope in L' of the ICL error of the unit pretrained at "
                   f"L = {Lm:g} (ReLU, largest n of each d) over L' = " + "; ".join(
                       f"d = {th.d}: {', '.join(f'{v:g}' for v in th.L_prime[side[th.d]])}" for th in theories) +
                   f", per seed ({S} seeds)", {at_nmax[th.d]: loglog_slope(th.L_prime[side[th.d]],
                                                                           th.at_nmax[1][:, side[th.d]])
                                               for th in theories},
                   source=BASE if tag else f"{THM35}: for L' > L the error grows like L'^2 ('worse dependence on "
                   "L'')")
    for tag, key, unit in (("", "over_bound", Lm), ("-control", "control_over_bound", Ls)):
        cells = {f"d = {th.d}, n = {n}": xs[th.d][key][:, th.n.index(n)] for th in theories for n in upper_half(th.n)}
        run.decide("thm35-matched-bound" + tag, ("control: the same for the units pretrained at the wrong L, one "
                   "at each test n; " if tag else "") + f"log of the ICL error (ReLU, tested at L = "
                   f"{Lm:g}) of the units pretrained at L = {unit:g} and at each test n" +
                   f" over the bound L^(2 - 2/(d+2)) (sigma^2/n)^(1/(d+2)) (constant 1, as the slide writes it), per "
                   f"seed ({S} seeds), at the upper half of each d's n grid", cells,
                   source=BASE if tag else f"beyond the papers: {THM35}'s matched bound with the constant 1 the "
                   "informal slide writes (every model of the chapter, the uniform average included, lies below it)")
    for tag, key, unit in (("", "rate", Lm), ("-control", "control_rate", Ls)):
        ns = {th.d: _n_range(th.n) for th in theories}
        run.decide("thm35-matched-rate" + tag, ("control: the same slope for the units pretrained at the wrong L, "
                   "one at each test n; " if tag else "") + f"log-log slope in n of the ICL error at L = {Lm:g} of "
                   f"units pretrained at L = {unit:g} and at each test n, plus 1/(d+2), "
                   f"per seed ({S} seeds)", {f"d = {d}, {ns[d]}": x[key] - x["bound_rate"] for d, x in xs.items()},
                   source=BASE if tag else f"{THM35}: matched L, 'for large enough n, L(M) <= L^(2-2/(d+2)) "
                   "(sigma^2/n)^(1/(d+2))', read as the bound's form in n (the informal slide's constant is not the "
                   "theorem's)")
    for tag, key in (("", "L_exponent"), ("-control", "control_L_exponent")):
        cells = {f"d = {th.d}, n = {n}": xs[th.d][key][:, th.n.index(n)] for th in theories for n in upper_half(th.n)}
        run.decide("thm35-matched-L-exponent" + tag, (
            f"control: one window for both L, the unit pretrained at L = {Ls:g} (and at the test n), tested at "
            f"L' = {Lm:g} over at L' = {Ls:g}" if tag else
            f"units pretrained and tested at the same L (ReLU, each pretrained at the test n): the log of the ICL "
            f"error at L = {Lm:g} over at L = {Ls:g}") + f", divided by log({Lm:g}/{Ls:g}) (the log-log slope in L), "
            f"minus the bound's exponent 2 - 2/(d+2), per seed ({S} seeds), at the upper half of each d's n grid",
            cells, source=BASE if tag else f"{THM35}: matched L, 'for large enough n, L(M) <= L^(2-2/(d+2)) "
            "(sigma^2/n)^(1/(d+2))', read as the bound's form in L")
    for th in theories:
        x = xs[th.d]
        run.record(**{f"theory_d{th.d}": dict(
            L_prime=th.L_prime, n=th.n, L_unit=th.L_unit, error_at_nmax=th.at_nmax.mean(1),
            oracle_at_nmax=th.oracle[:, -1], crossover=x["crossover"].mean(-1), slope_above=x["slope_above"],
            slope_below=x["slope_below"], oracle_slope_above=x["oracle_slope_above"],
            oracle_slope_below=x["oracle_slope_below"], matched_rate=x["rate"].mean(),
            control_rate=x["control_rate"].mean(), bound_rate=x["bound_rate"], sketch_rate=x["sketch_rate"],
            oracle_rate=x["oracle_rate"], matched_error_vs_n=th.matched_rate(x["f1"]).mean(0),
            oracle_vs_n=th.oracle[x["f1"]], bound_vs_n=th.bound, bound_exponent=x["bound_exponent"],
            matched_L_exponent_vs_n=x["L_exponent"].mean(0) + x["bound_exponent"],
            control_L_exponent_vs_n=x["control_L_exponent"].mean(0) + x["bound_exponent"])})


def _record(run: Run, a: GeneralizationAnalysis) -> None:
    """The chapter's key numbers (seed means) for the machine-readable record."""
    cfg, classes = run.cfg, a.classes
    lt, j_tr = index_of(a.L, a.L_test), index_of(a.n, a.n_train)
    err = a.softmax.mean(2)                                                   # (P, nL, T, N)
    matched = err[:, lt]
    t, p_ref = index_of(classes, cfg["mismatch_class"]), index_of(classes, cfg["reference_class"])
    run.record(seeds=int(a.softmax.shape[2]), seeds_with_negative_window=(a.w_signed < 0).sum(-1),
               w_signed=a.w_signed.mean(-1), matched_error_at_n_train=matched[:, :, j_tr],
               matched_over_oracle=np.exp(np.log(a.softmax[:, lt] / a.oracle).mean(1)),
               mismatch_factor_all_classes=err[:, :, t, j_tr] / err[p_ref, lt, t, j_tr],
               M_norm=a.M_norm.mean(-1), zero_error=a.zero,
               softmax_over_oracle_at_n_train=matched[:, :, j_tr] / a.oracle[None, :, j_tr],
               linear_error_at_n_train=a.linear.mean(1)[:, :, j_tr], oracle_error=a.oracle,
               oracle_w=a.oracle_w, classes=classes, L=a.L, n=list(map(int, a.n)),
               loss_change_worst={k: float(np.abs(v).max()) for k, v in a.loss_change.items()})
