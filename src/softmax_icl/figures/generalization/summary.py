"""Generalisation: printed tables."""

from __future__ import annotations

from ...records import fmt
from .analysis import GeneralizationAnalysis, index_of


def key_numbers_table(a: GeneralizationAnalysis) -> str:
    """Rounded numbers behind the claims (stable for nbval)."""
    classes, Ls, ns = a.classes, a.L, a.n
    j_tr = index_of(ns, a.n_train)
    err = a.softmax.mean(2)
    lines = [f"ICL error at n = {a.n_train} (pretraining n), test L = {a.L_test:g}; ||M||_2 = learned inverse "
             "window; w<0 = seeds with tr(M) < 0",
             f"{'pretraining':<18}{'||M||':>8}{'w<0':>5}  " + "".join(f"{'test ' + c:>15}" for c in classes)]
    for p, c in enumerate(classes):
        for li, L in enumerate(Ls):
            lines.append(f"{c + ' L=' + format(L, 'g'):<18}{fmt(a.M_norm[p, li].mean()):>8}"
                         f"{int((a.w_signed[p, li] < 0).sum()):>5}  "
                         + "".join(f"{fmt(err[p, li, t, j_tr]):>15}" for t in range(len(classes))))
    lines.append(f"{'linear (matched)':<18}{'':>13}  " + "".join(f"{fmt(a.linear.mean(1)[t, t, j_tr]):>15}"
                                                              for t in range(len(classes))))
    lines.append(f"{'NW oracle':<18}{'':>13}  " + "".join(f"{fmt(a.oracle[t, j_tr]):>15}"
                                                       for t in range(len(classes))))
    return "\n".join(lines)
