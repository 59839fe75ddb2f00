"""The classification chapter's tables, as MyST markdown (``chapter.show(summary.readings_table(run, evaluation))``).

Numbers are rounded as they were printed (not compared character by character: nbval checks only the verdicts).
"""

from __future__ import annotations

import re

import numpy as np

from ... import stats
from ...book import design
from ...book.chapter import table
from ...classification import algorithms as calg
from ...book.run import Run
from .analysis import Evaluation, ablation, compare, hyperparameters, ratio_maps
from .sweeps import ALG, ALG_LABEL, CONTROL_ALG, MODELS, Search, label
from . import claims as check_ids

#: short column names of the four GD steps (their full names: ``ALG_LABEL``)
ALG_SHORT = {"gd": "GD", "kernel_gd": "kernel GD", "exp_fixed": "exp, fixed rate", "linear_norm": "linear, adaptive"}
SYMBOL = {"tau": "\\tau"}
#: the comparison tables' columns after the task (and its n or shape)
CMP_HEAD = ["Softmax", "Linear", "Ratio [bounds]", "≥ linear"]
CMP_NOTE = ("Test cross-entropy (accuracy) of the trained units, mean over the trained units and contexts. Ratio: the exponential "
            "of the seed mean of the per-seed log CE ratio softmax / linear, with its one-sided 95% $t$-bounds over "
            "the seeds (each seed pairs the two units); *≥ linear*: the statistical design's non-inferiority "
            "test of softmax ≥ linear (no worse by 5%) on those bounds (pass: upper bound below 1.05; fail: lower bound above it).")
#: The design's check whose test every comparison row is read with (softmax >= linear: non-inferiority).
GE_CHECK = ("classification_kernel_gd", check_ids.SOFTMAX_GE_LINEAR_UNIFORM)


def task(t: tuple) -> str:
    """A task's label with its parameters as maths: ``clustered, $\\tau = 0.5$``, ``local ($P = 3$)``."""
    return re.sub(r"\b(tau|P|k) = ([^,)\s]+)", lambda m: f"${SYMBOL.get(m[1], m[1])} = {m[2]}$", label(t))


def _cmp_cells(r) -> list[str]:
    """A comparison row's cells: both units' CE (accuracy), the ratio with its bounds, and the design's verdict."""
    verdict = stats.decide(design.load().entry(*GE_CHECK).test, r.log_ratio).verdict
    return [f"{r.ce_a:.3f} ({r.acc_a:.3f})", f"{r.ce_b:.3f} ({r.acc_b:.3f})",
            f"{r.ratio:.3f} [{r.ratio_lo:.3f}, {r.ratio_hi:.3f}]", verdict]


def alignment_table(run: Run, ev: Evaluation, found: Search) -> str:
    """The trained units against the GD steps in the main setting (final alignment, one row per unit and algorithm),
    and the searched against the learned hyperparameters."""
    main, cfg = ev.main, run.cfg
    rows = []
    for m in MODELS:
        ks = [k for k, c in enumerate(main.configs) if c["model"] == m]
        for j, (alg, fin, hist) in enumerate(((ALG[m], main.final, main.align),
                                              (CONTROL_ALG[m], main.final_control, main.control))):
            fa = {mm: np.mean([fin[k][mm] for k in ks]) for mm in ("logit_cosine", "prob_l2", "argmax_agreement")}
            rows.append([m if j == 0 else "", ALG_LABEL[alg] + (" (control)" if j else ""),
                         f"{fa['logit_cosine']:.3f}", f"{fa['prob_l2']:.3f}",
                         f"{np.mean(hist['jacobian_cosine'][-1, ks]):.3f}", f"{fa['argmax_agreement']:.3f}"])
    align = table(["Unit", "Against", "Logit cosine", "Probability $L_2$", "Jacobian cosine", "Argmax agreement"], rows,
                  title=f"Alignment with the GD steps at the end of training: $C = {cfg['C']}$, $d = {cfg['d']}$, "
                        f"$n = {cfg['n_main']}$", widths=[11, 25, 14, 17, 16, 17],
                  note="Each algorithm at its searched hyperparameters, mean over the trained units; the control is the other "
                       "unit's algorithm.")
    hp = hyperparameters(run, ev, found)
    rows = [[f"${sym}$", f"{getattr(hp, name + '_searched'):.3g}",
             ", ".join(f"{v:.3g}" for v in getattr(hp, name + "_learned")), f"{getattr(hp, name + '_other'):.3g}"]
            for name, sym in (("eta", "\\eta"), ("beta", "\\beta"), ("gamma", "\\gamma"))]
    hyper = table(["", "Searched", "Learned (per seed)", "Searched on the tightest clustered task"], rows,
                  title="Hyperparameters of the GD steps: searched, and read off the trained units (main setting)",
                  widths=[10, 20, 40, 30])
    return align + "\n\n" + hyper


