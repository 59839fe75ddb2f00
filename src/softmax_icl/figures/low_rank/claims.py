"""Low rank: the checks of Figure 4 / Figure 10 and Theorem 4.4, each decided by the statistical design
(``book/design.yml``, ``Run.decide``) on the per-seed statistic of every seed of the run, with its trajectory (the
seed mean at every logged step) where the design follows it along training, and every rival through the same
statistic.

Per-seed statistics (K classes, S seeds): rho_1, rho_2 and min_c ||M - c BB^T||_F / ||M||_F of a unit's final M; the
log of an ICL-error ratio on the fixed evaluation set, paired by seed (the softmax unit against the linear unit of the
same seed, against the isotropic window tuned on that seed's tuning set, against fixed references of the class).
"""

from __future__ import annotations

import numpy as np

from ...book.records import BASELINE_SOURCE
from ...book.run import Run
from .analysis import LowRankAnalysis, distance_to_cBB
from .window import WindowUnits
from .sweeps import MODELS

#: The check ids that other modules of the chapter name (each check's design is in book/design.yml).
SOFTMAX_BEATS_ISOTROPIC_WINDOW = "softmax-beats-isotropic-window"
SOFTMAX_BEATS_LINEAR_ON_LINKS = "softmax-beats-linear-on-links"
SOFTMAX_RHO1_TO_ZERO = "softmax-rho1-to-zero"
SOFTMAX_RHO2_TO_ZERO = "softmax-rho2-to-zero"

EVEN_LINKS = ("lowrank_quadratic", "lowrank_cosine")          # E[f(x) x] = 0: no first-order signal
THM44 = "Collins et al. Theorem 4.4 (slides): for F_B^lin with sigma = 0 (or n = 2), M* = c BB^T"
FIG10 = "Collins et al. Fig. 4 / App. Fig. 10"
ABSTRACT_LOW_RANK = ("Collins et al. (abstract): on low-rank, linear problems the unit 'learns to project onto the "
                     "appropriate subspace'")
SLIDE_LINKS = "Collins et al. slides: 'Softmax Attention Learns Low-Dimensional Structure in Nonlinear Functions'"
SLIDE_DIMENSION = ("Collins et al. slides (Results Part II): 'Interesting case: k << d, then learning col(B) "
                   "drastically reduces ICL problem dimension'")
LINEAR_CANNOT = (f"{FIG10} and the abstract: the adaptivity 'cannot be replicated by the linear activation'")
REBUTTAL_WINDOW = ("Collins et al. rebuttal (reply to reviewer 2, point 3; a suspicion): with nonlinear link "
                   "functions 'the attention weights again learn the projection and implement a nearest neighbors "
                   "regressor in the range of the projection with appropriate neighborhood size based on the "
                   "Lipschitzness of the link functions and noise level'")

#: Short titles of the checks for the book's tables (MyST maths); a control is titled by its statement's first clause.
TITLES = {
    'softmax-rho1-to-zero': '$\\rho_1(M, B) \\to 0$ on the linear class',
    'softmax-rho2-to-zero': '$\\rho_2(M, B) \\to 0$ on the linear class',
    'links-rho1-to-zero': '$\\rho_1(M, B) \\to 0$ on the links',
    'links-rho2-to-zero': '$\\rho_2(M, B) \\to 0$ on the links',
    'softmax-M-is-cBBT': '$M = c\\,BB^\\top$ at $\\sigma = 0$',
    'thm44-n2-cBBT': '$M = c\\,BB^\\top$ at $n = 2$',
    'softmax-beats-isotropic-window': 'softmax beats the best isotropic window $M = wI$',
    'softmax-beats-linear-on-links': 'softmax beats linear and the plain average on the links',
    'softmax-beats-linear-on-linear-class': 'softmax beats linear on the linear class',
    'subspace-window-narrows-with-link-L': 'the window in $\\mathrm{col}(B)$ narrows as the link\'s $\\omega$ grows',
    'subspace-window-widens-with-sigma': 'the window in $\\mathrm{col}(B)$ widens with the noise $\\sigma$',
    'sigma-positive-rho2': '$\\rho_2(M, B)$ small with noise, $\\sigma > 0$',
    'rho-floor-falls-with-training': "$\\rho_2$'s floor falls with the training length",
    'linear-no-gain-on-even-links': 'linear attention gains nothing on the even links',
    'linear-M-unaligned-on-even-links': "linear attention's $M$ ignores $B$ on the even links",
}


def short(name: str) -> str:
    return name.replace("lowrank_", "")


