"""Printed tables of the classification chapter (numbers rounded; not compared character by character)."""

from __future__ import annotations

import numpy as np

from ...classification import algorithms as calg
from ...records import Run
from .analysis import Evaluation, ablation, compare, hyperparameters, ratio_maps
from .sweeps import ALG, CONTROL_ALG, MODELS, Search, label


def _cmp_line(r) -> str:
    return (f"  {label(r.task):<24} C = {r.C:<3} d = {r.d:<3} n = {r.n:<4} {r.a} {r.ce_a:.3f} ({r.acc_a:.3f})  "
            f"{r.b} {r.ce_b:.3f} ({r.acc_b:.3f})  ratio {r.ratio:.3f} [{r.ratio_lo:.3f}, {r.ratio_hi:.3f}]  "
            f"softmax {r.verdict}")


def alignment_table(run: Run, ev: Evaluation, found: Search) -> str:
    main = ev.main
    hp = hyperparameters(run, ev, found)
    lines = ["Main setting: C = {C}, d = {d}, n = {n_main}; final alignment with each algorithm at its searched "
             "hyperparameters (mean over seeds)".format(**run.cfg)]
    for m in MODELS:
        ks = [k for k, c in enumerate(main.configs) if c["model"] == m]
        for name, fin, hist in ((ALG[m], main.final, main.align), (CONTROL_ALG[m] + " (control)", main.final_control,
                                                                   main.control)):
            fa = {mm: np.mean([fin[k][mm] for k in ks]) for mm in ("logit_cosine", "prob_l2", "argmax_agreement")}
            ja = np.mean(hist["jacobian_cosine"][-1, ks])
            lines.append(f"  {m:<8} vs {name:<20} logit cos {fa['logit_cosine']:.3f}, prob L2 {fa['prob_l2']:.3f}, "
                         f"Jacobian cos {ja:.3f}, argmax agreement {fa['argmax_agreement']:.3f}")
    lines.append("Hyperparameters (searched | learned per seed | searched on the tightest clustered task):")
    lines.append(f"  eta   {hp.eta_searched:.3g} | " + ", ".join(f"{v:.3g}" for v in hp.eta_learned) + f" | {hp.eta_other:.3g}")
    lines.append(f"  beta  {hp.beta_searched:.3g} | " + ", ".join(f"{v:.3g}" for v in hp.beta_learned) + f" | {hp.beta_other:.3g}")
    lines.append(f"  gamma {hp.gamma_searched:.3g} | " + ", ".join(f"{v:.3g}" for v in hp.gamma_learned) + f" | {hp.gamma_other:.3g}")
    return "\n".join(lines)


def readings_table(run: Run, ev: Evaluation) -> str:
    lines = ["Softmax vs linear units, test CE (accuracy), mean over seeds; ratio softmax/linear with its 95% t-interval "
             "over seeds:"]
    lines += [_cmp_line(r) for r in compare(ev.readings)]
    lines.append("Local and subspace tasks (n_main), and other (C, d) on the uniform task:")
    lines += [_cmp_line(r) for r in compare(ev.extras) + compare(ev.shapes)]
    return "\n".join(lines)


def maps_table(run: Run, ev: Evaluation) -> str:
    lines = ["Clustered reading, CE ratios over tau (rows) x n (columns) and the crossover tau per n:"]
    for m in ratio_maps(run, ev):
        lines.append(f"  {m.name}:  n = {m.ns.tolist()}")
        for i, t in enumerate(m.taus):
            lines.append(f"    tau = {t:<5g} " + "  ".join(f"{m.ratio[i, j]:.3f}" for j in range(len(m.ns))))
        lines.append("    crossover tau: " + ", ".join("none" if not np.isfinite(c) else f"{c:.3g}" for c in m.crossover))
    lines.append("Algorithms at searched hyperparameters, test CE: " + ", ".join(calg.ALGORITHMS))
    for r in ablation(ev):
        lines.append(f"  {label(r.task):<24} n = {r.n:<4} " + ", ".join(f"{r.ce[k]:.3f}" for k in calg.ALGORITHMS)
                     + f"   fixed-rate cost {r.rate_cost:+.3f} (s.e. {r.rate_cost_se:.3f}), linear-kernel cost "
                     f"{r.kernel_cost:+.3f} (s.e. {r.kernel_cost_se:.3f})")
    return "\n".join(lines)


def mixture_table(run: Run, ev: Evaluation) -> str:
    lo, hi = run.cfg["mix_lengths"]
    lines = [f"Trained over lengths {lo}..{hi}; test CE at each length (seen: {lo} <= n <= {hi}):"]
    lines += [_cmp_line(r) for r in compare(ev.mixture, "softmax", "linear") + compare(ev.mixture, "softmax",
                                                                                         "linear_sum")]
    return "\n".join(lines)


def kernel_table(run: Run, ev: Evaluation) -> str:
    k = ev.kernel
    f = lambda v: ", ".join(f"{x:.3f}" for x in v)  # noqa: E731
    return "\n".join([
        f"Share of the softmax kernel on the first {k.k} coordinates, tr(A_SS)/tr(A_xx) per seed (isotropic: "
        f"{k.k / run.cfg['d']:.2f}):",
        f"  subspace task: {f(k.frac_sub)}    uniform task (control): {f(k.frac_uni)}",
        "Logit cosine of the unit with kernel GD read off its weights, isotropic | anisotropic:",
        f"  subspace task: {f(k.cos_iso_sub)} | {f(k.cos_aniso_sub)}",
        f"  uniform task:  {f(k.cos_iso_uni)} | {f(k.cos_aniso_uni)}"])
