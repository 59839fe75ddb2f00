"""Low rank: the chapter's tables, as MyST markdown (``chapter.show(summary.key_numbers_table(result))``).

Numbers are rounded as they were printed (not compared character by character: nbval checks only the verdicts).
"""

from __future__ import annotations

from ...book.chapter import table
from ...profiles import fmt
from .analysis import LowRankAnalysis, distance_to_cBB
from .claims import short
from .sweeps import MODELS

NORM = "$\\lVert M\\rVert_2$"


def key_numbers_table(a: LowRankAnalysis) -> str:
    """The numbers behind the claims, as two tables: the learned M against the subspace (one row per class and
    model), and the ICL errors against the reference predictors (one row per class)."""
    rows = []
    for i, c in enumerate(a.classes):
        for j, m in enumerate(MODELS):
            x = a.model(m)
            pos = int((x.align[-1, i] > 0).sum())                          # seeds whose <M, BB^T> > 0
            signs = f"{pos}+ {x.align.shape[-1] - pos}−"
            rows.append([short(c) if j == 0 else "", m, fmt(x.rho1[-1, i].mean()), fmt(x.rho2[-1, i].mean()),
                         f"{fmt(distance_to_cBB(x.M[i], a.B).mean())} ({signs})", fmt(x.norm[-1, i].mean())])
    init = ", ".join(f"{m} {fmt(a.model(m).norm[0].mean())}" for m in MODELS)
    subspace = table(
        ["Class", "Model", "$\\rho_1(M, B)$", "$\\rho_2(M, B)$", "Distance to $cBB^\\top$ (sign of $c$)", NORM], rows,
        title="The learned $M$ against the subspace $B$ (means over the trained units)", folded=True,
        widths=[14, 12, 16, 16, 26, 16],
        note="Distance: $\\min_c \\lVert M - cBB^\\top\\rVert_F / \\lVert M\\rVert_F$; in brackets how many "
             f"seeds' best $c$ is positive (+) and negative (−). {NORM} at initialisation: {init}.")
    rows = [[short(c), fmt(a.softmax.final[i].mean()), fmt(a.linear.final[i].mean()), fmt(a.zero[i]),
             fmt(a.mean[i]), fmt(a.oracle_cBB[i]), fmt(a.oracle_wI[i].mean())] for i, c in enumerate(a.classes)]
    errors = table(["Class", "Softmax", "Linear", "Predict 0", "Plain average", "Best $M = cBB^\\top$",
                    "Best $M = wI$"], rows,
                   title="ICL error of the units and of the references (means over the trained units)", folded=True,
                   note="The references: predicting 0, the plain average of the context labels (softmax with "
                        "$M = 0$), and the softmax unit at the best multiple of $BB^\\top$ (tuned per class) and of "
                        "the identity (tuned per class and seed, each seed on a tuning set of its own: the mean over "
                        "the seeds).")
    return subspace + "\n\n" + errors


def theorem_table(a: LowRankAnalysis) -> str:
    """Theorem 4.4 at n = 2 and sigma > 0, the rho floor against the training length, and the affine link."""
    th, fl = a.theorem, a.floor
    header = ["$n$"] + [x for s in th.sigma for x in (f"$\\sigma = {s:g}$", f"$\\sigma = {s:g}$, other basis $B'$")]
    rows = [[str(n)] + [x for j in range(len(th.sigma)) for x in (fmt(th.rho2[i, j].mean()),
                                                                    fmt(th.rho2_other_basis[i, j].mean()))]
            for i, n in enumerate(th.n)]
    theorem = table(header, rows, title="Theorem 4.4: final $\\rho_2(M, B)$ of the softmax units on the linear class "
                                        "(means over the trained units)",
                    note="Against another basis $B'$: the same $M$ measured against a random subspace (the control).")
    rows = [[f"{sch} learning rate"] + [fmt(v) for v in fl.rho2[k].mean(-1)] for k, sch in enumerate(fl.schedules)]
    floor = table(["Schedule"] + [f"{s} steps" for s in fl.steps], rows,
                  title="The $\\rho$ floor: final $\\rho_2(M, B)$ against the training length (softmax, linear class, "
                        "means over the trained units)")
    out = [theorem, floor]
    if a.affine_minus_linear == a.affine_minus_linear:                       # not NaN: both classes present
        mant, exp = f"{a.affine_minus_linear:.1e}".split("e")
        out.append("Softmax units on the affine link against those on the linear class: "
                   "$\\max \\lVert M_\\text{affine} - M_\\text{linear}\\rVert_F / \\lVert M_\\text{linear}\\rVert_F "
                   f"= {mant} \\times 10^{{{int(exp)}}}$ "
                   "(the same units: the softmax weights sum to one).")
    return "\n\n".join(out)


def window_table(a: LowRankAnalysis) -> str:
    """The window sweep on the cosine link: per setting (omega, sigma) the trained units' ``|c| = |tr(B^T M B)| / k``
    (seed mean and range), at initialisation, the best window M = c BB^T with its error over the plain average's,
    and rho_2 of the trained units."""
    w = a.window
    s, r = w.scale, w.rho2
    order = list(w.lipschitz) + [p for p in w.noise if p not in w.lipschitz]
    rows = [[f"{w.omega[p]:g}", f"{w.sigma[p]:g}", f"{fmt(s[-1, p].mean())} ({fmt(s[-1, p].min())}–"
             f"{fmt(s[-1, p].max())})", fmt(s[0, p].mean()), fmt(w.best_scale[p]), fmt(w.best_over_mean[p]),
             fmt(r[-1, p].mean())] for p in order]
    c = "$\\lvert c\\rvert$"
    return table(["$\\omega$", "$\\sigma$", f"Trained {c} (range over the trained units)", f"{c}, untrained",
                  "Best $c$ of $M = cBB^\\top$", "Its error / plain average's", "Trained $\\rho_2(M, B)$"], rows,
                 title="The window in $\\mathrm{col}(B)$ on the cosine link (means over the trained units)", folded=True,
                 note=f"{c[:-1]} = \\lvert\\mathrm{{tr}}(B^\\top M B)\\rvert / k$ of the trained softmax units on "
                      "$\\cos(\\omega a^\\top B^\\top x)$. Best $c$: the window $M = cBB^\\top$ tuned on the first "
                      "seed's tuning set; its ICL error over the plain average's ($M = 0$) on the evaluation set says "
                      "how much a window buys there. The first rows are the $\\omega$ grid, the last the noise levels "
                      "at their $\\omega$.")
