"""Low rank: printed tables."""

from __future__ import annotations

from ...records import fmt
from .analysis import LowRankAnalysis, distance_to_cBB
from .claims import short
from .sweeps import MODELS


def key_numbers_table(a: LowRankAnalysis) -> str:
    """Rounded numbers behind the claims, one line per class and model (stable for nbval).

    dist = min_c ||M - c BB^T||_F / ||M||_F; sign c = the sign of the best c, one character per seed.
    """
    lines = [f"{'class':<11}{'model':<9}{'rho_1':>7}{'rho_2':>7}{'dist':>7}{'sign c':>8}{'||M||':>7}{'ICL error':>11}"
             f"{'pred. 0':>9}{'best cBB':>10}{'best wI':>9}"]
    for i, c in enumerate(a.classes):
        for m in MODELS:
            x = a.model(m)
            dist = distance_to_cBB(x.M[i], a.B).mean()
            refs = (f"{fmt(a.zero[i]):>9}{fmt(a.oracle_cBB[i]):>10}{fmt(a.oracle_wI[i]):>9}"
                    if m == "softmax" else "")
            signs = "".join("+" if v > 0 else "-" for v in x.align[-1, i])      # sign of <M, BB^T> per seed
            lines.append(f"{short(c):<11}{m:<9}{fmt(x.rho1[-1, i].mean()):>7}{fmt(x.rho2[-1, i].mean()):>7}"
                         f"{fmt(dist):>7}{signs:>8}{fmt(x.norm[-1, i].mean()):>7}{fmt(x.final[i].mean()):>11}"
                         f"{refs}")
    lines.append("||M||_2 at initialisation: " + ", ".join(f"{m} {fmt(a.model(m).norm[0].mean())}" for m in MODELS))
    return "\n".join(lines)


def theorem_table(a: LowRankAnalysis) -> str:
    """Theorem 4.4 at n = 2 and sigma > 0, the rho floor against the training length, and the affine link."""
    th, fl = a.theorem, a.floor
    lines = ["Theorem 4.4, linear class (softmax): final rho_2(M, B) [against another basis B'], mean over seeds"]
    for i, n in enumerate(th.n):
        lines.append(f"  n = {n:<5}" + "".join(f"  sigma = {s:g}: {fmt(th.rho2[i, j].mean())} "
                                               f"[{fmt(th.rho2_other_basis[i, j].mean())}]"
                                               for j, s in enumerate(th.sigma)))
    lines.append(f"rho floor, linear class (softmax): final rho_2 after {', '.join(map(str, fl.steps))} steps")
    for k, sch in enumerate(fl.schedules):
        lines.append(f"  {sch + ' lr':<13}" + "".join(f"{fmt(v):>9}" for v in fl.rho2[k].mean(-1)))
    if a.affine_minus_linear == a.affine_minus_linear:                       # not NaN: both classes present
        lines.append("softmax units on the affine link vs the linear class: max ||M_affine - M_linear||_F / "
                     f"||M_linear||_F = {a.affine_minus_linear:.1e} (the same units: weights sum to one)")
    return "\n".join(lines)
