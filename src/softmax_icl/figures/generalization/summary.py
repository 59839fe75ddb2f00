"""Generalisation: the chapter's tables, as MyST markdown (``chapter.show(summary.key_numbers_table(result))``).

Numbers are rounded as they were printed (not compared character by character: nbval checks only the verdicts).
"""

from __future__ import annotations

import numpy as np

from ...book.chapter import table
from ...profiles import fmt
from .analysis import GeneralizationAnalysis, index_of
from .claims import theory_numbers


def key_numbers_table(a: GeneralizationAnalysis) -> str:
    """ICL error of every pretrained unit on every test class at the pretraining n (the numbers behind the claims)."""
    classes = a.classes
    j_tr = index_of(a.n, a.n_train)
    err = a.softmax.mean(2)
    rows = [[f"{c}, $L = {L:g}$", fmt(a.M_norm[p, li].mean()), str(int((a.w_signed[p, li] < 0).sum()))]
            + [fmt(err[p, li, t, j_tr]) for t in range(len(classes))]
            for p, c in enumerate(classes) for li, L in enumerate(a.L)]
    rows.append(["linear attention (matched)", "", ""]
                + [fmt(a.linear.mean(1)[t, t, j_tr]) for t in range(len(classes))])
    rows.append(["NW oracle", "", ""] + [fmt(a.oracle[t, j_tr]) for t in range(len(classes))])
    header = ["Pretrained on", "$\\lVert M\\rVert_2$", "Seeds with $\\mathrm{tr}(M) < 0$"]
    header += [f"Test {c}" for c in classes]
    return table(header, rows, title=f"ICL error at $n = {a.n_train}$ (the pretraining $n$) on each test class at "
                             f"$L = {a.L_test:g}$, per pretraining class and $L$ (means)",
                 folded=len(rows) > 8, widths=[22, 10, 14] + [54 // max(len(classes), 1)] * len(classes),
                 note="$\\lVert M\\rVert_2$: the learned inverse window; a unit with $\\mathrm{tr}(M) < 0$ attends "
                      "away from the query. Linear attention (matched): the linear unit pretrained on the "
                      "test class at the test $L$; NW oracle: the Nadaraya–Watson estimator at its best bandwidth.")


def convergence_table(a: GeneralizationAnalysis) -> str:
    """The loss trend over the last quarter of pretraining, per sweep (a display: the checks followed along training
    are judged by the design's settling rule on their own statistics)."""
    rows = [[f"`{k}`", str(len(v)), f"{np.abs(v).max():.3f}", f"{np.median(v):.3f}"] for k, v in a.loss_change.items()]
    return table(["Sweep", "Units", "Largest change (absolute)", "Median change"], rows,
                 title="The training loss over the last quarter of pretraining", folded=True,
                 note="The fitted relative change of each unit's training loss over the last quarter of pretraining.")


def theory_table(a: GeneralizationAnalysis) -> str:
    """Theorem 3.5's fits at every d: the two branches and where they meet (one table), the decay in n (another)."""
    fits, decay, tested = [], [], []
    for th in a.theory:
        x = theory_numbers(th)
        at = f"$d = {th.d}$, $n = {th.n[-1]}$"
        for u, L in enumerate(th.L_unit):
            fits.append([at if u == 0 else "", f"pretrained at $L = {L:g}$", f"{x['slope_above'][u]:.2f}",
                         f"{x['slope_below'][u]:.2f}", fmt(x["crossover"][u].mean())])
        fits.append(["", "NW oracle (re-tuned)", f"{x['oracle_slope_above']:.2f}", f"{x['oracle_slope_below']:.2f}",
                     ""])
        tested.append(f"{len(th.L_prime)} values of $L'$ from {th.L_prime[0]:g} to {th.L_prime[-1]:g}")
        decay.append([f"$d = {th.d}$ ($n$ = {', '.join(map(str, th.n))})",
                      f"{x['rate'].mean():.2f} ({x['rate'].min():.2f} to {x['rate'].max():.2f})",
                      f"{x['bound_rate']:.2f}", f"{x['sketch_rate']:.2f}", f"{x['oracle_rate']:.2f}",
                      f"{x['control_rate'].mean():.2f}",
                      f"{np.exp(x['over_bound'][:, -1].mean()):.2g} "
                      f"({np.exp(x['control_over_bound'][:, -1].mean()):.2g})"])
    L_u = a.theory[0].L_unit
    branches = table(["Setting", "Unit", "Slope, $L' > L_u$", "Slope, $L' < L_u$", "Crossover $L_c$"], fits,
                     title="Theorem 3.5: the error's slopes in $L'$ and where its branches meet", folded=True,
                     widths=[18, 28, 18, 18, 18],
                     note="Units pretrained and tested at the largest $n$ of each $d$, on "
                          + ("; ".join(f"{t} at $d = {th.d}$" for t, th in zip(tested, a.theory))
                             if len(set(tested)) > 1 else tested[0]) + ".")
    rates = table(["Setting", "Matched units (seed range)", "Bound's rate", "Sketch", "NW oracle",
                   f"Unit at $L = {L_u[0]:g}$", "Error over the bound, largest $n$"], decay,
                  title="Theorem 3.5: the error's slope in $n$ and the bound", folded=True, widths=[17, 18, 12, 10, 11, 12, 20],
                  note=f"Matched units: pretrained and tested at $L = {L_u[1]:g}$ (mean over the trained units, then the range "
                       f"over them); the unit pretrained at $L = {L_u[0]:g}$ and tested at $L = {L_u[1]:g}$ is the "
                       "control. Last column: the matched units' error over the bound "
                       "$L^{2-2/(d+2)}(\\sigma^2/n)^{1/(d+2)}$ with the slide's constant 1 (geometric mean over "
                       f"seeds), and in brackets the same for the unit pretrained at $L = {L_u[0]:g}$.")
    return branches + "\n\n" + rates
