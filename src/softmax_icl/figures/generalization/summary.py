"""Generalisation: printed tables."""

from __future__ import annotations

import numpy as np

from ...records import fmt
from .analysis import GeneralizationAnalysis, index_of
from .claims import theory_numbers


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


def convergence_table(a: GeneralizationAnalysis) -> str:
    """The loss trend over the last quarter of pretraining, per sweep (the convergence precondition)."""
    lines = ["fitted relative change of the training loss over the last quarter of pretraining, per sweep",
             f"{'sweep':<18}{'units':>6}{'largest |change|':>18}{'median':>9}"]
    for k, v in a.loss_change.items():
        lines.append(f"{k:<18}{len(v):>6}{np.abs(v).max():>18.3f}{np.median(v):>9.3f}")
    return "\n".join(lines)


def theory_table(a: GeneralizationAnalysis) -> str:
    """Theorem 3.5's fits at every d: the two branches, where they meet, and the decay in n."""
    lines = []
    for th in a.theory:
        x = theory_numbers(th)
        lines.append(f"d = {th.d}: units pretrained at n = {th.n[-1]}, tested on {len(th.L_prime)} values of L' "
                     f"({th.L_prime[0]:g}..{th.L_prime[-1]:g})")
        lines.append(f"  {'unit':<22}{'slope L>L_u':>13}{'slope L<L_u':>13}{'crossover L_c':>15}")
        for u, L in enumerate(th.L_unit):
            lines.append(f"  {'pretrained L = ' + format(L, 'g'):<22}{x['slope_above'][u]:>13.2f}"
                         f"{x['slope_below'][u]:>13.2f}{fmt(x['crossover'][u].mean()):>15}")
        lines.append(f"  {'NW oracle (re-tuned)':<22}{x['oracle_slope_above']:>13.2f}{x['oracle_slope_below']:>13.2f}")
        lines.append(f"  decay in n (n = {', '.join(map(str, th.n))}): matched units {x['rate'].mean():.2f} "
                     f"(seeds {', '.join(f'{v:.2f}' for v in x['rate'])}); theorem's bound {x['bound_rate']:.2f}; "
                     f"sketch {x['sketch_rate']:.2f}; oracle {x['oracle_rate']:.2f}; "
                     f"L = {th.L_unit[0]:g} unit {x['control_rate'].mean():.2f}")
    return "\n".join(lines)
