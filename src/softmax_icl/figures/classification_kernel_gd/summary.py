"""Printed tables of the classification chapter."""

from __future__ import annotations

import numpy as np

from ...classification import algorithms as calg
from ...records import Run
from .analysis import ablation, comparison, hyperparameters
from .sweeps import ALG, MODELS, task_name


def key_numbers_table(run: Run, a: dict, found: dict) -> str:
    """Rounded numbers behind the claims (stable for nbval)."""
    hp = hyperparameters(run, a, found)
    lines = ["Main setting: C = {C}, d = {d}, n = {n_main}; final alignment with the searched algorithm "
             "(mean over seeds)".format(**run.cfg)]
    for m in MODELS:
        ks = [k for k, c in enumerate(a["main_configs"]) if c["model"] == m]
        fa = {mm: np.mean([a["final_align"][k][mm] for k in ks]) for mm in ("logit_cosine", "prob_l2", "argmax_agreement")}
        ja = np.mean(a["align_history"]["jacobian_cosine"][-1, ks])
        lines.append(f"  {m:<8} vs {ALG[m]:<10} logit cos {fa['logit_cosine']:.3f}, prob L2 {fa['prob_l2']:.3f}, "
                     f"Jacobian cos {ja:.3f}, argmax agreement {fa['argmax_agreement']:.3f}")
    for c, al in zip(a["context"]["configs"], a["context"]["align"]):
        if c["n"] == run.cfg["n_main"] and c["P"] != 1 and c["seed"] == 0:
            lines.append(f"  {c['model']:<8} vs {ALG[c['model']]:<10} logit cos {al['logit_cosine']:.3f}, prob L2 "
                         f"{al['prob_l2']:.3f}, argmax agreement {al['argmax_agreement']:.3f}  [{task_name(c['P'])}]")
    lines.append("Hyperparameters (searched | learned per seed):")
    lines.append(f"  eta   {hp['eta_searched']:.3g} | " + ", ".join(f"{v:.3g}" for v in hp["eta_learned"]))
    lines.append(f"  beta  {hp['beta_searched']:.3g} | " + ", ".join(f"{v:.3g}" for v in hp["beta_learned"]))
    lines.append(f"  gamma {hp['gamma_searched']:.3g} | " + ", ".join(f"{v:.3g}" for v in hp["gamma_learned"]))
    lines.append("Softmax vs linear units, test CE (accuracy):")
    for r in comparison(a, "context"):
        lines.append(f"  {task_name(r['P']):<22} n = {r['n']:<4} softmax {r['ce_softmax']:.3f} ({r['acc_softmax']:.3f})  "
                     f"linear {r['ce_linear']:.3f} ({r['acc_linear']:.3f})  softmax >= linear: {r['holds']}")
    for r in comparison(a, "shapes"):
        lines.append(f"  paper's task, C = {r['C']:<3} d = {r['d']:<3} n = {r['n']:<4} softmax {r['ce_softmax']:.3f} "
                     f"({r['acc_softmax']:.3f})  linear {r['ce_linear']:.3f} ({r['acc_linear']:.3f})  "
                     f"softmax >= linear: {r['holds']}")
    lines.append("Algorithms at searched hyperparameters, test CE: " + ", ".join(calg.ALGORITHMS))
    for r in ablation(a):
        lines.append(f"  {task_name(r['P']):<22} n = {r['n']:<4} " + ", ".join(f"{r['ce_' + k]:.3f}" for k in calg.ALGORITHMS))
    return "\n".join(lines)