def readings_table(run: Run, ev: Evaluation) -> str:
    """Softmax against linear units: every reading of the task at every n (one table), the local and subspace tasks
    and the other (C, d) of the uniform task (another)."""
    cfg = run.cfg
    rows = [[task(r.task), str(r.n)] + _cmp_cells(r) for r in compare(ev.readings)]
    readings = table(["Task", "$n$"] + CMP_HEAD, rows, folded=len(rows) > 8, widths=[22, 6, 15, 15, 25, 17],
                     title=f"Softmax against linear units on every reading of the task, $C = {cfg['C']}$, "
                           f"$d = {cfg['d']}$", note=CMP_NOTE)
    rows = [[task(r.task), f"$({r.C}, {r.d})$"] + _cmp_cells(r) for r in compare(ev.extras) + compare(ev.shapes)]
    others = table(["Task", "$(C, d)$"] + CMP_HEAD, rows, folded=len(rows) > 8, widths=[19, 9, 14, 14, 27, 17],
                   title=f"Softmax against linear units on the local and subspace tasks, and on the uniform task at "
                         f"other $(C, d)$; $n = {cfg['n_main']}$", note=CMP_NOTE)
    return readings + "\n\n" + others


def maps_table(run: Run, ev: Evaluation) -> str:
    """The clustered reading's CE ratios over tau x n (one folded table per ratio, with the crossover tau), and the
    four GD steps on every task and n (their test CE; the cost of the fixed rate and of the linear kernel)."""
    out = []
    for m in ratio_maps(run, ev):
        name = (m.name if m.name not in ALG_LABEL else f"{ALG_LABEL[m.name]} / {ALG_LABEL['gd']}")
        rows = [[f"{t:g}"] + [f"{m.ratio[i, j]:.3f}" for j in range(len(m.ns))] for i, t in enumerate(m.taus)]
        rows.append(["crossover $\\tau$"] + ["none" if not np.isfinite(c) else f"{c:.3g}" for c in m.crossover])
        trained = m.name not in ALG_LABEL
        out.append(table(["$\\tau$"] + [f"$n = {n}$" for n in m.ns], rows, folded=not trained or len(rows) > 8,
                         title=f"Test CE ratio on the clustered task over $\\tau$ and $n$: {name}",
                         note="Last row: the $\\tau$ at which the ratio rises through 1 (interpolated in "
                              "$\\log \\tau$)."))
    ab = ablation(ev)
    rows = [[task(r.task), str(r.n)] + [f"{r.ce[k]:.3f}" for k in calg.ALGORITHMS] for r in ab]
    out.append(table(["Task", "$n$"] + [ALG_SHORT.get(k, k) for k in calg.ALGORITHMS], rows, folded=len(rows) > 8,
                     title="Test CE of the four GD steps at their searched hyperparameters",
                     widths=[24, 8] + [68 // len(calg.ALGORITHMS)] * len(calg.ALGORITHMS),
                     note="GD: one GD step; kernel GD: exp kernel, adaptive rate (the softmax unit's step); the other "
                          "two change one of its two parts: the exp kernel with a fixed rate, a linear kernel with the "
                          "adaptive rate."))
    rows = [[task(r.task), str(r.n), f"{r.rate_cost:+.3f} ({r.rate_cost_se:.3f})",
             f"{r.kernel_cost:+.3f} ({r.kernel_cost_se:.3f})"] for r in ab]
    out.append(table(["Task", "$n$", "Fixed-rate cost (s.e.)", "Linear-kernel cost (s.e.)"], rows,
                     folded=len(rows) > 8, widths=[30, 10, 30, 30],
                     title="What each part of kernel GD is worth: the test CE it loses without it",
                     note="Fixed-rate cost: CE(exp kernel, fixed rate) − CE(kernel GD); linear-kernel cost: "
                          "CE(linear kernel, adaptive rate) − CE(kernel GD); paired over contexts, with the paired "
                          "standard error."))
    return "\n\n".join(out)


def mixture_table(run: Run, ev: Evaluation) -> str:
    """Units trained over a mixture of context lengths, tested at seen and unseen lengths: softmax against linear
    (1/n) units, and against unnormalised linear units (one table each)."""
    lo, hi = run.cfg["mix_lengths"]
    out = []
    for b, name, col in (("linear", "linear units ($1/n$)", "Linear ($1/n$)"),
                         ("linear_sum", "unnormalised linear units", "Linear (sum)")):
        cmp = compare(ev.mixture, "softmax", b)
        rows = [[task(r.task) if k == 0 or r.task != cmp[k - 1].task else "", str(r.n)] + _cmp_cells(r)
                for k, r in enumerate(cmp)]
        shape = "; ".join(f"$C = {C}$, $d = {d}$" for C, d in sorted({(r.C, r.d) for r in cmp}))
        unseen = [str(n) for n in dict.fromkeys(r.n for r in cmp) if not lo <= n <= hi]
        out.append(table(["Task", "Test $n$", CMP_HEAD[0], col] + CMP_HEAD[2:], rows, folded=len(rows) > 8,
                         widths=[18, 8, 15, 18, 24, 17],
                         title=f"Trained over lengths $n$ from {lo} to {hi}: softmax against {name}, {shape}",
                         note=f"Lengths {lo} to {hi} were seen in training" + (
                             f"; {', '.join(unseen)} were not. " if unseen else ". ") + CMP_NOTE))
    return "\n\n".join(out)


def kernel_table(run: Run, ev: Evaluation) -> str:
    """The shape of the softmax kernel on the subspace task against the uniform task: one row per seed."""
    k = ev.kernel
    uni = dict(zip(k.seeds_uni.tolist(), range(len(k.seeds_uni))))
    rows = []
    for i, s in enumerate(k.seeds_sub.tolist()):
        j = uni.get(s)
        u = ["–"] * 3 if j is None else [f"{k.frac_uni[j]:.3f}", f"{k.cos_iso_uni[j]:.3f}", f"{k.cos_aniso_uni[j]:.3f}"]
        rows.append([str(s), f"{k.frac_sub[i]:.3f}", f"{k.cos_iso_sub[i]:.3f}", f"{k.cos_aniso_sub[i]:.3f}"] + u)
    return table(["Seed", "Share (S)", "Iso. (S)", "Aniso. (S)", "Share (U)", "Iso. (U)", "Aniso. (U)"], rows,
                 folded=len(rows) > 8, title="The softmax kernel's shape and kernel GD read off it, per seed",
                 widths=[10, 15, 15, 15, 15, 15, 15],
                 note=f"(S): the subspace task; (U): the uniform task. "
                      f"Share: $\\mathrm{{tr}}(A_{{SS}}) / \\mathrm{{tr}}(A_{{xx}})$ on the first $k = {k.k}$ "
                      f"coordinates, {k.k / run.cfg['d']:.2f} for an isotropic kernel. Iso., aniso.: the mean logit "
                      "cosine of the unit with kernel GD whose kernel is read off its weights, isotropic "
                      "($\\beta = \\mathrm{tr}A_{xx}/d$) or anisotropic ($\\beta_S$, $\\beta_\\perp$).")


def expectation_table(run: Run, sc) -> str:
    """The learned kernel scale beta of the softmax units at each level of the label-noise and Lipschitzness
    programmes: how many units have a window (beta > 0), their geometric mean and range."""
    from .expectation import AXES

    rows = []
    for tag in ("noise", "lipschitz"):
        beta = sc.beta[tag][-1]                                                    # (L, S)
        for level, b in zip(sc.levels[tag], beta):
            pos = b[b > 0]
            mean = f"{np.exp(np.log(pos).mean()):.3g} [{pos.min():.3g}, {pos.max():.3g}]" if pos.size else "–"
            rows.append([AXES[tag][1], f"{level:g}", f"{pos.size} of {b.size}", mean])
    return table(["Axis", "Level", "Units with β > 0", "β: geometric mean [min, max]"], rows,
                 title="The learned kernel scale under label noise and faster-changing labels",
                 widths=[34, 12, 20, 34],
                 note=f"Softmax units trained on the uniform task at $n = {run.cfg['n_main']}$: with every label "
                      "flipped to another class with probability $p$, or with $P$ prototypes per class and no noise. "
                      "$\\beta = \\mathrm{tr}((W_K^\\top W_Q)_{xx}) / d$ is the inverse width of the unit's window; a "
                      "unit with $\\beta \\le 0$ attends to far points and has no window.")
