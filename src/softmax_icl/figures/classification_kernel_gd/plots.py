"""Plots of the classification chapter (plots only: excluded from the cache fingerprint)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ...base import derive_seed
from ...classification import algorithms as calg
from ...classification import metrics as cmetrics
from ...classification import tasks as ctasks
from ...plotting import MODEL_COLORS
from ...records import Run
from .analysis import ablation, comparison, hyperparameters
from .sweeps import ALG, ALG_LABEL, ETA_GRID, MODELS, _setting_index, task_name


ALG_COLORS = {"gd": MODEL_COLORS["gd"], "kernel_gd": MODEL_COLORS["kernel_gd"], "exp_fixed": "#ff7f0e",
              "linear_norm": "#8c564b"}


METRIC_LABEL = {"logit_cosine": "cosine of centred logits", "prob_l2": "L2 distance of probabilities",
                "jacobian_cosine": "cosine of Jacobians ∂ŷ/∂x_q", "argmax_agreement": "argmax agreement"}


def plot_tasks(run: Run):
    """Example contexts (C, n_main) for d = 2 and d = 3, paper's task (top) and local task (bottom)."""
    cfg = run.cfg
    C, n, P = cfg["C"], cfg["n_main"], cfg["local_prototypes"]
    fig = plt.figure(figsize=(9, 8.2))
    colors = plt.cm.tab10(np.arange(C) % 10)
    for row, Pr in enumerate((1, P)):
        for col, d in enumerate((2, 3)):
            b = ctasks.sample_contexts(1, n, C, d, Pr, seed=derive_seed(cfg["eval_seed"], 101 + 10 * row + col))
            x = b.x_ctx[0, 0].numpy()
            lab = b.label_ctx[0, 0].numpy()
            pr = b.protos[0, 0].numpy()                                              # (C, P, d)
            title = f"{task_name(Pr)}, d = {d}"
            if d == 2:
                ax = fig.add_subplot(2, 2, 2 * row + col + 1)
                th = np.linspace(0, 2 * np.pi, 721)
                pts = np.stack([np.cos(th), np.sin(th)], 1)
                reg = np.argmax(np.max(np.einsum("td,cpd->tcp", pts, pr), -1), -1)
                for k in range(C):                                                  # class regions on the circle
                    m = np.where(reg == k, 1.0, np.nan)
                    ax.plot(1.12 * np.cos(th) * m, 1.12 * np.sin(th) * m, color=colors[k], lw=5, alpha=0.35)
                ax.plot(np.cos(th), np.sin(th), color="0.8", lw=0.6)
                for k in range(C):
                    sel = lab == k
                    ax.scatter(x[sel, 0], x[sel, 1], s=14, color=colors[k], label=f"class {k + 1}")
                    for p in pr[k]:
                        ax.annotate("", xy=p * 0.85, xytext=(0, 0),
                                    arrowprops=dict(arrowstyle="->", color=colors[k], lw=1.6))
                ax.set(aspect="equal", xlim=(-1.3, 1.3), ylim=(-1.3, 1.3), xlabel="x₁", ylabel="x₂", title=title)
                if row == 0:
                    ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(-0.05, 1.0), framealpha=0.6)
            else:
                ax = fig.add_subplot(2, 2, 2 * row + col + 1, projection="3d")
                for k in range(C):
                    sel = lab == k
                    ax.scatter(x[sel, 0], x[sel, 1], x[sel, 2], s=10, color=colors[k])
                    for p in pr[k]:
                        ax.quiver(0, 0, 0, *(p * 0.9), color=colors[k], lw=1.6, arrow_length_ratio=0.15)
                ax.set(xlabel="x₁", ylabel="x₂", zlabel="x₃", title=title, xlim=(-1, 1), ylim=(-1, 1), zlim=(-1, 1),
                       xticks=[-1, 0, 1], yticks=[-1, 0, 1], zticks=[-1, 0, 1])
                ax.set_box_aspect((1, 1, 1))
    fig.suptitle(f"One context each (C = {C}, n = {n}): arrows are the class vectors (prototypes), dots the "
                 "context inputs coloured by label; on the circle the bands show each class's region",
                 fontsize="small")
    return fig