def along(x: np.ndarray, steps) -> tuple:
    """A cell with its trajectory: per-seed values ``x`` (T, S) logged at ``steps`` -> (final values (S,), steps,
    seed mean at every step (T,))."""
    x = np.asarray(x, dtype=np.float64)
    return x[-1], np.asarray(steps), x.mean(-1)


def with_curve(final, curve, steps) -> tuple:
    """A ratio cell: its per-seed values ``final`` (S,) on the evaluation set, with the trajectory of the same
    statistic on the curves' tasks, ``curve`` (T, S) at ``steps`` (its seed mean at every step)."""
    return np.asarray(final, dtype=np.float64), np.asarray(steps), np.asarray(curve, dtype=np.float64).mean(-1)


def _untrained(run: Run, cid: str, statement: str, cells: dict) -> None:
    run.decide(f"{cid}-untrained", "control: the same for the untrained units (initial M); " + statement, cells,
               source=BASELINE_SOURCE)


def check_claims(run: Run, a: LowRankAnalysis) -> None:
    """Every check of the chapter, decided on the pooled seeds by the design."""
    run.titles.update(TITLES)
    cfg = run.cfg
    classes, steps = a.classes, a.log_steps
    S = a.softmax.final.shape[-1]
    sm, ln = a.softmax, a.linear
    lin = [i for i, c in enumerate(classes) if c == "lowrank_linear"]
    links = [i for i, c in enumerate(classes) if c != "lowrank_linear"]
    per = f"per seed ({S} seeds)"
    # the abstract (linear class) and the slides' nonlinear links: rho -> 0; the untrained units (initial M) must fail
    for group, idx, src in (("softmax", lin, ABSTRACT_LOW_RANK), ("links", links, SLIDE_LINKS)):
        if not idx:
            continue
        where = "the linear class F_B^lin" if group == "softmax" else "each link (" + ", ".join(
            short(classes[i]) for i in idx) + ")"
        for name, rho in (("rho1", sm.rho1), ("rho2", sm.rho2)):
            cid = f"{group}-{name}-to-zero"
            what = f"final {name[:3]}_{name[3]}(M, B) of the softmax unit on {where}, {per}"
            run.decide(cid, what + "; its seed mean followed along training",
                       {short(classes[i]): along(rho[:, i], steps) for i in idx}, source=src)
            _untrained(run, cid, what, {short(classes[i]): rho[0, i] for i in idx})
    # Theorem 4.4's sigma = 0 case on its own class: M = c B B^T (the untrained units must fail)
    if lin:
        i = lin[0]
        what = f"min_c ||M - c BB^T||_F / ||M||_F of the softmax unit, linear class, sigma = {cfg['sigma']:g}, {per}"
        run.decide("softmax-M-is-cBBT", what + "; its seed mean followed along training",
                   {"linear": along(sm.distance[:, i], steps)}, source=THM44)
        _untrained(run, "softmax-M-is-cBBT", what, {"linear": distance_to_cBB(sm.M0[i], a.B)})
    # Theorem 4.4 at n = 2 (with and without noise), against another random subspace as the rival; sigma > 0 at n
    th = a.theorem
    sig = {f"sigma = {s:g}": j for j, s in enumerate(th.sigma)}
    run.decide("thm44-n2-cBBT", f"final min_c ||M - c BB^T||_F / ||M||_F of the softmax units on the linear class at "
               f"n = {th.n[0]}, {per}, at each sigma; its seed mean followed along training",
               {lab: along(th.dist_history[:, 0, j], th.log_steps) for lab, j in sig.items()},
               source=f"{THM44}: the n = 2 case, any sigma")
    run.decide("thm44-n2-cBBT-control", f"control: the same units' distance from c B'B'^T, B' another random basis of "
               f"rank {cfg['k']}, {per}, at each sigma", {lab: th.dist_other_basis[0, j] for lab, j in sig.items()},
               source=f"{THM44}, against the wrong subspace")
    run.decide("sigma-positive-rho2", f"final rho_2(M, B) of the softmax units on the linear class at n = {th.n[1]}, "
               f"sigma = {th.sigma[1]:g}, {per}; its seed mean followed along training",
               {f"sigma = {th.sigma[1]:g}": along(th.rho2_history[:, 1, 1], th.log_steps)},
               source="beyond the papers (Theorem 4.4 covers sigma = 0 or n = 2 only)")
    # the rho floor: with a decaying learning rate it falls with the training length
    fl = a.floor
    c = fl.schedules.index("cosine")
    run.decide("rho-floor-falls-with-training", f"log of the final rho_2(M, B) after {fl.steps[-1]} over after "
               f"{fl.steps[0]} steps of training, softmax, linear class, cosine-decayed lr, {per}",
               {"cosine lr": np.log(fl.rho2[c, -1] / fl.rho2[c, 0])},
               source="beyond the papers (is the rho floor the optimiser's?)")
    # the subspace buys accuracy: the softmax unit against the best isotropic window M = w I, w tuned per class and
    # seed on the seed's tuning set (the slides' "drastically reduces ICL problem dimension")
    iso = ("that of the isotropic window M = w I (w tuned per class and seed on a tuning set of the seed's own, "
           "apart from the evaluation set)")
    run.decide("softmax-beats-isotropic-window", f"log of the softmax unit's ICL error over {iso}, {per}, on each "
               "class; its seed mean on the curves' tasks followed along training",
               {short(c): with_curve(np.log(sm.final[i] / a.oracle_wI[i]),
                                     np.log(sm.curve[:, i] / a.oracle_wI_curve_set[i]), steps)
                for i, c in enumerate(classes)}, source=SLIDE_DIMENSION)
    _untrained(run, "softmax-beats-isotropic-window", f"log of the softmax unit's ICL error over {iso}, {per}",
               {short(c): np.log(a.untrained[i] / a.oracle_wI[i]) for i, c in enumerate(classes)})
    # softmax beats linear attention and the uniform average (M = 0, what an untrained softmax unit about does) on
    # the nonlinear links; on the linear class itself linear attention is the natural estimator (a finding)
    if links:
        rival = np.minimum(ln.final, a.mean[:, None])                            # (K, S)
        rival_curve = np.minimum(ln.curve, a.mean_curve_set[None, :, None])      # (T, K, S)
        what = ("log of the softmax unit's ICL error over the better of the linear unit's (same seed) and the "
                f"uniform average's (M = 0), {per}, on each nonlinear link")
        run.decide("softmax-beats-linear-on-links", what + "; its seed mean on the curves' tasks followed along "
                   "training", {short(classes[i]): with_curve(np.log(sm.final[i] / rival[i]),
                                                              np.log(sm.curve[:, i] / rival_curve[:, i]), steps)
                                for i in links}, source=LINEAR_CANNOT)
        _untrained(run, "softmax-beats-linear-on-links", what,
                   {short(classes[i]): np.log(a.untrained[i] / rival[i]) for i in links})
    if lin:
        i = lin[0]
        run.decide("softmax-beats-linear-on-linear-class", f"log of the softmax unit's ICL error over the linear "
                   f"unit's (same seed) on the linear class F_B^lin, {per}; its seed mean on the curves' tasks "
                   "followed along training", {"linear": with_curve(np.log(sm.final[i] / ln.final[i]),
                                                                    np.log(sm.curve[:, i] / ln.curve[:, i]), steps)},
                   source="beyond the papers (the book's reading of Fig. 4; no source states it)")
    # linear attention gets no signal on the even links: no better than predicting 0, M not aligned with B B^T
    even = [i for i, c in enumerate(classes) if c in EVEN_LINKS]
    if even:
        run.decide("linear-no-gain-on-even-links", f"log of the linear unit's ICL error over the error of predicting "
                   f"0, {per}, on each even link", {short(classes[i]): np.log(ln.final[i] / a.zero[i]) for i in even},
                   source="beyond the papers (E[f(x) x] = 0 for even links)")
        run.decide("linear-M-unaligned-on-even-links", f"|cos(M, BB^T)| of the linear unit's final M, {per}, on each "
                   "even link (an i.i.d. random M gives about 1 / d)",
                   {short(classes[i]): np.abs(ln.align[-1, i]) for i in even},
                   source="beyond the papers")
    window_checks(run, a.window)
    run.record(rho1={m: a.model(m).rho1[-1].mean(-1) for m in MODELS},
               rho2={m: a.model(m).rho2[-1].mean(-1) for m in MODELS},
               rho1_init={m: a.model(m).rho1[0].mean(-1) for m in MODELS},
               rho2_init={m: a.model(m).rho2[0].mean(-1) for m in MODELS},
               distance_to_cBB={m: distance_to_cBB(a.model(m).M, a.B).mean(-1) for m in MODELS},
               M_norm={m: a.model(m).norm[-1].mean(-1) for m in MODELS},
               cos_M_BBT_per_seed={m: a.model(m).align[-1] for m in MODELS},
               M_norm_init={m: a.model(m).norm[0].mean(-1) for m in MODELS},
               icl_error={m: a.model(m).final.mean(-1) for m in MODELS},
               softmax_over_linear=sm.final.mean(-1) / ln.final.mean(-1), untrained_error=a.untrained.mean(-1),
               zero_predictor=a.zero, mean_predictor=a.mean, oracle_cBB=a.oracle_cBB,
               oracle_cBB_scale=a.oracle_cBB_scale, oracle_wI=a.oracle_wI.mean(-1),
               oracle_wI_scale=a.oracle_wI_scale.mean(-1), oracle_wI_per_seed=a.oracle_wI,
               oracle_wI_scale_per_seed=a.oracle_wI_scale,
               classes=classes, theorem_rho2=th.rho2.mean(-1), theorem_rho2_other_basis=th.rho2_other_basis.mean(-1),
               theorem_n=th.n, theorem_sigma=th.sigma, floor_steps=fl.steps, floor_rho2=fl.rho2.mean(-1),
               floor_rho1=fl.rho1.mean(-1), floor_schedules=list(fl.schedules),
               softmax_affine_minus_linear=a.affine_minus_linear)



