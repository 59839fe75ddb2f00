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
            signs = "".join("+" if v > 0 else "−" for v in x.align[-1, i])      # sign of <M, BB^T> per seed
            rows.append([short(c) if j == 0 else "", m, fmt(x.rho1[-1, i].mean()), fmt(x.rho2[-1, i].mean()),
                         f"{fmt(distance_to_cBB(x.M[i], a.B).mean())} ({signs})", fmt(x.norm[-1, i].mean())])
    init = ", ".join(f"{m} {fmt(a.model(m).norm[0].mean())}" for m in MODELS)
    subspace = table(
        ["Class", "Model", "$\\rho_1(M, B)$", "$\\rho_2(M, B)$", "Distance to $cBB^\\top$ (sign of $c$)", NORM], rows,
        title="The learned $M$ against the tasks' subspace $B$ (end of pretraining, seed means)",
        widths=[14, 12, 16, 16, 26, 16],
        note="Distance: $\\min_c \\lVert M - cBB^\\top\\rVert_F / \\lVert M\\rVert_F$; in brackets the sign of the "
             f"best $c$, one sign per seed. {NORM} at initialisation: {init}.")
    rows = [[short(c), fmt(a.softmax.final[i].mean()), fmt(a.linear.final[i].mean()), fmt(a.zero[i]),
             fmt(a.oracle_cBB[i]), fmt(a.oracle_wI[i])] for i, c in enumerate(a.classes)]
    errors = table(["Class", "Softmax", "Linear", "Predict 0", "Best $M = cBB^\\top$", "Best $M = wI$"], rows,
                   title="ICL error of the pretrained units and of the reference predictors (seed means)",
                   note="The references: predicting 0, and the softmax unit at the best multiple of $BB^\\top$ and "
                        "of the identity.")
    return subspace + "\n\n" + errors


def theorem_table(a: LowRankAnalysis) -> str:
    """Theorem 4.4 at n = 2 and sigma > 0, the rho floor against the training length, and the affine link."""
    th, fl = a.theorem, a.floor
    header = ["$n$"] + [x for s in th.sigma for x in (f"$\\sigma = {s:g}$", f"$\\sigma = {s:g}$, other basis $B'$")]
    rows = [[str(n)] + [x for j in range(len(th.sigma)) for x in (fmt(th.rho2[i, j].mean()),
                                                                    fmt(th.rho2_other_basis[i, j].mean()))]
            for i, n in enumerate(th.n)]
    theorem = table(header, rows, title="Theorem 4.4: final $\\rho_2(M, B)$ of the softmax units on the linear class "
                                        "(seed means)",
                    note="Against another basis $B'$: the same $M$ measured against a random subspace (the control).")
    rows = [[f"{sch} learning rate"] + [fmt(v) for v in fl.rho2[k].mean(-1)] for k, sch in enumerate(fl.schedules)]
    floor = table(["Schedule"] + [f"{s} steps" for s in fl.steps], rows,
                  title="The $\\rho$ floor: final $\\rho_2(M, B)$ against the training length (softmax, linear class, "
                        "seed means)")
    out = [theorem, floor]
    if a.affine_minus_linear == a.affine_minus_linear:                       # not NaN: both classes present
        mant, exp = f"{a.affine_minus_linear:.1e}".split("e")
        out.append("Softmax units on the affine link against those on the linear class: "
                   "$\\max \\lVert M_\\text{affine} - M_\\text{linear}\\rVert_F / \\lVert M_\\text{linear}\\rVert_F "
                   f"= {mant} \\times 10^{{{int(exp)}}}$ "
                   "(the same units: the softmax weights sum to one).")
    return "\n\n".join(out)