def plot_alignment(run: Run, a: dict, model: str, seed: int = 0):
    """Paper Fig. 4 (linear) / Fig. 5 (softmax): alignment through training and per-context scatter plots."""
    ks = [k for k, c in enumerate(a["main_configs"]) if c["model"] == model]
    fig, axes = plt.subplots(1, 4, figsize=(15, 3.6))
    ax = axes[0]
    steps = a["log_steps"]
    for m, ls in zip(cmetrics.METRICS, ("-", "--", "-.", ":")):
        v = a["align_history"][m][:, ks]
        ax.plot(steps, v.mean(1), ls, label=METRIC_LABEL[m])
        if v.shape[1] > 1:
            ax.fill_between(steps, v.min(1), v.max(1), alpha=0.2, lw=0)
    ax.set(xlabel="training step", ylabel="alignment", title=f"(a) {model} SA vs {ALG_LABEL[ALG[model]]}",
           ylim=(-0.05, 1.05))
    ax.legend(fontsize="x-small", loc="center right")
    k = ks[min(seed, len(ks) - 1)]
    pc = a["per_context"][k]
    rng = np.random.default_rng(0)
    B = pc["model"]["ce"].size
    sel = rng.choice(B, size=min(B, 1500), replace=False)
    for ax, key, lab, lo in zip(axes[1:], ("ce", "p_correct", "entropy"),
                                ("CE loss (nats)", "probability of the correct class", "entropy of ŷ (nats)"),
                                ("(b)", "(c)", "(d)")):
        xm, ya = pc["alg"][key], pc["model"][key]
        ax.scatter(ya[sel], xm[sel], s=4, alpha=0.35, color=MODEL_COLORS[model], rasterized=True)
        hi = max(np.percentile(xm, 99.5), np.percentile(ya, 99.5)) if key == "ce" else max(xm.max(), ya.max())
        hi = hi * 1.05 if key != "p_correct" else 1.0
        ax.plot([0, hi], [0, hi], color="0.3", lw=0.8, label="diagonal")
        ax.axvline(ya.mean(), color=MODEL_COLORS[model], ls=":", lw=1.2, label=f"mean, {model} SA")
        ax.axhline(xm.mean(), color=ALG_COLORS[ALG[model]], ls=":", lw=1.2, label=f"mean, {ALG[model]}")
        ax.set(xlim=(0, hi), ylim=(0, hi), xlabel=f"{lab}, trained {model} SA", ylabel=f"{lab}, {ALG[model]}",
               title=f"{lo} per context")
        ax.legend(fontsize="x-small", loc="upper left" if key != "p_correct" else "lower right")
    return fig


def plot_hyperparameters(run: Run, a: dict, found: dict):
    """The searches: CE of the GD step against eta, and of kernel GD against beta (best gamma per beta)."""
    hp = hyperparameters(run, a, found)
    i = _setting_index(a["settings"], a["main_configs"][0])
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.5))
    ax = axes[0]
    ax.plot(ETA_GRID, found["gd_eta_profile"][i], color=ALG_COLORS["gd"], label="one GD step")
    ax.axvline(hp["eta_searched"], color=ALG_COLORS["gd"], ls="--", lw=1, label="searched η")
    for j, v in enumerate(hp["eta_learned"]):
        ax.axvline(v, color=MODEL_COLORS["linear"], ls=":", lw=1.2, label="learned η = a·b" if j == 0 else None)
    ax.set(xscale="log", xlabel="learning rate η", ylabel="expected CE (nats)", title="GD step: CE vs η")
    ax.legend(fontsize="x-small")
    g = found["kernel_gd"]
    ax = axes[1]
    ax.plot(g["grid"], g["grid_ce"][i], "o-", ms=3, color=ALG_COLORS["kernel_gd"], label="kernel GD, best γ per β")
    ax.axvline(hp["beta_searched"], color=ALG_COLORS["kernel_gd"], ls="--", lw=1, label="searched β")
    for j, v in enumerate(hp["beta_learned"]):
        ax.axvline(v, color=MODEL_COLORS["softmax"], ls=":", lw=1.2, label="learned β" if j == 0 else None)
    ax.set(xscale="log", xlabel="kernel parameter β", ylabel="expected CE (nats)", title="kernel GD: CE vs β",
           ylim=(min(g["grid_ce"][i]) - 0.05, min(g["grid_ce"][i]) + 0.6))
    ax.legend(fontsize="x-small")
    ax = axes[2]
    ax.plot(g["grid"], g["grid_rate"][i], color=ALG_COLORS["kernel_gd"], label="best γ for each β")
    ax.scatter([hp["beta_searched"]], [hp["gamma_searched"]], marker="*", s=140, color=ALG_COLORS["kernel_gd"],
               zorder=3, label="searched (β, γ)")
    ax.scatter(hp["beta_learned"], hp["gamma_learned"], marker="o", s=30, color=MODEL_COLORS["softmax"], zorder=4,
               label="learned (β, γ), one per seed")
    ax.set(xscale="log", yscale="log", xlabel="kernel parameter β", ylabel="rate γ", title="kernel GD: the (β, γ) valley")
    ax.legend(fontsize="x-small")
    return fig