def window_cells(w: WindowUnits, steps_of: list, axis: str, values: np.ndarray, widens: bool) -> tuple[dict, dict]:
    """The cells of a window check: per step (i, j) of ``steps_of`` (settings i -> j, ``values`` their ``axis``
    values) the log of |c| at j over |c| at i (the window narrows), or at i over at j (``widens``), metric
    "window"; rho_2 of every setting of the steps, metric "rho2"; each with its trajectory. And the control's
    cells: the same log ratios of the untrained units (the initial M, the first logged step)."""
    steps, s = w.log_steps, w.scale
    sign = -1.0 if widens else 1.0
    ratio = lambda x, i, j: sign * np.log(x[..., j, :] / x[..., i, :])      # noqa: E731  (T or none, P, S) -> S
    lab = {(i, j): f"window: {axis} = {values[i]:g} -> {values[j]:g}" for i, j in steps_of}
    cells = {lab[i, j]: (ratio(s[-1], i, j), steps, ratio(s, i, j).mean(-1)) for i, j in steps_of}
    for p in dict.fromkeys(q for ij in steps_of for q in ij):
        cells[f"rho2: {axis} = {values[p]:g}"] = along(w.rho2[:, p], steps)
    return cells, {lab[i, j]: ratio(s[0], i, j) for i, j in steps_of}