def plot_softmax_vs_linear(run: Run, a: dict):
    """Test CE and accuracy of the trained units across n (both tasks) and across (C, d) (paper's task)."""
    cfg = run.cfg
    rows = comparison(a, "context")
    ab = ablation(a)
    fig, axes = plt.subplots(1, 5, figsize=(18, 4.0), layout="constrained")
    for j, P in enumerate((1, cfg["local_prototypes"])):
        rs = [r for r in rows if r["P"] == P]
        ns = [r["n"] for r in rs]
        ax_ce, ax_acc = axes[2 * j], axes[2 * j + 1]
        for m in MODELS:
            ax_ce.plot(ns, [r[f"ce_{m}"] for r in rs], "o-", color=MODEL_COLORS[m], label=f"trained {m} SA")
            ax_acc.plot(ns, [r[f"acc_{m}"] for r in rs], "o-", color=MODEL_COLORS[m], label=f"trained {m} SA")
        abs_ = [r for r in ab if r["P"] == P and r["n"] in ns]
        for name in ("gd", "kernel_gd"):
            ax_ce.plot([r["n"] for r in abs_], [r[f"ce_{name}"] for r in abs_], "--", color=ALG_COLORS[name],
                       label=ALG_LABEL[name] + " (searched)")
            ax_acc.plot([r["n"] for r in abs_], [r[f"acc_{name}"] for r in abs_], "--", color=ALG_COLORS[name],
                        label=ALG_LABEL[name] + " (searched)")
        ax_ce.set(xscale="log", xlabel="context length n", ylabel="test CE (nats)", title=task_name(P))
        ax_acc.set(xscale="log", xlabel="context length n", ylabel="test accuracy", title=task_name(P))
        for ax in (ax_ce, ax_acc):
            ax.set_xticks(ns, [str(n) for n in ns])
            ax.minorticks_off()
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncol=4, fontsize="small")
    ax = axes[4]
    rs = comparison(a, "shapes")
    lab = [f"C={r['C']}\nd={r['d']}" for r in rs]
    xs = np.arange(len(rs))
    for off, m in ((-0.2, "softmax"), (0.2, "linear")):
        ax.bar(xs + off, [r[f"ce_{m}"] for r in rs], width=0.4, color=MODEL_COLORS[m], label=f"{m} SA")
    ax.set_xticks(xs, lab)
    ax.set(ylabel="test CE (nats)", title=f"paper's task, n = {cfg['n_main']}: other C, d")
    ax.legend(fontsize="x-small")
    return fig


def plot_ablation(run: Run, a: dict):
    """The four algorithms (kernel shape x rate) at their searched hyperparameters, across n, per task."""
    cfg = run.cfg
    ab = ablation(a)
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for ax, P in zip(axes, (1, cfg["local_prototypes"])):
        rs = [r for r in ab if r["P"] == P]
        ns = [r["n"] for r in rs]
        for name, mk in zip(calg.ALGORITHMS, ("o", "s", "^", "v")):
            ax.plot(ns, [r[f"ce_{name}"] for r in rs], marker=mk, color=ALG_COLORS[name], label=ALG_LABEL[name])
        ax.set(xscale="log", xlabel="context length n", ylabel="test CE (nats)", title=task_name(P))
        ax.set_xticks(ns, [str(n) for n in ns])
        ax.minorticks_off()
    axes[0].legend(fontsize="x-small")
    return fig