def window_checks(run: Run, w: WindowUnits) -> None:
    """The rebuttal's suspicion on the cosine link, decided by the design: the softmax window in col(B) (scale ``|c|`` =
    ``|tr(B^T M B)| / k``; the sign is immaterial on an even link) narrows as omega grows and widens with sigma, while
    rho_2(M, B) stays below the chapter's bar (the window lies in the range of the projection)."""
    S = w.scale.shape[-1]
    lip, (lo, hi) = list(w.lipschitz), w.noise
    what = (f"|c| = |tr(B^T M B)| / k of the softmax unit's M on the cosine link cos(ω a^T B^T x), per seed "
            f"({S} seeds)")
    for cid, steps_of, axis, values, widens, head in (
            ("subspace-window-narrows-with-link-L", list(zip(lip[:-1], lip[1:])), "ω", w.omega, False,
             f"log of {what}, at one ω over at the next smaller ω (σ = {w.sigma[lip[0]]:g})"),
            ("subspace-window-widens-with-sigma", [(lo, hi)], "σ", w.sigma, True,
             f"log of {what}, at the low σ over at the high σ (ω = {w.omega[lo]:g})")):
        cells, control = window_cells(w, steps_of, axis, values, widens)
        run.decide(cid, f"{head}; cells " + ", ".join(c.split(": ", 1)[1] for c in cells if c.startswith("window"))
                   + "; and rho_2(M, B) of each of those units (the window lies in the range of the projection); "
                   "their seed means followed along training", cells, source=REBUTTAL_WINDOW)
        run.decide(f"{cid}-untrained", f"control: the same log ratio of the untrained units (initial M); {head}",
                   control, source=BASELINE_SOURCE)
    run.record(window_omega=w.omega, window_sigma=w.sigma, window_scale=w.scale[-1].mean(-1),
               window_scale_per_seed=w.scale[-1], window_scale_init=w.scale[0].mean(-1),
               window_rho2=w.rho2[-1].mean(-1), window_best_scale=w.best_scale,
               window_best_over_mean=w.best_over_mean)
